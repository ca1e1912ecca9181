"""Per-endpoint limits: requests per minute, tokens per minute, an adaptive concurrency cap, and a
gate that honours the server's own word on when it will take requests again.

`Limiter.slot()` waits, in order, for a concurrency place, the gate, one RPM unit and the
request's TPM units, and yields a `Ticket`. Rate units are taken last because a request holding
one must be about to send: a unit taken while the request still queues for a place is spent on
nothing, and the provider sees fewer requests per minute than it allows. Cancelling a waiter at
any stage gives back what it holds.

Sitting at a quota without tripping it. A server counts requests in a window (a minute for
OpenAI; shorter for `ttc serve --window`). A bucket that may burst its whole minute at once and
then refills at the full rate puts nearly two minutes' worth into the first window, so requests
are paced at `(1 - headroom)` of the limit until the server's own headers show its window, and
the TPM bucket bursts `headroom` of a minute's tokens: any window then holds at most the limit.

- RPM: `RequestPace` (`_pace`): even pacing on a schedule that the loop's lateness does not
  slow, or, once the headers have shown the server's sliding window, that window's budget sent
  as soon as it has room (a sliding window admits its whole budget at any moment).
- TPM: `TokenPace`, a GCRA (a virtual "bucket empty at" time), because a request's tokens are
  only estimated when it starts: the estimate is charged up front and corrected (either way)
  once the usage is known, and a request larger than the burst passes once the bucket is empty
  instead of being refused.
- Concurrency: AIMD. The cap grows by about one place per cap's worth of clean responses and is
  cut by `decrease` once per rate-limit episode: refusals of requests that started before the
  cut are the same episode and do not cut again.
- Limits the server announces (`x-ratelimit-limit-*`, parsed into `RateInfo` by the adapter)
  start the buckets when none were configured and lower them when they are stricter. A response
  saying nothing is left (`remaining` 0) closes the gate until its reset time (unless a learnt
  window is full by design), for at most `MAX_RETRY_AFTER_S` (60 s: a reset announced for next
  year is not waited for); a refused request waits at least its retry-after before its own retry
  (the retry policy, with the same cap). Nothing ever sleeps for everyone: in-flight requests
  are never held, and waits are timers on futures.
- Stragglers (`_stragglers`), with `hedge=True` only (`--hedge`): once the work fed through
  `fed()` has all been taken and none waits for a slot (the end of a run or of a round), an
  attempt far slower than the others gets a second copy, so that a hang does not hold the end
  until its timeout. The copy is billed and spends quota like any request.
- Shared (`share`, `--shared-limits`): the RPM schedule, the TPM bucket, the announced limits and
  the gate are kept in Redis for every process on one quota (`_shared`) instead of here; the
  concurrency cap stays each process's own.
- Steered (`ttc ctl`): `pause` stops new slots (in-flight requests finish), `unpause` lets them
  go on, `retune` changes the RPM, TPM and concurrency in force while the run goes on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import RateInfo
from ttc.engine.send._pace import RequestPace, TokenPace, Window
from ttc.engine.send._retry import MAX_RETRY_AFTER_S
from ttc.engine.send._stragglers import Stragglers
from ttc.engine.send._waits import Waited, note_wait

if TYPE_CHECKING:
    from ttc.engine.send._shared import SharedQuota

Ticket = int
T = TypeVar("T")
"""The sequence number of a slot: which rate-limit episode a refusal belongs to."""

# When this task's latest slot took its RPM unit: the answer the task tells of (`succeeded`) is
# its request's (the Sender's), whose headers the server wrote after that.
_SLOT: ContextVar[float | None] = ContextVar("ttc_slot_started", default=None)


def _positive_or_none(name: str, value: float | None) -> float | None:
    # `not value > 0` also rejects NaN, which would make every bucket comparison false.
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name} must be > 0 or unset (unlimited), got {value!r}")
    return value


class _AdaptiveCap:
    """A semaphore whose size moves: additive increase, multiplicative decrease (AIMD)."""

    def __init__(self, ceiling: int, adaptive: bool, decrease: float) -> None:
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.decrease = decrease
        self.cap = float(ceiling)
        self.held = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def limit(self) -> int:
        return max(1, math.floor(self.cap))

    async def acquire(self) -> None:
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                # Woken and handed a place, then cancelled before using it: pass it on.
                self.held -= 1
                self._wake()
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.held -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.held < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.held += 1
                fut.set_result(None)

    def grow(self) -> None:
        if self.adaptive and self.cap < self.ceiling:
            self.cap = min(float(self.ceiling), self.cap + 1.0 / self.cap)
            self._wake()

    def cut(self) -> None:
        if self.adaptive:
            self.cap = max(1.0, self.cap * self.decrease)


class Limiter:
    """Caps requests per minute, tokens per minute and concurrent requests for one endpoint."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        max_concurrency: int = 64,
        *,
        period: float = 60.0,
        headroom: float = 0.02,
        adaptive: bool = True,
        decrease: float = 0.7,
        learn_window: bool = True,
    ) -> None:
        _positive_or_none("rpm", rpm)
        _positive_or_none("tpm", tpm)
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise ConfigError(f"max_concurrency must be an integer, got {max_concurrency!r}")
        if max_concurrency <= 0:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        if not (period > 0 and math.isfinite(period)):
            raise ConfigError(f"period must be a positive number of seconds, got {period!r}")
        if not 0 <= headroom < 1:
            raise ConfigError(f"headroom must be in [0, 1), got {headroom!r}")
        if not 0 < decrease < 1:
            raise ConfigError(f"decrease must be in (0, 1), got {decrease!r}")
        self._period = period
        self._headroom = headroom
        self._max_concurrency = max_concurrency
        # The ceiling the run's workers were started for: `retune` may lower it, and raise it
        # back no higher (no worker would take the places above it).
        self.started_with = max_concurrency
        self._learn_window = learn_window
        # Neither pace nor the cap touches the event loop until first used, so a Limiter can be
        # built before the loop runs (in config loading, say).
        self._rpm: float | None = None
        self._tpm: float | None = None
        self._requests: RequestPace | None = None
        self._tpm_pace: TokenPace | None = None
        self._set_rpm(rpm)
        self._set_tpm(tpm)
        # Where each limit in force came from: "configured", "set" (`ttc ctl set`, `retune`) or
        # "learned" (announced by the server); None while there is none.
        self.rpm_source: str | None = None if rpm is None else "configured"
        self.tpm_source: str | None = None if tpm is None else "configured"
        self._cap = _AdaptiveCap(max_concurrency, adaptive, decrease)
        self._next_ticket = 0
        self._episode_from = 0  # refusals of tickets below this belong to the last cut
        self.cuts = 0
        # The gate: closed while `_gate_timer` is pending; it opens when the timer fires at
        # `_gate_until` and wakes every future in `_gate_waiters` (a dict, for FIFO order and
        # O(1) removal of cancelled waiters).
        self._gate_until = -math.inf
        self._gate_timer: asyncio.TimerHandle | None = None
        self._gate_waiters: dict[asyncio.Future[None], None] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._started: dict[Ticket, float] = {}  # when each slot in flight took its RPM unit
        self._waiting = 0  # slots asked for and not yet granted
        self._feeding = 0  # sources of work (`fed`) not yet run out
        self._ran_out = False  # a source has run out (and none is feeding)
        # Whether stragglers get a second copy (`_stragglers`; `--hedge` sets it): off, no
        # request is sent twice unless its attempt failed.
        self.hedge = False
        self.stragglers = Stragglers(self._idle)
        # Whether each slot measures why it waited (`_waits`; set for a host tracing attempts):
        # off, a slot takes no clock reading of its own.
        self.timing = False
        self._shared: SharedQuota | None = None
        self._paused = False  # `ttc ctl pause`: no new slot passes the gate

    def share(self, quota: SharedQuota) -> None:
        """Takes rates from `quota` (kept in Redis for every process on it) from now on."""
        self._shared = quota
        # A window learnt from the headers would be this process's view of a shared one.
        self._learn_window = False
        self._set_rpm(self._rpm)

    @property
    def shared(self) -> SharedQuota | None:
        """The shared quota the rates come from, if any (`--shared-limits`)."""
        return self._shared

    @property
    def paused(self) -> bool:
        """Whether new slots are held (`pause`)."""
        return self._paused

    def pause(self) -> None:
        """No new request starts until `unpause`; those in flight finish."""
        self._paused = True

    def unpause(self) -> None:
        """Requests start again (unless the server's own gate is closed)."""
        self._paused = False
        if self._gate_timer is None:
            self._wake_gate()

    def retune(
        self, rpm: float | None = None, tpm: float | None = None, concurrency: int | None = None
    ) -> None:
        """Sets the RPM, TPM or concurrency ceiling in force (None: that one as it is). The new
        rates start from now: a schedule run ahead is not carried over."""
        _positive_or_none("rpm", rpm)  # each checked before anything changes: all or nothing
        _positive_or_none("tpm", tpm)
        if concurrency is not None:
            if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
                raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
            if concurrency > self.started_with:
                raise ConfigError(
                    f"concurrency {concurrency}: at most the {self.started_with} the run started "
                    "with (its workers were started for that many)"
                )
        # The paces change in place: requests already waiting on them go by the new rates.
        if rpm is not None:
            self.rpm_source = "set"
            if self._requests is None:
                self._set_rpm(rpm)
            else:
                self._rpm = rpm
                self._requests.retime(self._period / (rpm * (1 - self._headroom)))
        if tpm is not None:
            self.tpm_source = "set"
            if self._tpm_pace is None:
                self._set_tpm(tpm)
            else:
                self._tpm = tpm
                rate = tpm * (1 - self._headroom) / self._period
                self._tpm_pace.retime(rate, max(1.0, tpm * self._headroom))
        if concurrency is not None:
            self._max_concurrency = concurrency
            self._cap.ceiling = concurrency
            self._cap.cap = float(concurrency)
            self._cap._wake()

    def _set_rpm(self, rpm: float | None) -> None:
        self._rpm = rpm
        if rpm is not None:
            interval = self._period / (rpm * (1 - self._headroom))
            self._requests = RequestPace(interval, self._period, learn=self._learn_window)

    def _set_tpm(self, tpm: float | None) -> None:
        self._tpm = tpm
        if tpm is not None:
            rate = tpm * (1 - self._headroom) / self._period
            self._tpm_pace = TokenPace(rate, burst=max(1.0, tpm * self._headroom))

    @property
    def rpm(self) -> float | None:
        """Requests per period in force (configured or announced); None means unlimited."""
        return self._rpm

    @property
    def tpm(self) -> float | None:
        """Tokens per period in force (configured or announced); None means unlimited."""
        return self._tpm

    @property
    def max_concurrency(self) -> int:
        """Configured ceiling of slots held at once."""
        return self._max_concurrency

    @property
    def concurrency_cap(self) -> int:
        """The adaptive cap in force now (at most `max_concurrency`)."""
        return self._cap.limit

    @property
    def in_flight(self) -> int:
        """Slots whose body is running now (all waits passed, not yet exited)."""
        return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """High-water mark of `in_flight`."""
        return self._max_in_flight

    @property
    def window(self) -> Window | None:
        """The server's request window learnt from its headers, while it is trusted."""
        return None if self._requests is None else self._requests.window

    def slot(self, est_tokens: int = 0) -> contextlib.AbstractAsyncContextManager[Ticket]:
        """Wait for a place, the gate, one request unit and `est_tokens` tokens."""
        if est_tokens < 0:
            raise ValueError(f"est_tokens must be >= 0, got {est_tokens!r}")
        return _Slot(self, est_tokens)

    def fed(self, jobs: Iterable[T]) -> Iterator[T]:
        """`jobs`, passed through; once they have all been taken, the requests under way are the
        last ones (the end of a run or of a round), and while none waits for a slot their
        stragglers are hedged (`_stragglers`). Work not fed through here is never hedged."""
        self._feeding += 1
        try:
            yield from jobs
        finally:
            self._feeding -= 1
            self._ran_out = True
            self.stragglers.idle()

    def _idle(self) -> bool:
        return self._ran_out and not self._feeding and not self._waiting

    async def _wait_for_rates(self, est_tokens: int) -> float | None:
        if self._gate_timer is not None or self._paused:  # else open: no coroutine to await
            await self._pass_gate()
        while True:
            if self._shared is not None:
                started: float | None = await self._take_shared(est_tokens)
            else:
                started = None if self._requests is None else await self._requests.take()
                if self._tpm_pace is not None and est_tokens > 0:
                    await self._tpm_pace.take(est_tokens)
            if not self._paused:
                return started
            await self._held(est_tokens)

    async def _held(self, est_tokens: int) -> None:
        """Paused (`ttc ctl pause`) after taking its rate: the tokens go back and the request
        waits at the gate, then takes its rate again. Sent at the resume on the rate taken
        before the pause, every such request would go at once, over the limit."""
        if est_tokens > 0:
            if self._shared is not None:
                self._shared.charge(-est_tokens, self._tpm, self._period, self._headroom)
            elif self._tpm_pace is not None:
                self._tpm_pace.charge(-est_tokens)
        await self._pass_gate()

    async def _take_shared(self, est_tokens: int) -> float:
        """One request unit and `est_tokens` tokens from the shared quota (`share`)."""
        assert self._shared is not None
        await self._shared.take(self._rpm, self._tpm, est_tokens, self._period, self._headroom)
        return asyncio.get_running_loop().time()

    async def _timed_wait_for_rates(
        self, est_tokens: int, asked_ns: int, asked: float
    ) -> float | None:
        """`_wait_for_rates`, each step timed (`timing`): `asked_ns` and `asked` are when the
        slot was asked for, on the wall clock and on `perf_counter` (the cap's wait ends now).
        A shared quota's wait is one step, counted as the request window's; a pause, as the
        gate's."""
        clock = time.perf_counter
        t0 = clock()
        await self._pass_gate()
        gate, window, tokens = clock() - t0, 0.0, 0.0
        while True:
            a = clock()
            if self._shared is not None:
                started: float | None = await self._take_shared(est_tokens)
                b = c = clock()
            else:
                started = None if self._requests is None else await self._requests.take()
                b = clock()
                if self._tpm_pace is not None and est_tokens > 0:
                    await self._tpm_pace.take(est_tokens)
                c = clock()
            window, tokens = window + b - a, tokens + c - b
            if not self._paused:
                break
            await self._held(est_tokens)
            gate += clock() - c
        granted_ns = asked_ns + int((clock() - asked) * 1e9)
        note_wait(Waited(asked_ns, granted_ns, t0 - asked, gate, window, tokens))
        return started

    def reconcile(self, estimated: int, actual: int) -> None:
        """Corrects the TPM charge of a finished request from its estimate to its real usage
        (0 for a request the server refused). A usage beyond one period's tokens is charged as
        one period's: a provider reporting nonsense must not stall the run for years."""
        shared = self._shared
        if shared is not None:
            if self._tpm is not None:
                actual = min(max(0, actual), math.ceil(self._tpm))
            if actual != estimated:
                shared.charge(actual - estimated, self._tpm, self._period, self._headroom)
            return
        pace = self._tpm_pace
        if pace is None or self._tpm is None:
            return
        actual = min(max(0, actual), math.ceil(self._tpm))
        if actual != estimated:
            pace.charge(actual - estimated)

    def succeeded(self, rate: RateInfo | None = None) -> None:
        """A clean response: the cap (and a paced rate cut by refusals) grows; announced limits
        and exhausted quotas are heeded."""
        self._cap.grow()
        if self._requests is not None and self._cap.adaptive:
            self._requests.recover()
        if rate is not None:
            self.observe(rate, _SLOT.get())

    def rate_limited(self, ticket: Ticket, rate: RateInfo | None = None) -> None:
        """A refusal for rate: cut the cap, once per episode (unless a learnt window sets the
        rate: its margin widens instead); heed what the response announced."""
        episode = ticket >= self._episode_from
        if episode:
            # A learnt window already holds the rate: a cut cap would only keep its bursts from
            # going out (regrowing 128 places takes thousands of answers).
            if self.window is None:
                self._cap.cut()
                self.cuts += 1
            self._episode_from = self._next_ticket
        if self._requests is not None:
            # Paced (no window learnt, or one given up), a refusal means the quota is shared
            # or smaller than ours: the rate backs off too, since the cap alone does not slow a
            # rate that pacing, not concurrency, sets.
            if episode and self._requests.window is None and self._cap.adaptive:
                self._requests.slow_down(self._cap.decrease)
            self._requests.refused(self._started.get(ticket), widen=episode)
        if rate is not None:
            self.observe(rate, self._started.get(ticket))

    def observe(self, rate: RateInfo, sent_at: float | None = None) -> None:
        """Adopts announced limits that are stricter than ours; waits out an exhausted quota.
        `sent_at`: when the request answered took its slot, if known."""
        if rate.limit_requests and (self._rpm is None or rate.limit_requests < self._rpm):
            self._set_rpm(float(rate.limit_requests))
            self.rpm_source = "learned"
        if rate.limit_tokens and (self._tpm is None or rate.limit_tokens < self._tpm):
            self._set_tpm(float(rate.limit_tokens))
            self.tpm_source = "learned"
        if self._shared is not None and (rate.limit_requests or rate.limit_tokens):
            self._shared.learn(rate.limit_requests, rate.limit_tokens, 0.0, self._period)
        pace, left, reset = self._requests, rate.remaining_requests, rate.reset_requests_s
        if pace is not None and rate.limit_requests and left is not None and reset is not None:
            now = asyncio.get_running_loop().time()
            pace.heed(now, rate.limit_requests, left, reset, sent_at)
        # A learnt window full to its budget says `remaining` 0 by design, and knows when it
        # has room again; otherwise nothing is left until the reset.
        if rate.remaining_requests == 0 and rate.reset_requests_s and self.window is None:
            self.defer(rate.reset_requests_s)
        if rate.remaining_tokens == 0 and rate.reset_tokens_s:
            self.defer(rate.reset_tokens_s)

    def defer(self, seconds: float) -> None:
        """Close the gate to new slots for `seconds` from now, at most MAX_RETRY_AFTER_S; never
        moves the gate earlier."""
        if not seconds > 0:
            return
        seconds = min(seconds, MAX_RETRY_AFTER_S)
        if self._shared is not None:  # every process on the quota waits it out
            self._shared.learn(None, None, seconds, self._period)
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
        if not self._paused:
            self._wake_gate()

    def _wake_gate(self) -> None:
        waiters = list(self._gate_waiters)
        self._gate_waiters.clear()
        for fut in waiters:
            if not fut.done():  # a cancelled waiter's future is already done
                fut.set_result(None)

    async def _pass_gate(self) -> None:
        # Each turn waits on a future that only the gate timer (or `unpause`) resolves. The
        # loop re-checks because a defer() (or a pause) may arrive between the wake-up and this
        # task running again.
        while self._gate_timer is not None or self._paused:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._gate_waiters[fut] = None
            try:
                await fut
            finally:
                self._gate_waiters.pop(fut, None)


class _Slot:
    """One slot of a Limiter, as an async context manager. A class, not a generator: every
    request takes one, and an async generator per request cost a registration with the loop
    and a contextlib wrapper."""

    __slots__ = ("_est", "_limiter", "_ticket")

    def __init__(self, limiter: Limiter, est_tokens: int) -> None:
        self._limiter = limiter
        self._est = est_tokens
        self._ticket = -1

    async def __aenter__(self) -> Ticket:
        lim = self._limiter
        asked_ns = time.time_ns() if lim.timing else 0
        asked = time.perf_counter() if asked_ns else 0.0
        lim._waiting += 1
        try:
            await lim._cap.acquire()
        except BaseException:
            lim._waiting -= 1
            raise
        try:
            try:
                if asked_ns:
                    started = await lim._timed_wait_for_rates(self._est, asked_ns, asked)
                else:
                    started = await lim._wait_for_rates(self._est)
            finally:
                lim._waiting -= 1
        except BaseException:
            lim._cap.release()  # cancelled while waiting for a rate: the place goes back
            raise
        if not lim._waiting:
            lim.stragglers.idle()
        ticket = self._ticket = lim._next_ticket
        lim._next_ticket += 1
        if started is not None:
            lim._started[ticket] = started
            _SLOT.set(started)
        lim._in_flight += 1
        lim._max_in_flight = max(lim._max_in_flight, lim._in_flight)
        return ticket

    async def __aexit__(self, *exc: object) -> None:
        lim = self._limiter
        lim._in_flight -= 1
        lim._started.pop(self._ticket, None)
        lim._cap.release()
