"""The statistics behind `benchmarks/paper.py`'s tables and figures, from the runs' summary.json.

Means and standard deviations are over seeds; a standard deviation is the sample one (n - 1),
none for a single seed (tables say "1 seed", figures draw no spread). Coverage and accuracy are
in percent, gains in points. A round a run did not reach (a method with fewer rounds) carries
its last coverage forward; a matched-budget `unif` runs its later rounds with no samples, so its
summary already carries its coverage forward, as the paper does.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine.journal import read_journal
from ttc.engine.report import maj_at_k, pass_at_k

SIM_BANNER = "simulated (sim provider): measures the machinery, not the method"
# The components of a round's tokens, bottom to top in the usage figure.
USAGE = (("input_tokens", "prompt"), ("thinking_tokens", "thinking"), ("output_tokens", "response"))


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run of the grid: its cell and its summary.json (and its directory, whose
    journal gives pass@k and maj@k)."""

    suite: str
    method: str
    seed: int
    summary: Mapping[str, Any]
    path: Path | None = None


# Student's t at 0.975 for 1..30 degrees of freedom (a 95% two-sided interval over seeds); past
# 30, the normal's 1.96 is within 2%.
_T975 = tuple(
    float(t)
    for t in [
        "12.706",
        "4.303",
        "3.182",
        "2.776",
        "2.571",
        "2.447",
        "2.365",
        "2.306",
        "2.262",
        "2.228",
        "2.201",
        "2.179",
        "2.160",
        "2.145",
        "2.131",
        "2.120",
        "2.110",
        "2.101",
        "2.093",
        "2.086",
        "2.080",
        "2.074",
        "2.069",
        "2.064",
        "2.060",
        "2.056",
        "2.052",
        "2.048",
        "2.045",
        "2.042",
    ]
)


def t975(df: int) -> float:
    """Student's t quantile at 0.975 with `df` degrees of freedom."""
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True, slots=True)
class Stat:
    """A mean and a standard deviation over seeds (None for one seed), and their values."""

    mean: float
    std: float | None
    values: tuple[float, ...]

    def text(self, digits: int = 1) -> str:
        if self.std is None:
            return f"{self.mean:.{digits}f} (1 seed)"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The 95% t-interval of the mean over seeds (None for one seed)."""
        if self.std is None:
            return None
        half = t975(len(self.values) - 1) * self.std / math.sqrt(len(self.values))
        return (self.mean - half, self.mean + half)

    def interval_text(self, digits: int = 1, signed: bool = False, percent: bool = False) -> str:
        """`41.2 [35.0, 47.5]`: the mean and its 95% interval over seeds (1 seed: none); a
        `percent` interval is cut to [0, 100], where a t-interval of a share may overrun."""
        f = f"+.{digits}f" if signed else f".{digits}f"
        ci = self.ci95
        if ci is None:
            return f"{self.mean:{f}} (1 seed)"
        lo, hi = (max(0.0, ci[0]), min(100.0, ci[1])) if percent else ci
        return f"{self.mean:{f}} [{lo:{f}}, {hi:{f}}]"

    def json(self) -> dict[str, Any]:
        ci = self.ci95
        return {
            "mean": self.mean,
            "std": self.std,
            "ci95": None if ci is None else list(ci),
            "values": list(self.values),
        }


def stat(values: Sequence[float]) -> Stat:
    std = statistics.stdev(values) if len(values) > 1 else None
    return Stat(statistics.fmean(values), std, tuple(values))


def _per_round(run: Run, key: str, rounds: int) -> list[float]:
    """A per-round quantity of a run, its last value carried forward to `rounds` rounds."""
    values = [float(r[key]) for r in run.summary["rounds"]]
    return values + [values[-1]] * (rounds - len(values)) if values else [0.0] * rounds


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
        return self.by_round("coverage")

    def by_round(self, key: str) -> list[Stat]:
        """Coverage or accuracy (`key`) per round, in percent, over seeds."""
        per_run = [_per_round(r, key, self.rounds) for r in self.runs]
        return [stat([100 * v[t] for v in per_run]) for t in range(self.rounds)]

    def all_tokens_by_round(self) -> list[float]:
        """Prompt + thinking + response tokens per round, mean over seeds (the paper's Table 4)."""
        parts = [self.mean_by_round(key) for key, _ in USAGE]
        return [sum(values) for values in zip(*parts, strict=True)]

    def mean_by_round(self, key: str, cumulative: bool = False) -> list[float]:
        per_run = [_per_round_tokens(r, key, self.rounds) for r in self.runs]
        if cumulative:
            per_run = [list(itertools.accumulate(v)) for v in per_run]
        return [statistics.fmean(v[t] for v in per_run) for t in range(self.rounds)]

    def json(self) -> dict[str, Any]:
        return {
            "runs": len(self.runs),
            "seeds": self.seeds,
            "coverage_pct": self.final("coverage").json(),
            "accuracy_pct": self.final("accuracy").json(),
            "output_tokens": self.total("output_tokens").json(),
            "coverage_pct_by_round": [s.json() for s in self.coverage_by_round()],
            "accuracy_pct_by_round": [s.json() for s in self.by_round("accuracy")],
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


def suite_name(suite: str, header: Mapping[str, Any]) -> str:
    """How tables and figures name a suite: the LiveCodeBench test fixture as a fixture."""
    return str(header.get("suite_labels", {}).get(suite, suite))


def differences(stats: Sequence[MethodStats], against: str) -> dict[str, Stat]:
    """Final-round coverage of each method minus `against`'s, in points, paired by seed."""
    base = next((m for m in stats if m.method == against), None)
    if base is None:
        return {}
    theirs = {r.seed: 100 * float(r.summary["coverage"]) for r in base.runs}
    out = {}
    for m in stats:
        if m.method == against:
            continue
        paired = [
            100 * float(r.summary["coverage"]) - theirs[r.seed] for r in m.runs if r.seed in theirs
        ]
        if paired:
            out[m.method] = stat(paired)
    return out


def warmup_sampling(run: Run, k: int) -> dict[str, float] | None:
    """The model's pass@1, pass@K (unbiased, Chen et al. 2021) and maj@K on the suite, from the
    warm-up's K samples of every question (the run's journal); None with K = 1 or no journal."""
    if k < 2 or run.path is None or not (run.path / "journal.jsonl").is_file():
        return None
    by_k: dict[str, dict[int, tuple[str | None, bool]]] = {}
    for ev in read_journal(run.path / "journal.jsonl"):
        if ev["ev"] == "verdict" and int(ev["round"]) == 1:
            answer = ev.get("answer")
            key = None if answer is None else " ".join(str(answer).split())
            by_k.setdefault(str(ev["item"]), {})[int(ev["k"])] = (key, bool(ev.get("correct")))
    # In k order: maj@K's tie goes to the answer of the lowest k, whatever order they landed in.
    full = [[s[i] for i in sorted(s)] for s in by_k.values() if len(s) >= k]
    if not full:
        return None

    def mean(values: list[float]) -> float:
        return 100 * statistics.fmean(values)

    return {
        "pass@1": mean([pass_at_k(len(s), sum(c for _, c in s), 1) for s in full]),
        f"pass@{k}": mean([pass_at_k(len(s), sum(c for _, c in s), k) for s in full]),
        f"maj@{k}": mean([maj_at_k(s, k) for s in full]),
        "questions": float(len(full)),
    }
