"""`ttc report DIR --timeline P.png`: a run over time, drawn from its journal.

Every journal line carries its wall-clock time (`at`). Four panels share the time axis (minutes
since the run's first line; each session's start is marked, and a gap between sessions stays a
gap):
- requests per minute achieved (samples that got a response or a final error, counted when
  they landed, in the minute up to each point: what a per-minute limit counts) against the
  limit in force (configured, or learned from the provider's headers:
  the `limiter` lines) and the configured `--rpm`; answers served from the response cache sent
  no request and are drawn apart, not counted as requests;
- tokens per minute (the policy's input, output and thinking tokens) against the same for TPM;
- retries by kind, per bin, and the 429s among them (final 429s included);
- requests in flight against the adaptive concurrency cap (the `limiter` lines).
Each round's start (its first sample landed) is a vertical line labelled with its number, as
every output numbers rounds (1 is the warm-up); each `ttc ctl` change (the `control` lines: a
pause, a resume, new limits) is a vertical line labelled with what it did (a new `--rpm` also
steps the limit in force). A run answered by the offline simulator says so
in the title.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttc.engine._util import read_json
from ttc.engine.contract import ConfigError
from ttc.engine.journal import LimitsSteered, decode, read_journal
from ttc.engine.report._plots import check_plot_path, pyplot, save, wrap_title

# Bin widths the axis may use, in seconds: about 100 bins over the run.
_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


@dataclass
class Timeline:
    """A run's events, binned: per-bin counts, and the limiter's samples as they were taken."""

    t0: float
    bin_s: float
    bins: int
    requests: list[int]
    tokens: list[int]
    rate_limited: list[int]
    retries: dict[str, list[int]]
    # (minutes, in flight, cap, rpm in force, tpm in force), one per `limiter` line.
    limiter: list[tuple[float, int, int, float | None, float | None]] = field(default_factory=list)
    sessions: list[float] = field(default_factory=list)  # minutes of each session's start
    # Answers served from the response cache, per bin: no request went out for them.
    cached: list[int] = field(default_factory=list)
    # Round number -> minutes of its first sample's landing (the journal's `round`).
    rounds: dict[int, float] = field(default_factory=dict)
    configured_rpm: float | None = None
    configured_tpm: float | None = None
    # (minutes, what it did) of each `ttc ctl` change.
    steered: list[tuple[float, str]] = field(default_factory=list)

    def minutes(self) -> list[float]:
        """Each bin's middle, in minutes since the run's first line."""
        return [(i + 0.5) * self.bin_s / 60 for i in range(self.bins)]

    def per_minute(self, counts: list[int]) -> list[float]:
        """What a per-minute limit counts: the requests (or tokens) in the minute up to each bin's
        end (from the run's start in its first minute), or the mean per minute of bins longer
        than one. A limiter filling a server's short window sends in bursts that a per-bin rate
        would show far above the limit although no minute holds more than it."""
        if self.bin_s >= 60:
            return [c * 60 / self.bin_s for c in counts]
        span = round(60 / self.bin_s)
        total, out = 0, []
        for i, c in enumerate(counts):
            total += c - (counts[i - span] if i >= span else 0)
            out.append(float(total))
        return out


def _bin_width(span_s: float) -> float:
    return next((b for b in _BINS_S if span_s / b <= 120), _BINS_S[-1])


def read_timeline(run_dir: Path) -> Timeline:
    """The run in `run_dir`, binned from its journal (a DataError names a bad line)."""
    journal = run_dir / "journal.jsonl"
    if not journal.is_file():
        raise ConfigError(f"--timeline: {run_dir} has no journal.jsonl (is it a run directory?)")
    lines = [line for line in read_journal(journal) if isinstance(line.get("at"), int | float)]
    if not lines:
        raise ConfigError(
            f"--timeline: {journal} has no line with a time (`at`): it was written by a ttc "
            "older than the timeline"
        )
    t0 = min(float(line["at"]) for line in lines)
    span = max(float(line["at"]) for line in lines) - t0
    width = _bin_width(span)
    n = max(1, math.ceil((span + 1e-9) / width))
    tl = Timeline(t0, width, n, [0] * n, [0] * n, [0] * n, {}, cached=[0] * n)
    retries: dict[str, Counter[int]] = defaultdict(Counter)
    for line in lines:
        _add(tl, line, min(n - 1, int((float(line["at"]) - t0) / width)), retries)
        if line["ev"] == LimitsSteered.KIND:
            steered = decode(line)
            if isinstance(steered, LimitsSteered):
                tl.steered.append(((float(line["at"]) - t0) / 60, steered.describe()))
    tl.retries = {kind: [c[i] for i in range(n)] for kind, c in sorted(retries.items())}
    config = run_dir / "config.json"
    if config.is_file():
        cfg = read_json(config).get("config", {})
        tl.configured_rpm, tl.configured_tpm = cfg.get("rpm"), cfg.get("tpm")
    return tl


def _add(tl: Timeline, line: dict[str, Any], i: int, retries: dict[str, Counter[int]]) -> None:
    ev, minute = line["ev"], (float(line["at"]) - tl.t0) / 60
    if ev == "sample":
        if isinstance(line.get("round"), int):
            tl.rounds[line["round"]] = min(tl.rounds.get(line["round"], minute), minute)
        if line.get("cache"):
            tl.cached[i] += 1
        else:
            tl.requests[i] += 1
        if line.get("ok"):
            tl.tokens[i] += sum(int(u) for u in line.get("usage", ()))
        elif line.get("error") == "rate_limited":
            tl.rate_limited[i] += 1
    elif ev == "retry":
        kind = str(line.get("error", "error"))
        retries[kind][i] += 1
        tl.rate_limited[i] += kind == "rate_limited"
    elif ev == "limiter":
        rpm, tpm = line.get("rpm"), line.get("tpm")
        tl.limiter.append((minute, int(line["in_flight"]), int(line["cap"]), rpm, tpm))
    elif ev == "start":
        tl.sessions.append(minute)


def plot_timeline(tl: Timeline, title: str, path: Path) -> None:
    """Writes the four panels to `path`."""
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    x = tl.minutes()
    lim_t = [s[0] for s in tl.limiter]
    how = "mean per bin" if tl.bin_s >= 60 else "in the minute up to each point"
    _rate_panel(
        axes[0],
        x,
        tl.per_minute(tl.requests),
        lim_t,
        [s[3] for s in tl.limiter],
        tl.configured_rpm,
        f"requests / min ({how})",
        "--rpm",
    )
    if any(tl.cached):
        axes[0].plot(
            x,
            tl.per_minute(tl.cached),
            marker=".",
            lw=1,
            color="#9467bd",
            label=f"cache answers / min, not requests ({sum(tl.cached):,})",
        )
        axes[0].set_autoscaley_on(True)  # _rate_panel's floor at 0 had fixed the limits
        axes[0].relim()
        axes[0].autoscale_view()
        axes[0].set_ylim(bottom=0)
        axes[0].legend(loc="lower right", fontsize=7)
    _rate_panel(
        axes[1],
        x,
        tl.per_minute(tl.tokens),
        lim_t,
        [s[4] for s in tl.limiter],
        tl.configured_tpm,
        f"tokens / min ({how})",
        "--tpm",
    )
    ax = axes[2]
    bottom = [0] * tl.bins
    for kind, counts in tl.retries.items():
        ax.bar(x, counts, width=tl.bin_s / 60, bottom=bottom, label=f"retries: {kind}", alpha=0.7)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    ax.plot(x, tl.rate_limited, color="#d62728", marker=".", lw=1, label="429s (rate limited)")
    ax.set_ylabel(f"per {tl.bin_s:g} s")
    ax.legend(loc="upper right", fontsize=7)
    ax = axes[3]
    if tl.limiter:
        ax.step(lim_t, [s[1] for s in tl.limiter], where="post", label="in flight")
        ax.step(lim_t, [s[2] for s in tl.limiter], where="post", ls="--", label="concurrency cap")
        ax.legend(loc="upper right", fontsize=7)
    else:
        ax.text(0.5, 0.5, "no limiter samples in this journal", ha="center", transform=ax.transAxes)
    ax.set_ylabel("requests")
    ax.set_xlabel("minutes since the run's first journal line")
    for ax in axes:
        for start in tl.sessions[1:]:
            ax.axvline(start, color="grey", lw=0.8, ls=":")
        for start in tl.rounds.values():
            ax.axvline(start, color="#8c564b", lw=0.8, ls="-.", alpha=0.7)
        ax.grid(alpha=0.3)
    for at, what in tl.steered:
        for ax in axes:
            ax.axvline(at, color="#e377c2", lw=1.2, ls="--")
        axes[0].annotate(  # above the legend, which sits in the lower right
            f"ttc ctl {what}",
            (at, 0.38),
            xycoords=("data", "axes fraction"),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=7,
            color="#e377c2",
            rotation=90,
            va="bottom",
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    for i, (number, start) in enumerate(sorted(tl.rounds.items())):
        axes[0].annotate(  # staggered: short rounds start close together
            f"round {number}",
            (start, 1.0 - 0.08 * (i % 3)),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            va="top",
            fontsize=7,
            color="#8c564b",
        )
    fig.suptitle(wrap_title(title, 9.0), fontsize=9)
    fig.tight_layout()
    save(fig, path, dpi=110)


def _rate_panel(
    ax: Any,
    x: list[float],
    achieved: list[float],
    lim_t: list[float],
    in_force: list[float | None],
    configured: float | None,
    label: str,
    flag: str,
) -> None:
    ax.plot(x, achieved, marker=".", lw=1.2, label=f"achieved {label}")
    known = [(t, v) for t, v in zip(lim_t, in_force, strict=True) if v is not None]
    if known:
        ax.step(
            [t for t, _ in known],
            [v for _, v in known],
            where="post",
            ls="--",
            color="#2ca02c",
            label="limit in force (configured or learned)",
        )
    if configured is not None:
        ax.axhline(configured, color="#7f7f7f", ls=":", label=f"{flag} {configured:g}")
    ax.set_ylabel(label.split(" (")[0])
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=7)


def timeline(run_dir: Path, path: Path) -> str:
    """`ttc report DIR --timeline PATH`: writes the plot; returns what to print."""
    check_plot_path(path, "--timeline")
    tl = read_timeline(run_dir)
    summary = run_dir / "summary.json"
    info = read_json(summary) if summary.is_file() else {}
    label = f"{info.get('method', '?')} on {info.get('suite', '?')}, model {info.get('model', '?')}"
    simulated = " (SIMULATED: the offline sim provider answered)" if info.get("simulated") else ""
    plot_timeline(tl, f"{run_dir.name}: {label}{simulated}", path)
    requests, cached = sum(tl.requests), sum(tl.cached)
    served = f", {cached:,} answers from the cache" if cached else ""
    note = f"timeline: {path} ({requests:,} requests{served}, bins of {tl.bin_s:g} s"
    return note + ("; simulated)" if simulated else ")")
