"""The statistics module against values worked out by hand (or by scipy's definitions)."""

from __future__ import annotations

import math

import pytest

from ttc.engine.report._stats import (
    bootstrap_mean,
    maj_at_k,
    mcnemar_exact,
    paired_difference,
    pass_at_k,
)


def test_mcnemar_exact_known_values() -> None:
    # n = 12, min = 2: 2 * (1 + 12 + 66) / 4096
    assert mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(2, 10) == mcnemar_exact(10, 2)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0  # capped at 1
    # scipy.stats.binomtest(0, 6).pvalue == 0.03125
    assert mcnemar_exact(6, 0) == pytest.approx(0.03125)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # fewer wrong than k: every draw of k has a right one
    # the closed form, for a large n where the product must stay exact
    assert pass_at_k(200, 7, 10) == pytest.approx(1 - math.comb(193, 10) / math.comb(200, 10))
    with pytest.raises(ValueError, match="0 < k <= n"):
        pass_at_k(3, 1, 4)


def test_maj_at_k() -> None:
    answers = [("1", False), ("2", True), ("2", True), ("1", False), ("1", False)]
    assert maj_at_k(answers, 3) == 1.0  # 2 beats 1, two to one
    assert maj_at_k(answers, 5) == 0.0  # 1 three times
    assert maj_at_k(answers, 2) == 0.0  # a tie goes to the first given
    assert maj_at_k([(None, False), (None, False)], 2) == 0.0


def test_bootstrap_mean_is_seeded_and_covers_the_mean() -> None:
    values = [1.0] * 30 + [0.0] * 70
    a, b = bootstrap_mean(values), bootstrap_mean(values)
    assert a == b
    assert a.estimate == pytest.approx(0.3)
    # the normal approximation: 0.3 +- 1.96 * sqrt(0.21 / 100) = [0.210, 0.390]
    assert a.lo == pytest.approx(0.21, abs=0.02)
    assert a.hi == pytest.approx(0.39, abs=0.02)
    assert bootstrap_mean([1.0] * 5).json() == [1.0, 1.0]
    assert bootstrap_mean([]).estimate == 0.0


def test_paired_difference_resamples_clusters() -> None:
    a = [1.0, 1.0, 0.0, 1.0] * 10
    b = [0.0, 1.0, 0.0, 0.0] * 10
    d = paired_difference(a, b)
    assert d.estimate == pytest.approx(0.5)
    assert d.lo < 0.5 < d.hi
    assert d.lo > 0.2
    # one cluster of everything: no spread left to resample
    one = paired_difference(a, b, clusters=["q"] * 40)
    assert (one.lo, one.hi) == pytest.approx((0.5, 0.5))
    # identical arms: a difference of exactly zero
    assert paired_difference(a, a).json() == [0.0, 0.0]
    assert d.points(signed=True).startswith("+50.0 [")
