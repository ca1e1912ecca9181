"""The statistics behind `benchmarks/paper.py`'s tables and figures, from the runs' summary.json.

Means and standard deviations are over seeds; a standard deviation is the sample one (n - 1),
none for a single seed (tables say "1 seed", figures draw no spread). Coverage and accuracy are
in percent, gains in points. A round a run did not reach (a method with fewer rounds) carries
its last coverage forward; a matched-budget `unif` runs its later rounds with no samples, so its
summary already carries its coverage forward, as the paper does.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    """A mean and a standard deviation over seeds (None for one seed), and their values."""

    mean: float
    std: float | None
    values: tuple[float, ...]

    def text(self, digits: int = 1) -> str:
        if self.std is None:
            return f"{self.mean:.{digits}f} (1 seed)"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}"

    def json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "values": list(self.values)}


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
