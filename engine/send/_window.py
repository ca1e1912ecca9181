"""What a server's rate-limit headers say of its request window: `Reading` of one response,
`WindowReader` over the run's first responses, and `Window`, the learnt result.

A server announces its limit per period (a minute: OpenAI's `x-ratelimit-*`), what is left of it
(`remaining`, in the same per-period units whatever its window) and a reset time whose meaning
differs by server. It counts requests one of three ways, and each can be read from our own
requests (`Sent`) and its two numbers, `used` = limit - remaining and the reset S, given that
the server admits `limit * W / period` requests in its window of W seconds:

- a sliding window of W seconds (while every request of ours is still in it, used units are
  `period * ours / W`): S is the time until the newest entry leaves (W = S + the time since our
  newest) or until the oldest leaves (W = S + the time since our oldest);
- a fixed window restarting every W seconds: S is the time to the restart, so S + now jumps by
  W at a restart, and the requests of ours since the restart count as in a sliding window;
- a token bucket of `limit * W / period` requests refilling at `limit / period` a second: S is
  the time to refill what is used (W = S * limit / used) or to refill one unit (the same, while
  less than one is missing). Rounding (`remaining` is floored, S in milliseconds) makes each
  reading a range; every range holds W, so their intersection narrows onto it from both sides.

A window is known when two readings running agree on one kind (a bucket: three ranges that
meet, whose `used` differ by a fifth or more, so that the agreement is not one state read twice;
their common lower end is the window, raised as fuller readings come). The readings
of the other kinds then disagree with each other: a sliding window's counts grow with our
requests where a bucket's stay small, and a fixed window's reset stands still where a sliding
one's moves. Any of the three is then filled safely by at most `budget` requests in any `span`
(`_pace`): a sliding or fixed window of W holds no more, and a bucket refills at least as fast.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

__all__ = ["KINDS", "Reading", "Sent", "Window", "WindowReader"]

KINDS = ("sliding-newest", "sliding-oldest", "fixed", "bucket")
"""How a server counts requests and what its reset means, as `WindowReader` tells them apart."""

AGREEING = 2  # readings running that make a window (or that show another client)
_BUCKET_READINGS = 3  # a bucket's readings are ranges: three, of different states
_NARROW = 0.02  # a window is known once its readings meet within 2% of it (and _SLACK)
_SLACK = 0.02  # seconds: the server counts a request a little after we sent it
_MS = 0.001  # resets are announced to the millisecond
_SPREAD, _SPREAD_S = 0.2, 0.25  # agreeing readings span a fifth of the window, or 0.25 s
MIN_BUDGET = 4  # a window admitting fewer requests is paced: bursting it gains nothing


@dataclass(frozen=True, slots=True)
class Window:
    """A server's request window as learnt from its headers: at most `budget` of our requests
    in any `span` seconds (`seconds`, the window, plus a margin). `kind` is one of KINDS."""

    seconds: float
    budget: int
    span: float
    kind: str = "sliding-newest"


@dataclass(frozen=True, slots=True)
class Reading:
    """What responses say of the window under one kind: between `low` and `high` seconds;
    `used`, the per-period units a bucket's response said were used, or how many responses met
    in the range (the other kinds)."""

    kind: str
    low: float
    high: float
    used: int


class Sent:
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

    def before(self, t: float) -> float:
        """The start of the newest request at or before `t` (-inf if none)."""
        i = bisect.bisect_right(self._times, t, self._lo)
        return self._times[i - 1] if i > self._lo else -math.inf

    def oldest(self) -> float:
        """The start of the oldest request held (len > 0)."""
        return self._times[self._lo]


def _meet(a: Reading, b: Reading) -> bool:
    """Whether two valid ranges share a window."""
    return a.low <= a.high and b.low <= b.high and a.low <= b.high and b.low <= a.high


class WindowReader:
    """Reads responses' headers (`read`) until one kind of window agrees with itself."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._last: dict[str, Reading] = {}  # the latest valid reading of each kind
        self._since: dict[str, float] = {}  # when its run of agreeing readings began
        self._bucket: list[Reading] = []  # a bucket's readings whose ranges all meet
        self._ends: float | None = None  # when the server said its window resets (S + now)
        self._restart: tuple[float, float] | None = None  # a fixed window's restart, length
        self.apart = False  # the latest bucket reading met not all of the others

    def read(
        self, now: float, limit: int, used: int, reset: float, sent: Sent, lag: float = 0.0
    ) -> Reading | None:
        """One response's headers (`used` > 0 per-period units, `reset` S seconds), read `lag`
        seconds at most after the server wrote them: the window, once the readings of one kind
        agree. A late reading is a wider range (ours sent meanwhile may not be counted), and a
        range wider than the tolerance is no reading."""
        readings = self._sliding(now, used, reset, sent, lag)
        fixed = self._fixed(now, used, reset, sent, lag)
        if fixed is not None:
            readings.append(("fixed", fixed))
        found = None
        for kind, reading in readings:
            # A reading that holds under another kind as well (a first burst reads a reset
            # meaning the newest entry and one meaning the oldest alike; a sliding window's
            # oldest leaving looks like a fixed window's restart) is kept, but makes no window:
            # the first kind tried would win every tie. Between a sliding window and a fixed
            # one the sliding wins the tie: it is the stricter (no burst at a restart).
            final = reading is None or not any(
                _meet(reading, other)
                for k, other in readings
                if k != kind and other is not None and (kind == "fixed" or k != "fixed")
            )
            found = found or self._agreed(now, kind, reading, limit, final=final)
        return found or self.bucket(limit, used, reset)

    def _agreed(
        self, now: float, kind: str, reading: Reading | None, limit: int, final: bool = True
    ) -> Reading | None:
        """The window once `reading` and the ones before it of its kind (each a range that
        holds the window) meet in a range narrow enough, over a fifth of the window (or 0.25 s);
        a reading that meets none of them starts again. A reading that is not `final` (it
        would hold under another kind too) is kept, but never makes the window.

        The time: two readings of the wrong kind can meet where the two curves they follow
        cross (a bucket read as a sliding window, say), and part again a moment later; the
        right kind's keep meeting."""
        if reading is None or reading.low > reading.high:
            self._last.pop(kind, None)
            return None
        last = self._last.get(kind)
        if last is not None and last.low <= reading.high and reading.low <= last.high:
            low, high = max(last.low, reading.low), min(last.high, reading.high)
            reading = Reading(kind, low, high, last.used + 1)
        else:
            reading = Reading(kind, reading.low, reading.high, 1)
            self._since[kind] = now
        self._last[kind] = reading
        if (
            not final
            or reading.used < AGREEING
            or now - self._since[kind] < min(_SPREAD * reading.low, _SPREAD_S)
            or reading.high - reading.low > _NARROW * reading.high + _SLACK
            or limit * reading.low / self.period < MIN_BUDGET
        ):
            return None
        self._last.pop(kind)
        return reading

    def _sliding(
        self, now: float, used: int, reset: float, sent: Sent, lag: float
    ) -> list[tuple[str, Reading | None]]:
        # While every request of ours is still in the window, used units are period * n / W
        # (those sent in the last `lag` seconds may not be counted yet); the reset is W less
        # the time since our newest (or oldest) request as the server saw it, `lag` ago at most.
        n = len(sent)
        by_count = (self.period * (n - sent.after(now - lag)) / used, self.period * n / used)
        newest = sent.newest()
        readings: list[tuple[str, Reading | None]] = []
        for kind, by_reset in (
            ("sliding-newest", (reset + now - lag - newest, reset + now - sent.before(now - lag))),
            ("sliding-oldest", (reset + now - lag - sent.oldest(), reset + now - sent.oldest())),
        ):
            whole = sent.after(now - by_reset[1] - _SLACK) == n  # all of ours still in it
            low = max(by_count[0], by_reset[0] - _SLACK)
            high = min(by_count[1], by_reset[1] + _SLACK)
            readings.append((kind, Reading(kind, low, high, 1) if whole else None))
        return readings

    def _fixed(self, now: float, used: int, reset: float, sent: Sent, lag: float) -> Reading | None:
        """This response read as a fixed window since the last restart seen, or None (no
        restart seen yet, or one just now)."""
        ends, last = now + reset, self._ends
        self._ends = ends
        if last is not None and ends > last + 0.05 + lag:
            # A restart passed at `last`, or the reset moved as a sliding window's does: the
            # count since `last` (none of ours yet, for a sliding window) tells them apart.
            self._restart = (last, ends - last)
            self._last.pop("fixed", None)
            return None
        if last is None or ends < last - 0.05 - lag or self._restart is None:
            self._restart = None
            return None
        restart, length = self._restart
        if restart > now:  # a sliding window's reset moving on, not a restart
            return None
        since = sent.after(restart)
        low = max(self.period * (since - sent.after(now - lag)) / used, length - lag - _SLACK)
        high = min(self.period * since / used, length + lag + _SLACK)
        return Reading("fixed", low, high, 1)

    def bucket(self, limit: int, used: int, reset: float) -> Reading | None:
        """One more response read as a token bucket: the window the readings so far agree on
        (their ranges' common lower end), or None. `apart` says that this response's range met
        not all of the others (then the readings start again from it)."""
        self.apart = False
        # A bucket missing d requests says used = ceil(d * limit / B), S = d * period / limit
        # (or period / limit, to refill one unit, when more than one is missing: no reading).
        if reset <= 0 or abs(reset - self.period / limit) <= _MS:
            return None
        low = max(0.0, reset - _MS) * limit / used
        high = reset * limit / (used - 1) if used > 1 else math.inf
        if low > self.period or limit * high / self.period < MIN_BUDGET:
            self.apart = bool(self._bucket)
            self._bucket.clear()
            return None
        readings = [r for r in self._bucket if r.low <= high and low <= r.high]
        if len(readings) < len(self._bucket):
            self.apart = True
            readings = []
        readings.append(Reading("bucket", low, high, used))
        self._bucket = readings[-8:]
        lo = max(r.low for r in self._bucket)
        hi = min(r.high for r in self._bucket)
        uses = [r.used for r in self._bucket]
        if (
            len(self._bucket) >= _BUCKET_READINGS
            and lo <= hi
            and max(uses) >= 1.2 * min(uses)
            and limit * lo / self.period >= MIN_BUDGET
        ):
            # The lower end: a bucket that short is never overfilled, and fuller readings
            # (a burst empties the bucket) raise it.
            return Reading("bucket", lo, lo, used=0)
        return None
