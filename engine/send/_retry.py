"""When to retry a failed attempt and how long to wait first: the engine's one backoff policy.

Providers never retry; they raise from the `ttc.engine.contract._errors` tree and the engine asks
this policy. Delays grow exponentially up to `max_delay` and are jittered downwards so that
requests failing together do not retry together; a provider's retry-after is a floor that wins even
over `max_delay`, because retrying sooner only earns another refusal.

A retry-after is honoured only when it is above 0 and at most `max_retry_after` (60 s), as the
official OpenAI Python client does (1.x: `0 < retry_after <= 60`, else its own backoff; the 3.x
installed here raised its cap to 120 s and gives up instead of retrying above it): a server that
asks for `Retry-After: 999999999` gets our own backoff, so a hostile or broken server cannot park
a run for years. Every wait sits between two attempts, so it counts against `max_attempts`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ttc.engine.contract._errors import ConfigError, ProviderError, RateLimited

# 2**64 seconds dwarfs any sensible max_delay; capping the exponent keeps huge attempt counts
# from overflowing a float.
_MAX_EXPONENT = 64
# The longest wait a server's word (retry-after, a rate-limit reset) can impose; past it, our own
# backoff (or, for the limiter's gate, this long) stands instead.
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry budget and exponential backoff with downward jitter and a retry-after floor
    (honoured when in (0, `max_retry_after`], else ignored for our own backoff)."""

    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 60.0
    jitter: float = 0.5
    max_retry_after: float = MAX_RETRY_AFTER_S

    def __post_init__(self) -> None:
        """Reject settings that would never retry sensibly."""
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError(f"max_attempts must be an integer, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        # `not x >= 0` also rejects NaN.
        if not self.base_delay >= 0:
            raise ConfigError(f"base_delay must be >= 0 seconds, got {self.base_delay!r}")
        if not self.max_delay >= 0:
            raise ConfigError(f"max_delay must be >= 0 seconds, got {self.max_delay!r}")
        if not 0 <= self.jitter <= 1:
            raise ConfigError(f"jitter must be in [0, 1], got {self.jitter!r}")
        if not self.max_retry_after >= 0:
            raise ConfigError(f"max_retry_after must be >= 0 seconds, got {self.max_retry_after!r}")

    def should_retry(self, attempt: int, error: ProviderError) -> bool:
        """Whether to try again after `attempt` attempts, the last of which raised `error`."""
        return error.retryable and attempt < self.max_attempts

    def delay(self, attempt: int, error: ProviderError, rng: random.Random) -> float:
        """Seconds to wait before the attempt after `attempt` (1 after the first failure)."""
        if attempt < 1:
            raise ValueError(f"attempt counts from 1, got {attempt!r}")
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** min(attempt - 1, _MAX_EXPONENT))
        wait = rng.uniform(ceiling * (1 - self.jitter), ceiling)
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        if retry_after is not None and self.honours(retry_after):
            wait = max(wait, retry_after)
        return wait

    def honours(self, retry_after: float) -> bool:
        """Whether a server's retry-after is followed: above 0 and at most `max_retry_after`
        (NaN and infinity are not)."""
        return 0 < retry_after <= self.max_retry_after
