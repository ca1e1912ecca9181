"""RetryPolicy: backoff growth, cap, jitter bounds, retry-after floor, and the retry budget."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from ttc.engine.contract._errors import (
    BadRequest,
    ConfigError,
    Fatal,
    ProviderError,
    RateLimited,
    Transient,
)
from ttc.engine.send._retry import RetryPolicy


def test_delays_grow_exponentially_then_cap() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=10.0, jitter=0.0)
    rng = random.Random(0)
    delays = [policy.delay(attempt, Transient(), rng) for attempt in range(1, 9)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_huge_attempt_counts_stay_capped() -> None:
    policy = RetryPolicy(jitter=0.0)
    assert policy.delay(10_000, Transient(), random.Random(0)) == policy.max_delay


@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.5, 1.0])
def test_jitter_stays_within_bounds(jitter: float) -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=30.0, jitter=jitter)
    rng = random.Random(1234)
    for attempt in range(1, 10):
        ceiling = min(30.0, 2.0 ** (attempt - 1))
        draws = [policy.delay(attempt, Transient(), rng) for _ in range(200)]
        assert all(ceiling * (1 - jitter) <= d <= ceiling for d in draws)
        if jitter:
            # Jitter really spreads the delays over most of the band, not one corner of it.
            spread = max(draws) - min(draws)
            assert spread >= 0.8 * ceiling * jitter


def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    policy = RetryPolicy()
    first = [policy.delay(a, Transient(), random.Random(7)) for a in range(1, 6)]
    again = [policy.delay(a, Transient(), random.Random(7)) for a in range(1, 6)]
    assert first == again


def test_retry_after_is_a_floor_even_above_max_delay() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=10.0)
    rng = random.Random(3)
    for attempt in range(1, 8):
        assert policy.delay(attempt, RateLimited(retry_after=30), rng) >= 30


def test_short_retry_after_does_not_cut_the_backoff() -> None:
    policy = RetryPolicy(base_delay=8.0, max_delay=60.0, jitter=0.0)
    assert policy.delay(1, RateLimited(retry_after=1.0), random.Random(0)) == 8.0


def test_rate_limited_without_retry_after_backs_off_normally() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=60.0, jitter=0.0)
    assert policy.delay(3, RateLimited(), random.Random(0)) == 2.0


@pytest.mark.parametrize("error", [Fatal("no such model"), BadRequest("bad prompt")])
def test_non_retryable_errors_are_not_retried(error: ProviderError) -> None:
    policy = RetryPolicy(max_attempts=10)
    assert not policy.should_retry(1, error)


@pytest.mark.parametrize("error", [Transient("503"), RateLimited(retry_after=2.0)])
def test_max_attempts_is_the_total_budget(error: ProviderError) -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.should_retry(a, error) for a in (1, 2, 3, 4)] == [True, True, False, False]


def test_a_single_attempt_never_retries() -> None:
    assert not RetryPolicy(max_attempts=1).should_retry(1, Transient())


def test_attempt_counts_from_one() -> None:
    with pytest.raises(ValueError, match="attempt"):
        RetryPolicy().delay(0, Transient(), random.Random(0))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -1}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"base_delay": -0.1}, "base_delay"),
        ({"base_delay": math.nan}, "base_delay"),
        ({"max_delay": -1.0}, "max_delay"),
        ({"jitter": -0.1}, "jitter"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": math.nan}, "jitter"),
    ],
)
def test_bad_config_raises_config_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        RetryPolicy(**kwargs)


def test_policy_is_a_frozen_value() -> None:
    policy = RetryPolicy()
    with pytest.raises(AttributeError):
        policy.max_attempts = 2  # type: ignore[misc]
    assert policy == RetryPolicy()


@pytest.mark.parametrize("asked", [999_999_999.0, 60.5, math.inf, math.nan, 0.0, -5.0])
def test_a_retry_after_outside_0_to_60_s_is_ignored_for_our_own_backoff(asked: float) -> None:
    # As the official OpenAI client: a server's wait is honoured only in (0, 60] seconds.
    policy = RetryPolicy(base_delay=0.5, max_delay=10.0, jitter=0.0)
    rng = random.Random(0)
    delays = [policy.delay(a, RateLimited(retry_after=asked), rng) for a in range(1, 7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0]


def test_a_retry_after_up_to_the_cap_is_honoured() -> None:
    policy = RetryPolicy(base_delay=0.5, jitter=0.0)
    assert policy.delay(1, RateLimited(retry_after=60.0), random.Random(0)) == 60.0
    short = RetryPolicy(base_delay=0.5, jitter=0.0, max_retry_after=5.0)
    assert short.delay(1, RateLimited(retry_after=6.0), random.Random(0)) == 0.5


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_bad_retry_after_cap_is_a_config_error(bad: float) -> None:
    with pytest.raises(ConfigError, match="max_retry_after"):
        RetryPolicy(max_retry_after=bad)
