"""Per-provider limits: requests per minute, tokens per minute, requests in flight, retry-after.

`Limiter.slot()` waits, in order, for a concurrency place, the retry-after gate, one RPM unit and
the request's TPM units. Rate units are taken last because a request holding one must be about to
send: the leaky buckets refill with time, so a unit taken while the request still queues for a
concurrency place (or sits behind a provider's retry-after) is spent on nothing, and the provider
sees fewer requests per minute than it allows. A concurrency place, by contrast, is cheap to hold
while waiting, and holding it first keeps at most `max_concurrency` tasks competing for the
buckets. Cancelling a waiter at any stage gives back what it holds: the place is released, an
unfinished bucket acquisition takes nothing, and claimed token debt is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

from aiolimiter import AsyncLimiter

from ttc.engine._errors import ConfigError


def _positive_or_none(name: str, value: float | None) -> float | None:
    # `not value > 0` also rejects NaN, which would make every bucket comparison false.
    if value is not None and not value > 0:
        raise ConfigError(f"{name} must be > 0 or unset (unlimited), got {value!r}")
    return value


def _bucket(rate: float, period: float) -> AsyncLimiter:
    # aiolimiter refuses any single acquisition above its bucket size (max_rate), so a bucket
    # smaller than one unit (rpm=0.5) could never pass a request; the same rate over a longer
    # period gives it room for one.
    if rate >= 1:
        return AsyncLimiter(rate, period)
    return AsyncLimiter(1, period / rate)


class Limiter:
    """Caps requests per minute, tokens per minute and concurrent requests for one endpoint."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        max_concurrency: int = 64,
        *,
        period: float = 60.0,
    ) -> None:
        self._rpm = _positive_or_none("rpm", rpm)
        self._tpm = _positive_or_none("tpm", tpm)
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise ConfigError(f"max_concurrency must be an integer, got {max_concurrency!r}")
        if max_concurrency <= 0:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        if not (period > 0 and math.isfinite(period)):
            raise ConfigError(f"period must be a positive number of seconds, got {period!r}")
        self._max_concurrency = max_concurrency
        # Neither AsyncLimiter nor Semaphore touches the event loop until first used, so a Limiter
        # can be built before the loop runs (in config loading, say).
        self._rpm_bucket = _bucket(rpm, period) if rpm is not None else None
        self._tpm_bucket = _bucket(tpm, period) if tpm is not None else None
        self._places = asyncio.Semaphore(max_concurrency)
        # Tokens used beyond estimates, paid by the next acquisition: aiolimiter has no
        # non-blocking charge, and its level is private.
        self._debt = 0.0
        # The retry-after gate: closed while `_gate_timer` is pending; it opens when the timer
        # fires at `_gate_until` and wakes every future in `_gate_waiters` (a dict, for FIFO order
        # and O(1) removal of cancelled waiters).
        self._gate_until = -math.inf
        self._gate_timer: asyncio.TimerHandle | None = None
        self._gate_waiters: dict[asyncio.Future[None], None] = {}
        self._in_flight = 0
        self._max_in_flight = 0

    @property
    def rpm(self) -> float | None:
        """Configured requests per period; None means unlimited."""
        return self._rpm

    @property
    def tpm(self) -> float | None:
        """Configured tokens per period; None means unlimited."""
        return self._tpm

    @property
    def max_concurrency(self) -> int:
        """Configured cap on slots held at once."""
        return self._max_concurrency

    @property
    def in_flight(self) -> int:
        """Slots whose body is running now (all waits passed, not yet exited)."""
        return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """High-water mark of `in_flight`."""
        return self._max_in_flight

    def slot(self, est_tokens: int = 0) -> contextlib.AbstractAsyncContextManager[None]:
        """Wait for a place, the gate, one request unit and `est_tokens` (plus debt) tokens."""
        if est_tokens < 0:
            raise ValueError(f"est_tokens must be >= 0, got {est_tokens!r}")
        return self._slot(est_tokens)

    @contextlib.asynccontextmanager
    async def _slot(self, est_tokens: int) -> AsyncIterator[None]:
        # The semaphore releases on any exit, including cancellation during the waits below.
        async with self._places:
            await self._pass_gate()
            if self._rpm_bucket is not None:
                await self._rpm_bucket.acquire(1)
            await self._take_tokens(est_tokens)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            try:
                yield
            finally:
                self._in_flight -= 1

    def reconcile(self, estimated: int, actual: int) -> None:
        """Charge tokens used beyond the estimate to the next slot; estimates too high are kept."""
        if self._tpm_bucket is not None and actual > estimated:
            self._debt += actual - estimated

    def defer(self, seconds: float) -> None:
        """Close the gate to new slots for `seconds` from now; never moves the gate earlier."""
        if not seconds > 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        if until <= self._gate_until:
            return
        self._gate_until = until
        if self._gate_timer is not None:
            self._gate_timer.cancel()
        self._gate_timer = loop.call_at(until, self._open_gate)

    def _open_gate(self) -> None:
        self._gate_timer = None
        waiters = list(self._gate_waiters)
        self._gate_waiters.clear()
        for fut in waiters:
            if not fut.done():  # a cancelled waiter's future is already done
                fut.set_result(None)

    async def _pass_gate(self) -> None:
        # Each turn waits on a future that only the gate timer resolves. The loop re-checks
        # because a defer() may arrive between the wake-up and this task running again.
        while self._gate_timer is not None:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._gate_waiters[fut] = None
            try:
                await fut
            finally:
                self._gate_waiters.pop(fut, None)

    async def _take_tokens(self, est_tokens: int) -> None:
        bucket = self._tpm_bucket
        if bucket is None:
            return
        # Claim the whole debt before waiting, so two waiters never both pay it.
        debt, self._debt = self._debt, 0.0
        total = est_tokens + debt
        # aiolimiter raises for amounts above its bucket size; what does not fit stays debt for
        # the next slot rather than being forgotten.
        amount = min(total, bucket.max_rate)
        if amount > 0:
            try:
                await bucket.acquire(amount)
            except BaseException:
                # Cancelled: this request never sends, so it pays nothing and returns the debt.
                self._debt += debt
                raise
        self._debt += total - amount
