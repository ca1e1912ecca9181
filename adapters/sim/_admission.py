"""`ttc serve`'s admission, shared by every wire format: concurrency, the RPM and TPM limits,
the fault and latency draws, and the counters of `/stats`.

`--rpm` and `--tpm` are per minute, as vendors state them; a window of W seconds admits W/60 of
them, so tests and benchmarks can shrink the minute. `--limit-kind` says how they are counted,
as providers do: a sliding window (`Window`), a fixed window restarting every W seconds
(`FixedWindow`) or a token bucket of W/60 of the limit refilling continuously (`Bucket`);
`--reset-means` what their `reset` header announces (`newest`: until back to full; `oldest`:
until one more unit is back). A request's tokens (input + output +
thinking) enter the TPM window when its response is sent; requests enter the RPM window when
admitted. Faults and latencies come from their own seeded streams, so turning latency on leaves
the sequence of faults alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ttc.adapters.sim._options import FAULTS, ServeOptions, per_window

__all__ = [
    "Admission",
    "Bucket",
    "FixedWindow",
    "Limit",
    "Refusal",
    "Stats",
    "Window",
    "go_duration",
    "make_limit",
    "proto_duration",
]


class Window:
    """A sliding window of (time, amount) entries and their running total; O(1) amortised."""

    __slots__ = ("amounts", "limit", "oldest", "span", "times", "total")

    def __init__(self, limit: int, span: float, oldest: bool = False) -> None:
        self.limit = limit
        self.span = span
        self.oldest = oldest  # `reset` is until the oldest entry leaves, not the newest
        self.times: deque[float] = deque()
        self.amounts: deque[int] = deque()
        self.total = 0

    def prune(self, now: float) -> None:
        horizon = now - self.span
        times, amounts = self.times, self.amounts
        while times and times[0] <= horizon:
            times.popleft()
            self.total -= amounts.popleft()

    def add(self, now: float, amount: int) -> None:
        if amount > 0:
            self.times.append(now)
            self.amounts.append(amount)
            self.total += amount

    def left(self, now: float) -> float:
        """What the window admits now."""
        self.prune(now)
        return max(0, self.limit - self.total)

    def full(self, now: float) -> float:
        """Seconds until the window is back to its full allowance: the newest entry leaves."""
        return max(0.0, self.times[-1] + self.span - now) if self.times else 0.0

    def reset(self, now: float) -> float:
        """The announced reset: until the newest entry leaves, or (`oldest`) the oldest."""
        self.prune(now)
        if self.oldest and self.times:
            return max(0.0, self.times[0] + self.span - now)
        return self.full(now)

    def room(self, now: float) -> float:
        """Seconds until the window admits again: the oldest entries leave until its total is
        below the limit (for requests, one unit each, until the oldest entry leaves)."""
        excess = self.total - self.limit
        if excess < 0:
            return 0.0
        for time_, amount in zip(self.times, self.amounts, strict=True):
            excess -= amount
            if excess < 0:
                return max(0.0, time_ + self.span - now)
        return 0.0


class FixedWindow:
    """A window restarting every `span` seconds from `start`: its total counts since the last
    restart. Its reset, whatever it is said to mean, is the restart."""

    __slots__ = ("ends", "limit", "span", "total")

    def __init__(self, limit: int, span: float, start: float) -> None:
        self.limit = limit
        self.span = span
        self.ends = start + span
        self.total = 0

    def prune(self, now: float) -> None:
        if now >= self.ends:
            self.ends += math.floor((now - self.ends) / self.span + 1) * self.span
            self.total = 0

    def add(self, now: float, amount: int) -> None:
        self.prune(now)
        self.total += max(0, amount)

    def left(self, now: float) -> float:
        self.prune(now)
        return max(0, self.limit - self.total)

    def reset(self, now: float) -> float:
        self.prune(now)
        return self.ends - now

    def room(self, now: float) -> float:
        return 0.0 if self.total < self.limit else self.reset(now)


class Bucket:
    """A token bucket of `limit` units, refilling continuously at `limit / span` per second
    (OpenAI's description of its limits). `total` is what is used: the limit less the level;
    tokens spent past an empty bucket are a debt that refills first."""

    __slots__ = ("_at", "limit", "oldest", "rate", "span", "total")

    def __init__(self, limit: int, span: float, oldest: bool = False) -> None:
        self.limit = limit
        self.span = span
        self.rate = limit / span
        self.oldest = oldest  # `reset` is until one more unit is back, not until full
        self.total = 0.0
        self._at = -math.inf

    def prune(self, now: float) -> None:
        if now > self._at:
            if self.total > 0:
                self.total = max(0.0, self.total - (now - self._at) * self.rate)
            self._at = now

    def add(self, now: float, amount: int) -> None:
        self.prune(now)
        self.total += max(0, amount)

    def left(self, now: float) -> float:
        self.prune(now)
        return max(0.0, self.limit - self.total)

    def reset(self, now: float) -> float:
        self.prune(now)
        # Until one unit is back (as a window's oldest entry leaving), or until full.
        return (min(self.total, 1.0) if self.oldest else self.total) / self.rate

    def room(self, now: float) -> float:
        """Seconds until a unit is back (the bucket admits while it holds one)."""
        self.prune(now)
        return max(0.0, self.total - (self.limit - 1)) / self.rate


Limit = Window | FixedWindow | Bucket
"""A limit as `--limit-kind` counts it."""


def make_limit(options: ServeOptions, per_minute: int, now: float) -> Limit:
    """The limit of `per_minute` per window that `--limit-kind` and `--reset-means` describe."""
    limit, span = per_window(per_minute, options.window), options.window
    oldest = options.reset_means == "oldest"
    if options.limit_kind == "fixed":
        return FixedWindow(limit, span, now)
    if options.limit_kind == "bucket":
        return Bucket(limit, span, oldest)
    return Window(limit, span, oldest)


def go_duration(seconds: float) -> str:
    """OpenAI's duration format: "120ms", "1s", "17.28s", "6m0s", "1h2m3s"."""
    ms = math.ceil(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    h, m, s, frac = ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000
    sec = f"{s}.{frac:03d}".rstrip("0") if frac else str(s)
    if h:
        return f"{h}h{m}m{sec}s"
    return f"{m}m{sec}s" if m else f"{sec}s"


def proto_duration(seconds: float) -> str:
    """A protobuf Duration in JSON: "3s", "0.120s"."""
    ms = math.ceil(seconds * 1000)
    return f"{ms // 1000}.{ms % 1000:03d}s" if ms % 1000 else f"{ms // 1000}s"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused with 429, and when to try again."""

    kind: str  # "requests", "tokens" or "concurrency"
    retry_s: float  # until there is room again (Retry-After), not until the window is full
    message: str


class Stats:
    """The counters of `/stats`; `in_flight` is live, the rest restart at `/stats/reset`."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        self.started = time.time()
        self.requests = 0
        self.by_status: dict[int, int] = {}
        self.by_fault = dict.fromkeys(FAULTS, 0)
        self.by_route: dict[str, int] = {}
        self.prompts = {"warmup": 0, "adaptive": 0, "unknown": 0}
        self.ok = 0
        # Answers in full to a prompt answered in full before: requests served twice, where
        # every request's prompt is its own (a hash each; a prompt asked again in earnest, as
        # a question sampled k times, counts too).
        self.answered_again = 0
        self._answered: set[int] = set()
        self.tokens = [0, 0, 0]
        self.faulty_tokens = [0, 0, 0]
        self.embedding_tokens = 0
        self.rate_limited = {"requests": 0, "tokens": 0, "concurrency": 0}
        self.max_in_flight = self.in_flight
        # Wall-clock times (time.time()) of the first request on a model route and of the last
        # response sent: a client's rate is measured between them, without its own start-up.
        self.first_request_at: float | None = None
        self.last_request_at: float | None = None
        self.last_response_at: float | None = None
        # Requests on model routes per second since the first: the rate as the server saw it.
        self.per_second: list[int] = []
        # When the last request drawn to hang arrived: its client's retry comes no sooner than
        # its own timeout after it, whatever the quota allows.
        self.last_hang_at: float | None = None

    def arrived(self, route: str) -> None:
        """Counts a request on a model route (`route` is its name in `by_route`)."""
        self.requests += 1
        self.by_route[route] = self.by_route.get(route, 0) + 1
        now = self.last_request_at = time.time()
        if self.first_request_at is None:
            self.first_request_at = now
        second = int(now - self.first_request_at)
        if second < 86_400:  # a day of seconds at most
            self.per_second.extend([0] * (second + 1 - len(self.per_second)))
            self.per_second[second] += 1

    def answered(self, prompt: str) -> None:
        """Counts an answer sent in full (`ok`), and whether its prompt had one already."""
        self.ok += 1
        key = hash(prompt)
        if key in self._answered:
            self.answered_again += 1
        else:
            self._answered.add(key)

    def status(self, code: int) -> None:
        self.by_status[code] = self.by_status.get(code, 0) + 1
        self.last_response_at = time.time()

    def as_dict(self) -> dict[str, Any]:
        def usage(t: list[int]) -> dict[str, int]:
            return {"input": t[0], "output": t[1], "thinking": t[2]}

        return {
            "requests": self.requests,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "by_fault": dict(self.by_fault),
            "by_route": dict(self.by_route),
            "prompts": dict(self.prompts),
            "ok": self.ok,
            "answered_again": self.answered_again,
            "tokens": usage(self.tokens),
            "faulty_tokens": usage(self.faulty_tokens),
            "embedding_tokens": self.embedding_tokens,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "rate_limited": sum(self.rate_limited.values()),
            "rate_limited_by": dict(self.rate_limited),
            "since_s": round(time.time() - self.started, 3),
            "first_request_at": self.first_request_at,
            "last_request_at": self.last_request_at,
            "last_response_at": self.last_response_at,
            "last_hang_at": self.last_hang_at,
            "per_second": list(self.per_second),
        }


class Admission:
    """The gate every request passes: its limits, its fault and latency draws, and the counters."""

    def __init__(self, options: ServeOptions, now: Callable[[], float]) -> None:
        self.options = options
        self.stats = Stats()
        self._now = now
        started = now()
        self.rpm = make_limit(options, options.rpm, started) if options.rpm else None
        self.tpm = make_limit(options, options.tpm, started) if options.tpm else None
        cumulative = 0.0
        self._faults: list[tuple[float, str]] = []
        for kind in FAULTS:
            if options.fault(kind) > 0:
                cumulative += options.fault(kind)
                self._faults.append((cumulative, kind))
        # Separate streams, so that turning latency on leaves the sequence of faults alone.
        self._fault_rng = random.Random(f"fault/{options.seed}")
        self._latency_rng = random.Random(f"latency/{options.seed}")
        self._latency_mu = math.log(options.latency) if options.latency > 0 else 0.0

    def admit(self) -> Refusal | None:
        """None if a request may start now (it enters the RPM window), else why not."""
        opts = self.options
        if opts.max_concurrency is not None and self.stats.in_flight >= opts.max_concurrency:
            # When a place frees is unknowable; one second of the (scaled) minute.
            message = f"Too many concurrent requests: limit {opts.max_concurrency}."
            return Refusal("concurrency", opts.window / 60, message)
        now = self._now()
        refusal = self._full(self.rpm, "requests", ", Requested 1", now) or self._full(
            self.tpm, "tokens", "", now
        )
        if refusal is None and self.rpm is not None:
            self.rpm.add(now, 1)
        return refusal

    def _full(self, window: Limit | None, unit: str, asked: str, now: float) -> Refusal | None:
        """A refusal if `window` (of `unit`) has not one unit left, else None."""
        if window is None or window.left(now) >= 1:
            return None
        wait = window.room(now)
        message = (
            f"Rate limit reached on {unit} per window ({self.options.window:g} s): Limit "
            f"{window.limit}, Used {math.ceil(window.total)}{asked}. Please try again in "
            f"{go_duration(wait)}."
        )
        return Refusal(unit, wait, message)

    def retry_headers(self, refusal: Refusal) -> dict[str, str]:
        """OpenAI's headers of a 429: the rate headers, Retry-After and retry-after-ms."""
        headers = self.rate_headers()
        headers["Retry-After"] = str(math.ceil(refusal.retry_s))
        headers["retry-after-ms"] = str(math.ceil(refusal.retry_s * 1000))
        return headers

    def rate_headers(self) -> dict[str, str]:
        """OpenAI's x-ratelimit-* headers: limits and what is left per minute, and the resets."""
        headers: dict[str, str] = {}
        now = self._now()
        per_minute = 60 / self.options.window
        limits = (
            (self.rpm, self.options.rpm, "requests"),
            (self.tpm, self.options.tpm, "tokens"),
        )
        for window, limit, unit in limits:
            if window is not None:
                # Per minute, as OpenAI announces them, whatever the window.
                left = window.left(now)
                headers[f"x-ratelimit-limit-{unit}"] = str(limit)
                headers[f"x-ratelimit-remaining-{unit}"] = str(math.floor(left * per_minute))
                headers[f"x-ratelimit-reset-{unit}"] = go_duration(window.reset(now))
        return headers

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Counts a request in flight while the block runs."""
        stats = self.stats
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            yield
        finally:
            stats.in_flight -= 1

    def fault(self) -> str | None:
        """The fault this request suffers, or None: one draw per generation request."""
        if not self._faults:
            return None
        draw = self._fault_rng.random()
        fault = next((kind for edge, kind in self._faults if draw < edge), None)
        if fault == "hang":
            self.stats.last_hang_at = time.time()
        return fault

    async def delay(self) -> None:
        """Sleeps the request's lognormal latency (none when --latency is 0)."""
        if self.options.latency > 0:
            sigma = self.options.latency_sigma
            await asyncio.sleep(self._latency_rng.lognormvariate(self._latency_mu, sigma))

    def spend(self, tokens: int) -> None:
        """Enters a response's tokens in the TPM window."""
        if self.tpm is not None:
            self.tpm.add(self._now(), tokens)
