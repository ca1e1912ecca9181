"""The rate limits' paces: requests per period (`RequestPace`), paced evenly or filled up to the
server's own window once its rate-limit headers have shown that window, and tokens per period
(`TokenPace`, a GCRA).

Pacing. Request k may start `k * interval` after the first. The schedule runs on its own clock:
a waiter the event loop wakes up to `tolerance` (half an interval) late does not push the ones
after it back, so the loop's lateness is not lost from the rate, as it is with a bucket of size
1 that refills from the moment its last request passed (at 3,000 RPM that lost 4% on a loaded
machine). Any window of W seconds then holds at most W / interval + 1.5 requests whatever W is:
safe against a server whose window is unknown.

Learning the window. A server announcing per-period numbers (OpenAI's `x-ratelimit-*`; `ttc
serve --window`) says more than its limit: its `remaining` and its reset, read against our own
requests, show how it counts (a sliding window whose reset is its newest or its oldest entry
leaving, a fixed window, a token bucket) and its window W (`_window`). Once the readings of two
responses running agree on one kind (and so the server counts no request but ours), at most
`budget` = limit * W / period requests are in any `span` = W + margin seconds, each sent as soon
as the window has room: safe on all three kinds, since a sliding or fixed window of W holds no
more and a bucket of a window's worth refills at least as fast. A window admits its whole budget
at once; a sliding one's requests go at most SPREAD times its average rate (a burst all at once
is counted over as long as the loop takes to send it), so a run fills its first window within an
eighth of it instead of over W seconds; over a long run the rate is the same; a learnt bucket is
paced as a bucket of the budget instead (aiolimiter's `AsyncLimiter`), which refills as it
empties. The margin (1% of W, at least 50 ms, plus twice
the loop's lateness) covers the delay between taking a slot and the server counting the
request. While the window is trusted, `remaining` 0 is what filling it means, and does not close
the limiter's gate (the window says when there is room again).

A server whose headers fit none of the kinds is paced. A request the server refuses is not in
its window, so it leaves ours too; each episode of refusals triples the margin, and each
CLEAN_WINDOWS windows without one narrow it a step back (a refusal shows a moment's lateness,
not the rest of the run's). The learnt
window is given up for pacing when, on two responses running, the server counts more requests
in it than ours since a window before the answered request's slot (another client shares the
quota; an answer read late, after a stall, counted ours that have left ours since), when a learnt
bucket's headers stop reading as one bucket, or when the margin would pass a tenth of the window;
pacing resumes from where the bursts left its schedule, so no window is overfilled.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

from ttc.engine.send._window import AGREEING, MIN_BUDGET, Reading, Sent, Window, WindowReader

if TYPE_CHECKING:
    from aiolimiter import AsyncLimiter

__all__ = ["RequestPace", "TokenPace", "Window"]


def _leaky_bucket(budget: float, span: float) -> AsyncLimiter:
    """aiolimiter's bucket of `budget` leaking over `span` seconds. Imported at a learnt
    bucket's first use: the package reads its own version through importlib.metadata when
    imported, some 10 ms of every `ttc` command's start-up (`ttc batch`'s, `ttc run`'s)."""
    from aiolimiter import AsyncLimiter

    return AsyncLimiter(budget, span)


RECOVERY = 0.01  # of the configured rate, regained per clean answer after a slow-down
# A learnt sliding window's requests go at most this many times its budget's average rate: a
# burst of them all at once is counted over as long as the loop takes to send them (on a loaded
# machine 0.05-0.1 s for 20), and the replacements of those counted last, a span after their
# common slot, came while the server still held them (test_quota's sliding-oldest case beside
# two busy loops: 4-10 refusals in 4 runs of 5; spread, none in 5 of 5). Spread, each waits on
# a timer of its own, so the loop's lateness is seen and widens the span.
SPREAD = 8
CLEAN_WINDOWS = 5  # windows without a refusal after which a widened margin narrows a step


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
        self._reader: WindowReader | None = WindowReader(period) if learn else None
        self._foreign = 0  # responses running on which the server counted others' requests
        self._next = -math.inf  # when the next paced request may start
        # A learnt bucket's pace: aiolimiter's bucket of the budget, leaking over the span, and
        # what it is to be charged with before its first request (what the server said is used).
        self._bucket: AsyncLimiter | None = None
        self._charge = 0.0
        self.lateness = 0.0  # how late the loop wakes a waiter, lately (a decaying maximum)
        self._restart = -math.inf  # a learnt fixed window's next restart, as last announced
        self._margin = 0.0  # a learnt window's margin as adopted, before any refusal widened it
        self._widened = -math.inf  # when a refusal last widened it (or it last narrowed)
        self._spread = -math.inf  # when a learnt sliding window's next request may start (SPREAD)
        self._sent = Sent()
        self._lock = asyncio.Lock()  # FIFO: requests pass in the order they asked
        self._wake: asyncio.Future[None] | None = None

    async def take(self) -> float:
        """Waits until one more request may start, and counts it: when it started."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                bucket = self._bucket
                if bucket is not None:
                    # A bucket refills as it empties: ours are paced as a bucket of the budget
                    # that refills over the span, never faster than the server's.
                    charge, self._charge = min(1 + self._charge, bucket.max_rate), 0.0
                    await bucket.acquire(charge)
                    now = loop.time()
                    break
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
                # The loop's lateness bounds how late a response's headers are read too.
                self.lateness = max(loop.time() - at, 0.9 * self.lateness)
            self._sent.add(now)
            # A request the loop let through a little late keeps the schedule; one that came
            # to an idle pace (or a long stall) starts the schedule again from now.
            late = now - self._next
            self._next = (self._next if late <= self.tolerance else now) + self.interval
            window = self.window
            if window is not None:
                # Bursts run the schedule ahead; once all of them have left any window the
                # pace is safe again however far ahead it ran.
                self._next = min(self._next, now + window.span)
                # The spread's schedule, too, keeps its time through a late wake (half a gap).
                gap = window.span / (SPREAD * window.budget)
                self._spread = max(self._spread, now - gap / 2) + gap
            return now

    def earliest(self, now: float) -> float:
        """When the next request could start, as things stand at `now`."""
        self._sent.prune(now - self.period)
        window = self.window
        if window is None:
            return self._next
        if window.kind == "fixed":
            return self._fixed(now, window)
        # A loaded loop sends a request later after its slot than the one it replaces: the span
        # widens by twice the loop's lateness, so the server has let that one go.
        span = window.span + 2 * self.lateness
        if self._sent.after(now - span) < window.budget:
            return max(now, self._spread)
        # Room comes when the budget-th newest request leaves the span.
        return max(self._sent.newest(window.budget) + span, self._spread)

    def _fixed(self, now: float, window: Window) -> float:
        """A fixed window admits its budget from each restart: ours since the restart (and a
        margin before it) fill it, and the next opens a margin after the next restart."""
        margin = window.span - window.seconds + 2 * self.lateness + 0.01
        restart, length = self._restart, window.seconds
        if now >= restart + margin:  # the announced restart has passed (and perhaps more)
            start = restart + math.floor((now - restart - margin) / length) * length
            since, opens = start - margin, start + length + margin
        else:  # still the window before it, or a restart we cannot tell has happened
            since, opens = restart - length - margin, restart + margin
        return now if self._sent.after(since) < window.budget else opens

    def retime(self, interval: float) -> None:
        """A new configured pace (`ttc ctl set --rpm`), in force for the request waiting now: the
        next slot moves to one new interval after the last, and a learnt window (its budget
        the old limit's) is given up."""
        if self.window is not None:
            self._drop("the limit was set anew")
        self._next += interval - self.interval
        self.base = self.interval = interval
        self.tolerance = interval / 2
        if self._wake is not None:
            _resolve(self._wake)  # the head waiter re-checks, now against the new pace

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

    def heed(
        self, now: float, limit: int, remaining: int, reset: float, sent_at: float | None = None
    ) -> None:
        """Learns the window from one response's headers, or checks the learnt one still holds.
        `sent_at`: when the request answered took its slot (the server wrote the headers
        after), if known."""
        reader = self._reader
        if reader is None or not 0 <= remaining < limit or not 0 < reset <= self.period:
            return
        self._sent.prune(now - self.period)
        if not len(self._sent):
            return
        used = limit - remaining  # of the window, in per-period units
        window = self.window
        if window is None:
            self._learn(now, limit, used, reset, reader, sent_at)
            return
        if now - self._widened >= CLEAN_WINDOWS * window.seconds:
            window = self._narrow(now, window)
        if window.kind == "fixed":
            # Each response announces the restart; the earliest reading of it is the least late.
            ends = now + reset
            late = ends > self._restart + 0.5 * window.seconds
            self._restart = ends if late else min(self._restart, ends)
        if window.kind == "bucket":
            reading = reader.bucket(limit, used, reset)
            if reader.apart:
                self._drop("the server's headers stopped reading as one token bucket")
                return
            if reading is not None and reading.low > 1.02 * window.seconds:
                # A fuller bucket read: a longer one.
                self._adopt(limit, reading, used, self._unseen(now, sent_at))
        # A request the server counts later than we took its slot may still be in its
        # window when ours has let it go, and a response read late (a loaded loop) counted
        # requests that ours has let go since: ours are counted a tenth of the window further
        # back, from no later than the answered request's slot (its headers were written after
        # it, however late they are read: a process descheduled for 2 s read ones that counted
        # ours of 3 s before), and only a count above them that lasts is another's.
        written = now if sent_at is None else min(now, sent_at)
        horizon = written - window.span - 0.1 * window.seconds
        theirs = used * window.seconds / self.period - self._sent.after(horizon)
        self._foreign = self._foreign + 1 if theirs > max(3.0, 0.05 * window.budget) else 0
        if self._foreign >= AGREEING:
            self._drop(f"the server counted {theirs:.0f} requests not ours in its window")

    def _learn(
        self,
        now: float,
        limit: int,
        used: int,
        reset: float,
        reader: WindowReader,
        sent_at: float | None,
    ) -> None:
        """One response's headers read for the window, which is adopted once they agree."""
        reading = reader.read(now, limit, used, reset, self._sent, self._lag())
        if reading is not None:
            self._adopt(limit, reading, used, self._unseen(now, sent_at))
            self._restart = now + reset

    def _lag(self) -> float:
        """How long after the server wrote a response's headers they are read, at most: twice
        the loop's lateness (at least 10 ms)."""
        return 0.01 + 2 * self.lateness

    def _unseen(self, now: float, sent_at: float | None) -> int:
        """Ours the server may not have counted in headers read now: those that took a slot
        after the answered request (the server wrote the headers after it, however late they
        are read), and at least those of the last `_lag`. The slot is what bounds it:
        a loaded loop sends a burst one request at a time, so the server counts its last ones
        up to 0.2 s after their slots (test_quota's bucket beside a busy test suite: 3-4 runs
        of 40 refused 2-6 requests, each just after a longer bucket was adopted from an answer
        written mid-burst). Some of those may have been counted: the bucket then starts
        that much fuller than the server's, a one-off wait of as many requests' refill."""
        since = now - self._lag()
        if sent_at is not None:
            since = min(since, sent_at)
        return self._sent.after(since)

    def _adopt(self, limit: int, reading: Reading, used: int, unseen: int) -> None:
        """Takes the window `reading` says; a bucket is charged with what the server said is
        used and the `unseen` requests of ours it may not have counted yet."""
        low, high = reading.low, reading.high
        budget = math.floor(limit * low / self.period + 1e-9)
        if budget < MIN_BUDGET or high > self.period:
            self._reader = None
            self.dropped = f"a window of {budget} requests is paced"
            return
        self._margin = max(0.05, 0.01 * high)
        window = self.window = Window(high, budget, high + self._margin, reading.kind)
        if window.kind == "bucket":
            self._bucket = _leaky_bucket(budget, window.span)
            self._charge = used * window.seconds / self.period + unseen
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
            if self._reader is not None:
                self._reader = WindowReader(self.period)  # what it read included a refusal
            return
        if not widen:
            return
        margin = 3 * (window.span - window.seconds)
        if margin > 0.1 * window.seconds:
            self._drop("the server refused requests inside the learnt window, margin or not")
            return
        self._widened = asyncio.get_running_loop().time()
        self.window = Window(window.seconds, window.budget, window.seconds + margin, window.kind)
        if self._bucket is not None:  # refused: the server's bucket is empty
            self._bucket = _leaky_bucket(window.budget, window.seconds + margin)
            self._charge = window.budget

    def _narrow(self, now: float, window: Window) -> Window:
        """A widened margin, CLEAN_WINDOWS windows after the refusal that widened it (or after
        it last narrowed), narrows a step back towards the margin adopted: a refusal shows how
        late the server counted our requests then (a loaded machine, a slow moment of the
        network), not for the rest of a run: kept, two episodes would hold the run near a tenth
        below the quota to its end (and a third gives the window up). Should the cause last,
        the next refusal widens it again: an episode per CLEAN_WINDOWS windows at most."""
        self._widened = now
        widened = window.span - window.seconds
        if widened <= self._margin:
            return window
        margin = max(self._margin, widened / 3)
        narrowed = self.window = Window(
            window.seconds, window.budget, window.seconds + margin, window.kind
        )
        if self._bucket is not None:
            # A new bucket charged with ours in the last (wider) span: at least what the old
            # one held.
            span = window.span + 2 * self.lateness
            self._bucket = _leaky_bucket(window.budget, narrowed.span)
            self._charge = min(float(window.budget), float(self._sent.after(now - span)))
        return narrowed

    def _drop(self, why: str) -> None:
        self.window = None
        self._bucket = None
        self._reader = None
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

    def retime(self, rate: float, burst: float) -> None:
        """A new rate and burst (`ttc ctl set --tpm`), in force for the request waiting now."""
        now = asyncio.get_running_loop().time()
        level = self._level(now)  # the tokens held stay held, drained at the new rate
        self.rate, self.burst = rate, burst
        self._empty_at = now + level / rate
        if self._wake is not None:
            _resolve(self._wake)

    def charge(self, amount: float) -> None:
        """Adds (or, negative, refunds) tokens without waiting; never refunds into the past.

        A refund wakes the request waiting at the head, which then re-checks its room.
        """
        now = asyncio.get_running_loop().time()
        self._empty_at = max(max(self._empty_at, now) + amount / self.rate, now)
        if amount < 0 and self._wake is not None:
            _resolve(self._wake)
