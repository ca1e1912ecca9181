"""The tables and figures of `benchmarks/paper.py`, computed from the runs' summary.json files.

Means and standard deviations are over seeds; a standard deviation is the sample one (n - 1),
0 for a single seed. Coverage and accuracy are in percent, gains in points. A round a run did not
reach (a method with fewer rounds) carries its last coverage forward; a matched-budget `unif`
runs its later rounds with no samples, so its summary already carries its coverage forward, as
the paper does.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ttc.engine import PRESETS

SIM_BANNER = "simulated (sim provider): measures the machinery, not the method"
# The components of a round's tokens, bottom to top in the usage figure.
USAGE = (("input_tokens", "prompt"), ("thinking_tokens", "thinking"), ("output_tokens", "response"))


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run of the grid: its cell and its summary.json."""

    suite: str
    method: str
    seed: int
    summary: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Stat:
    """A mean and a standard deviation over seeds, and the values they come from."""

    mean: float
    std: float
    values: tuple[float, ...]

    def text(self, digits: int = 1) -> str:
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"

    def json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "values": list(self.values)}


def stat(values: Sequence[float]) -> Stat:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Stat(statistics.fmean(values), std, tuple(values))


def _per_round(run: Run, key: str, rounds: int) -> list[float]:
    """A per-round quantity of a run, its last value carried forward to `rounds` rounds."""
    values = [float(r[key]) for r in run.summary["rounds"]]
    return values + [values[-1]] * (rounds - len(values)) if values else [0.0] * rounds


def _cumulative(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


@dataclass(frozen=True, slots=True)
class MethodStats:
    """One method on one suite, over seeds."""

    method: str
    runs: tuple[Run, ...]
    rounds: int

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    def final(self, key: str) -> Stat:
        return stat([100 * float(r.summary[key]) for r in self.runs])

    def total(self, key: str) -> Stat:
        return stat([float(r.summary[key]) for r in self.runs])

    def coverage_by_round(self) -> list[Stat]:
        per_run = [_per_round(r, "coverage", self.rounds) for r in self.runs]
        return [stat([100 * v[t] for v in per_run]) for t in range(self.rounds)]

    def mean_by_round(self, key: str, cumulative: bool = False) -> list[float]:
        per_run = [_per_round_tokens(r, key, self.rounds) for r in self.runs]
        if cumulative:
            per_run = [_cumulative(v) for v in per_run]
        return [statistics.fmean(v[t] for v in per_run) for t in range(self.rounds)]

    def json(self) -> dict[str, Any]:
        return {
            "runs": len(self.runs),
            "seeds": self.seeds,
            "coverage_pct": self.final("coverage").json(),
            "accuracy_pct": self.final("accuracy").json(),
            "output_tokens": self.total("output_tokens").json(),
            "coverage_pct_by_round": [s.json() for s in self.coverage_by_round()],
            "cumulative_output_tokens_by_round": self.mean_by_round("output_tokens", True),
            "tokens_by_round": {name: self.mean_by_round(key) for key, name in USAGE},
        }


def _per_round_tokens(run: Run, key: str, rounds: int) -> list[float]:
    """Tokens per round; a round the run did not reach spent none."""
    values = [float(r[key]) for r in run.summary["rounds"]]
    return values + [0.0] * (rounds - len(values))


def by_suite(runs: Sequence[Run], methods: Sequence[str]) -> dict[str, list[MethodStats]]:
    """suite -> the methods that finished on it, in `methods` order."""
    out: dict[str, list[MethodStats]] = {}
    for suite in dict.fromkeys(r.suite for r in runs):
        mine = [r for r in runs if r.suite == suite]
        rounds = max(len(r.summary["rounds"]) for r in mine)
        for method in methods:
            cell = tuple(sorted((r for r in mine if r.method == method), key=lambda r: r.seed))
            if cell:
                out.setdefault(suite, []).append(MethodStats(method, cell, rounds))
    return out


def gains(stats: Sequence[MethodStats], over: str = "adpt") -> dict[str, Stat]:
    """Final-round coverage of `over` minus each other method's, in points, paired by seed."""
    mine = next((m for m in stats if m.method == over), None)
    if mine is None:
        return {}
    ours = {r.seed: 100 * float(r.summary["coverage"]) for r in mine.runs}
    out = {}
    for other in stats:
        if other.method == over:
            continue
        diffs = [ours[r.seed] - 100 * float(r.summary["coverage"]) for r in other.runs]
        paired = [d for d, r in zip(diffs, other.runs, strict=True) if r.seed in ours]
        if paired:
            out[other.method] = stat(paired)
    return out


def table_json(
    suites: Mapping[str, list[MethodStats]], header: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        **header,
        "std": "sample standard deviation over seeds (n - 1); 0 for one seed",
        "suites": {
            suite: {
                "methods": {m.method: m.json() for m in stats},
                "adpt_gain_points": {k: v.json() for k, v in gains(stats).items()},
            }
            for suite, stats in suites.items()
        },
    }


def table_markdown(
    suites: Mapping[str, list[MethodStats]], methods: Sequence[str], header: Mapping[str, Any]
) -> str:
    title = "# Final-round coverage and accuracy"
    if header.get("simulated"):
        title += f": {SIM_BANNER}"
    lines = [title, ""]
    lines.append(
        f"{header['provider']} / {header['model']}; seeds {header['seeds']}; "
        f"R = {header['rounds']}; mean ± std over seeds (sample std); coverage and accuracy in %, "
        "gains in points."
    )
    if header.get("matched"):
        lines.append(f"Matched budgets: {header['matched']}.")
    shown = [m for m in methods if any(s.method == m for st in suites.values() for s in st)]

    def block(name: str, cell: Any) -> None:
        lines.extend(["", f"## {name}", ""])
        lines.append("| suite | " + " | ".join(shown) + " |")
        lines.append("| --- |" + " --- |" * len(shown))
        for suite, stats in suites.items():
            found = {s.method: s for s in stats}
            row = [cell(found[m]) if m in found else "-" for m in shown]
            lines.append(f"| {suite} | " + " | ".join(row) + " |")

    block("Final-round coverage (%)", lambda s: s.final("coverage").text())
    block("Final-round accuracy (%)", lambda s: s.final("accuracy").text())
    block("Output tokens per run (mean)", lambda s: f"{s.total('output_tokens').mean:,.0f}")
    others = [m for m in shown if m != "adpt"]
    if "adpt" in shown and others:
        lines.extend(["", "## Final-round coverage gain of adpt (points)", ""])
        lines.append("| suite | " + " | ".join(f"over {m}" for m in others) + " |")
        lines.append("| --- |" + " --- |" * len(others))
        for suite, stats in suites.items():
            g = gains(stats)
            lines.append(
                f"| {suite} | " + " | ".join(g[m].text(2) if m in g else "-" for m in others) + " |"
            )
    return "\n".join(lines) + "\n"


def write_tables(
    suites: Mapping[str, list[MethodStats]],
    methods: Sequence[str],
    header: Mapping[str, Any],
    out: Path,
) -> tuple[Path, Path]:
    md, js = out / "results.md", out / "results.json"
    md.write_text(table_markdown(suites, methods, header), encoding="utf-8")
    js.write_bytes(orjson.dumps(table_json(suites, header), option=orjson.OPT_INDENT_2))
    return md, js


# --- figures ---------------------------------------------------------------------------------


def _color(method: str) -> Any:
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    i = PRESETS.index(method) if method in PRESETS else len(PRESETS)
    return palette(i % 10)


def _title(text: str, simulated: bool) -> str:
    return f"{text}\n{SIM_BANNER}" if simulated else text


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_rounds(
    stats: Sequence[MethodStats], path: Path, title: str, labels: Mapping[str, str]
) -> None:
    """(a) Coverage per round, mean over seeds, shaded ± 0.5 std."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m in stats:
        by_round = m.coverage_by_round()
        xs = list(range(1, len(by_round) + 1))
        mean = [s.mean for s in by_round]
        low = [s.mean - 0.5 * s.std for s in by_round]
        high = [s.mean + 0.5 * s.std for s in by_round]
        color = _color(m.method)
        ax.plot(xs, mean, marker="o", color=color, label=labels.get(m.method, m.method))
        ax.fill_between(xs, low, high, color=color, alpha=0.15, linewidth=0)
    ax.set_xlabel("round (1 = warm-up)")
    ax.set_xticks(range(1, max(len(m.coverage_by_round()) for m in stats) + 1))
    ax.set_ylabel("coverage (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_tokens(
    stats: Sequence[MethodStats], path: Path, title: str, labels: Mapping[str, str]
) -> None:
    """(b) Coverage against cumulative output tokens, both means over seeds, a marker per round."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m in stats:
        xs = m.mean_by_round("output_tokens", cumulative=True)
        ys = [s.mean for s in m.coverage_by_round()]
        label = labels.get(m.method, m.method)
        ax.plot(xs, ys, marker="o", color=_color(m.method), label=label)
    ax.set_xlabel("cumulative output tokens (mean over seeds; thinking excluded)")
    ax.set_ylabel("coverage (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_usage(stats: Sequence[MethodStats], path: Path, title: str) -> None:
    """(c) Tokens per round, prompt + thinking + response stacked, one panel per method."""
    plt = _plt()
    cols = min(4, len(stats))
    rows = -(-len(stats) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.2 * cols, 2.6 * rows + 1.2), sharey=True, squeeze=False
    )
    shades = ("#c6dbef", "#fdae6b", "#3182bd")
    for ax, m in zip(axes.flat, stats, strict=False):
        xs = list(range(1, m.rounds + 1))
        bottom = [0.0] * m.rounds
        for (key, name), shade in zip(USAGE, shades, strict=True):
            values = m.mean_by_round(key)
            ax.bar(xs, values, bottom=bottom, color=shade, label=name, edgecolor="white")
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(m.method, fontsize=9, color=_color(m.method))
        ax.set_xticks(xs)
        ax.set_xlabel("round", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    for ax in axes.flat[len(stats) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("tokens per round (mean)", fontsize=8)
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", fontsize=8, ncols=3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_final(
    suites: Mapping[str, list[MethodStats]], path: Path, title: str, order: Sequence[str]
) -> None:
    """Final-round coverage per suite and method, mean with ± std bars (the paper's Figure 7)."""
    plt = _plt()
    present = {m.method for st in suites.values() for m in st}
    methods = [m for m in order if m in present]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.6 * len(suites) + 3), 5))
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        xs, ys, errs = [], [], []
        for i, stats in enumerate(suites.values()):
            found = next((m for m in stats if m.method == method), None)
            if found is not None:
                s = found.final("coverage")
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(s.mean)
                errs.append(s.std)
        ax.bar(xs, ys, width, yerr=errs, color=_color(method), label=method, capsize=2)
    ax.set_xticks(range(len(suites)))
    ax.set_xticklabels(list(suites))
    ax.set_ylabel("final-round coverage (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.set_ylim(0, 112)
    ax.legend(fontsize=8, ncols=len(methods), loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_figures(
    suites: Mapping[str, list[MethodStats]],
    out: Path,
    header: Mapping[str, Any],
    labels: Mapping[str, str],
    methods: Sequence[str],
) -> dict[str, Any]:
    """Every figure; returns their paths (per suite, and the overall one)."""
    simulated = bool(header.get("simulated"))
    seeds = ", ".join(str(s) for s in header["seeds"])
    who = f"{header['provider']} / {header['model']}; seeds {seeds}"

    def title(what: str) -> str:
        return _title(f"{what}\n{who}", simulated)

    paths: dict[str, Any] = {"suites": {}}
    for suite, stats in suites.items():
        folder = out / suite
        folder.mkdir(parents=True, exist_ok=True)
        where = f"{suite} ({int(stats[0].runs[0].summary['questions'])} questions)"
        figs = {
            "coverage_per_round": folder / "coverage_per_round.png",
            "coverage_vs_tokens": folder / "coverage_vs_output_tokens.png",
            "tokens_per_round": folder / "tokens_per_round.png",
        }
        plot_rounds(
            stats,
            figs["coverage_per_round"],
            title(f"{where}: coverage per round, mean ± 0.5 std over seeds"),
            labels,
        )
        plot_tokens(
            stats,
            figs["coverage_vs_tokens"],
            title(f"{where}: coverage vs cumulative output tokens, means over seeds"),
            labels,
        )
        plot_usage(
            stats,
            figs["tokens_per_round"],
            title(f"{where}: tokens per round (prompt + thinking + response), mean over seeds"),
        )
        paths["suites"][suite] = {k: str(v) for k, v in figs.items()}
    final = out / "final_coverage.png"
    plot_final(suites, final, title("final-round coverage, mean ± std over seeds"), methods)
    paths["final_coverage"] = str(final)
    return paths
