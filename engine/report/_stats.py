"""The statistics behind every compared number: bootstrap intervals over questions, paired
differences, the exact McNemar test, unbiased pass@k and maj@k.

Intervals are percentile bootstraps with a fixed seed, so a report printed twice says the same.
A paired difference resamples whole questions (clusters): a question's samples move together, so
K samples of one question never count as K independent trials.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Resamples of a bootstrap: the percentile interval's ends move by well under a point past this.
RESAMPLES = 2000
# The bootstrap's seed: a report's intervals are the same every time it is printed.
SEED = 0
# A resampling chunk holds at most this many draws, however large the test set.
_CHUNK = 4_000_000


@dataclass(frozen=True, slots=True)
class Interval:
    """An estimate and its two-sided interval (`level`, 0.95 by default)."""

    estimate: float
    lo: float
    hi: float

    def points(self, signed: bool = False) -> str:
        """In percentage points: `41.2 [35.0, 47.5]` (`+3.1 [-0.4, +6.6]` signed)."""
        f = "+.1f" if signed else ".1f"
        return f"{100 * self.estimate:{f}} [{100 * self.lo:{f}}, {100 * self.hi:{f}}]"

    def json(self) -> list[float]:
        """[lo, hi], as files record an interval."""
        return [self.lo, self.hi]


def _percentiles(draws: np.ndarray, estimate: float, level: float) -> Interval:
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(draws, [tail, 1.0 - tail])
    return Interval(estimate, float(lo), float(hi))


def _resampled_sums(columns: Sequence[np.ndarray], resamples: int, seed: int) -> list[np.ndarray]:
    """Each column's sum over `resamples` bootstrap resamples of its rows (the same rows drawn
    for every column), in chunks that keep memory bounded."""
    n = len(columns[0])
    rng = np.random.default_rng(seed)
    out = [np.empty(resamples) for _ in columns]
    step = max(1, _CHUNK // max(1, n))
    for start in range(0, resamples, step):
        size = min(step, resamples - start)
        # Counts of each row in each resample: a multinomial per resample, drawn at once.
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=size)
        for col, dst in zip(columns, out, strict=True):
            dst[start : start + size] = counts @ col
    return out


def bootstrap_mean(
    values: Sequence[float], *, level: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """The mean of `values` (one per question, e.g. covered or not) and its bootstrap interval."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return Interval(0.0, 0.0, 0.0)
    estimate = float(arr.mean())
    (sums,) = _resampled_sums([arr], resamples, seed)
    return _percentiles(sums / arr.size, estimate, level)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[object] | None = None,
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """mean(a) - mean(b) over pairs (a[i], b[i]) and its bootstrap interval, resampling whole
    clusters (by default each pair is its own): the samples of one question move together."""
    if len(a) != len(b):
        raise ValueError("paired_difference: a and b differ in length")
    if not a:
        return Interval(0.0, 0.0, 0.0)
    keys = list(range(len(a))) if clusters is None else list(clusters)
    index: dict[object, int] = {}
    rows = [index.setdefault(key, len(index)) for key in keys]
    diff = np.zeros(len(index))
    count = np.zeros(len(index))
    np.add.at(diff, rows, np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    np.add.at(count, rows, 1.0)
    estimate = float(diff.sum() / count.sum())
    sums, counts = _resampled_sums([diff, count], resamples, seed)
    return _percentiles(sums / np.maximum(counts, 1.0), estimate, level)


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of `b` pairs won by one side and `c` by the other
    (a binomial test of b against n = b + c at one half); 1 when no pair differs."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(1.0, 2 * tail / 2**n))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of a question with `c` correct among `n` samples (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1): 1 - C(n-c, k) / C(n, k),
    computed as a product so that it stays exact in floating point for large n."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 < k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def maj_at_k(answers: Sequence[tuple[str | None, bool]], k: int) -> float:
    """maj@k of one question: 1 if the most common answer among its first `k` samples (each
    `(answer key, correct)`; None: no answer, never counted) is a correct one, else 0. A tie
    goes to the answer given first, as self-consistency's tally breaks it."""
    first = answers[:k]
    counts = Counter(a for a, _ in first if a is not None)
    if not counts:
        return 0.0
    top = max(counts.values())
    for answer, correct in first:
        if answer is not None and counts[answer] == top:
            return 1.0 if correct else 0.0
    return 0.0  # pragma: no cover (a counted answer is in `first`)
