"""The rate limits' paces: requests per period (`RequestPace`), paced evenly or filled up to the
server's own window once its rate-limit headers have shown that window, and tokens per period
(`TokenPace`, a GCRA).

Pacing. Request k may start `k * interval` after the first. The schedule runs on its own clock:
a waiter the event loop wakes up to `tolerance` (half an interval) late does not push the ones
after it back, so the loop's lateness is not lost from the rate, as it is with a bucket of size
1 that refills from the moment its last request passed (at 3,000 RPM that lost 4% on a loaded
machine). Any window of W seconds then holds at most W / interval + 1.5 requests whatever W is:
safe against a server whose window is unknown.

Learning the window. A server that counts requests over a sliding window of W seconds and
announces per-minute numbers (OpenAI's `x-ratelimit-*`; `ttc serve --window`) says more than its
limit. Its `reset-requests` is the time until its window is back to full, i.e. until the newest
request in it leaves, so W = reset + the time since our latest request. Its `remaining` says how
full the window is, so while every request we sent is still in it (the first W seconds),
W = period * sent / (limit - remaining). Two responses running on which the two agree (and so on
which the server counts no request but ours) make the window known: then at most `budget` =
limit * W / period requests are in any `span` = W + margin seconds, each sent as soon as the
window has room. A sliding window admits its whole budget at any moment, so a run fills its
first window at once instead of over W seconds; over a long run the rate is the same. The
margin (1% of W, at least 50 ms) covers the delay between taking a slot and the server counting
the request. While the window is trusted, `remaining` 0 is what filling it means, and does not
close the limiter's gate (the window says when there is room again).

A server whose headers mean something else (a token bucket's reset is the time to refill what
was used, a fraction of a second when paced) never makes the two estimates agree: it is paced.
A request the server refuses is not in its window, so it leaves ours too; each episode of
refusals triples the margin. The learnt window is given up for pacing when, on two responses
running, the server counts more requests in it than ours (another client shares the quota), or
when the margin would pass a tenth of the window; pacing resumes from where the bursts left its
schedule, so no window is overfilled.
"""

from __future__ import annotations

import asyncio
import bisect
import math
from dataclasses import dataclass

__all__ = ["RequestPace", "TokenPace", "Window"]

AGREEING = 2  # responses running on which the window's estimates agree (or show another client)
RECOVERY = 0.01  # of the configured rate, regained per clean answer after a slow-down
_MIN_BUDGET = 4  # a window admitting fewer requests is paced: bursting it gains nothing


@dataclass(frozen=True, slots=True)
class Window:
    """A server's request window as learnt from its headers: at most `budget` of our requests
    in any `span` seconds (`seconds`, the window, plus a margin)."""

    seconds: float
    budget: int
    span: float


class _Sent:
    """The times our requests started, oldest first; old ones are pruned."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._lo = 0  # entries before this index are pruned

    def __len__(self) -> int:
        return len(self._times) - self._lo

    def add(self, t: float) -> None:
        self._times.append(t)

    def prune(self, horizon: float) -> None:
        """Forgets requests at or before `horizon`."""
        self._lo = bisect.bisect_right(self._times, horizon, self._lo)
        if self._lo > 1024 and self._lo * 2 > len(self._times):
            del self._times[: self._lo]
            self._lo = 0

    def after(self, t: float) -> int:
        """How many started after `t`."""
        return len(self._times) - bisect.bisect_right(self._times, t, self._lo)

    def remove(self, t: float) -> None:
        """Forgets one request that started at `t`, if it is still held."""
        i = bisect.bisect_left(self._times, t, self._lo)
        if i < len(self._times) and self._times[i] == t:
            del self._times[i]

    def newest(self, k: int = 1) -> float:
        """The start of the k-th newest request (k <= len)."""
        return self._times[-k]


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class RequestPace:
    """Admits one request at a time: paced at `interval`, or within a learnt `window`."""

    def __init__(self, interval: float, period: float, *, learn: bool = True) -> None:
        self.base = interval  # the configured pace; refusals slow it, clean answers restore it
        self.interval = interval
        self.tolerance = interval / 2
        self.period = period
        self.window: Window | None = None
        self.dropped: str | None = None  # why a learnt window was given up (or never learnt)
        self._learn = learn
        self._agreeing: list[tuple[float, float]] = []
        self._foreign = 0  # responses running on which the server counted others' requests
        self._next = -math.inf  # when the next paced request may start
        self._sent = _Sent()
        self._lock = asyncio.Lock()  # FIFO: requests pass in the order they asked
        self._wake: asyncio.Future[None] | None = None

    async def take(self) -> float:
        """Waits until one more request may start, and counts it: when it started."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                now = loop.time()
                at = self.earliest(now)
                if at <= now:
                    break
                wake = self._wake = loop.create_future()
                timer = loop.call_at(at, _resolve, wake)
                try:
                    await wake
                finally:
                    timer.cancel()
                    self._wake = None
            self._sent.add(now)
            # A request the loop let through a little late keeps the schedule; one that came
            # to an idle pace (or a long stall) starts the schedule again from now.
            late = now - self._next
            self._next = (self._next if late <= self.tolerance else now) + self.interval
            if self.window is not None:
                # Bursts run the schedule ahead; once all of them have left any window the
                # pace is safe again however far ahead it ran.
                self._next = min(self._next, now + self.window.span)
            return now

    def earliest(self, now: float) -> float:
        """When the next request could start, as things stand at `now`."""
        self._sent.prune(now - self.period)
        window = self.window
        if window is None:
            return self._next
        if self._sent.after(now - window.span) < window.budget:
            return now
        # Room comes when the budget-th newest request leaves the span.
        return self._sent.newest(window.budget) + window.span

    def slow_down(self, factor: float) -> None:
        """A refusal episode while paced: the rate is multiplied by `factor` (at most one request
        per period)."""
        self.interval = min(self.period, self.interval / factor)
        self.tolerance = self.interval / 2

    def recover(self) -> None:
        """A clean answer: the rate grows back by RECOVERY of the configured rate, up to it."""
        if self.interval > self.base:
            rate = 1 / self.interval + RECOVERY / self.base
            self.interval = max(self.base, 1 / rate)
            self.tolerance = self.interval / 2

    def heed(self, now: float, limit: int, remaining: int, reset: float) -> None:
        """Learns the window from one response's headers, or checks the learnt one still holds."""
        if not self._learn or not 0 <= remaining < limit or not 0 < reset <= self.period:
            return
        self._sent.prune(now - self.period)
        if not len(self._sent):
            return
        used = limit - remaining  # of the window, in per-period units
        window = self.window
        if window is not None:
            # A request the server counts later than we took its slot may still be in its
            # window when ours has let it go: only a count above ours that lasts is another's.
            theirs = used * window.seconds / self.period - self._sent.after(now - window.span)
            self._foreign = self._foreign + 1 if theirs > max(3.0, 0.05 * window.budget) else 0
            if self._foreign >= AGREEING:
                self._drop(f"the server counted {theirs:.0f} requests not ours in its window")
            return
        by_reset = reset + (now - self._sent.newest())
        sent = len(self._sent)
        in_window = self._sent.after(now - by_reset) == sent  # all of ours still in it
        by_count = self.period * sent / used
        if not in_window or abs(by_count - by_reset) > 0.05 * by_reset + 0.05:
            self._agreeing.clear()
            return
        self._agreeing.append((by_reset, by_count))
        if len(self._agreeing) >= AGREEING:
            self._adopt(limit)

    def _adopt(self, limit: int) -> None:
        estimates = [w for pair in self._agreeing for w in pair]
        self._agreeing.clear()
        low, high = min(estimates), max(estimates)
        budget = math.floor(limit * low / self.period + 1e-9)
        if budget < _MIN_BUDGET or high > self.period:
            self._learn = False
            self.dropped = f"a window of {budget} requests is paced"
            return
        self.window = Window(high, budget, high + max(0.05, 0.01 * high))
        if self._wake is not None:
            _resolve(self._wake)  # the head waiter re-checks, now against the window

    def refused(self, started: float | None, widen: bool) -> None:
        """The server refused the request that started at `started` for rate: it is not in
        the server's window, so not in ours. On a new episode (`widen`) the margin triples: the
        server counted a request later than we took its slot. Past a tenth of the window, the
        window is given up for pacing."""
        if started is not None:
            self._sent.remove(started)
        window = self.window
        if window is None:
            self._agreeing.clear()
            return
        if not widen:
            return
        margin = 3 * (window.span - window.seconds)
        if margin > 0.1 * window.seconds:
            self._drop("the server refused requests inside the learnt window, margin or not")
            return
        self.window = Window(window.seconds, window.budget, window.seconds + margin)

    def _drop(self, why: str) -> None:
        self.window = None
        self._learn = False
        self.dropped = why
        if self._wake is not None:
            _resolve(self._wake)  # the head waiter re-checks, now against the pace


class TokenPace:
    """GCRA over tokens: at most `burst` tokens at once, `rate` tokens per second after that."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._empty_at = -math.inf  # when the virtual bucket drains completely
        self._lock = asyncio.Lock()  # FIFO: requests pass in the order they asked
        # The head waiter's wake-up: its timer, or a refund that makes room sooner.
        self._wake: asyncio.Future[None] | None = None

    def _level(self, now: float) -> float:
        return max(0.0, self._empty_at - now) * self.rate

    async def take(self, amount: float) -> None:
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                now = loop.time()
                level = self._level(now)
                # An amount above the burst waits for an empty bucket; otherwise for room.
                room_needed = max(0.0, level + min(amount, self.burst) - self.burst)
                if room_needed <= 1e-9:
                    break
                wake = self._wake = loop.create_future()
                timer = loop.call_later(room_needed / self.rate, _resolve, wake)
                try:
                    await wake
                finally:
                    timer.cancel()
                    self._wake = None
            self._empty_at = max(self._empty_at, now) + amount / self.rate

    def charge(self, amount: float) -> None:
        """Adds (or, negative, refunds) tokens without waiting; never refunds into the past.

        A refund wakes the request waiting at the head, which then re-checks its room.
        """
        now = asyncio.get_running_loop().time()
        self._empty_at = max(max(self._empty_at, now) + amount / self.rate, now)
        if amount < 0 and self._wake is not None:
            _resolve(self._wake)
