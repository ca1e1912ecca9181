"""The RPM pace on a fake clock: a schedule that the loop's lateness does not slow, and a
server's window (sliding, fixed or a token bucket; `ttc serve`'s own limits) learnt from its
headers, filled, and given up when another client shares it or the server refuses."""

from __future__ import annotations

import asyncio
import collections
import math
import random
from collections.abc import Callable

import pytest
from fakes import FakeClock

from ttc.adapters.sim import ServeOptions
from ttc.adapters.sim._admission import Limit, make_limit
from ttc.engine.contract._types import RateInfo
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._window import Window


class WindowServer:
    """Admits at most `rpm * window / 60` requests in any `window` seconds, and answers with
    OpenAI's headers scaled to a minute, as `ttc serve --window` does; records every admission."""

    def __init__(self, clock: FakeClock, rpm: int, window: float) -> None:
        self.clock, self.rpm, self.window = clock, rpm, window
        self.budget = math.floor(rpm * window / 60 + 1e-9)
        self.inside: collections.deque[float] = collections.deque()
        self.admitted: list[float] = []
        self.refused = 0

    def _prune(self) -> None:
        while self.inside and self.inside[0] <= self.clock.elapsed - self.window:
            self.inside.popleft()

    def admit(self) -> bool:
        self._prune()
        if len(self.inside) >= self.budget:
            self.refused += 1
            return False
        self.inside.append(self.clock.elapsed)
        self.admitted.append(self.clock.elapsed)
        return True

    def retry_after(self) -> float:
        """A 429's wait: until the oldest request leaves the window."""
        self._prune()
        return self.inside[0] + self.window - self.clock.elapsed if self.inside else 0.0

    def headers(self) -> RateInfo:
        self._prune()
        left = self.budget - len(self.inside)
        newest = self.inside[-1] + self.window - self.clock.elapsed if self.inside else 0.0
        return RateInfo(
            limit_requests=self.rpm,
            remaining_requests=math.floor(left * 60 / self.window),
            reset_requests_s=max(0.001, newest),
        )


class BucketServer(WindowServer):
    """A token bucket of `rpm` requests refilled continuously, whose reset is the time to refill
    what was used (as OpenAI documents it): its headers must not look like a window."""

    def __init__(self, clock: FakeClock, rpm: int) -> None:
        super().__init__(clock, rpm, 60.0)
        self.level, self.at = float(rpm), 0.0

    def _refill(self) -> None:
        now = self.clock.elapsed
        self.level = min(float(self.rpm), self.level + (now - self.at) * self.rpm / 60)
        self.at = now

    def admit(self) -> bool:
        self._refill()
        if self.level < 1:
            self.refused += 1
            return False
        self.level -= 1
        self.admitted.append(self.clock.elapsed)
        return True

    def retry_after(self) -> float:
        return (1 - self.level) * 60 / self.rpm

    def headers(self) -> RateInfo:
        self._refill()
        used = self.rpm - self.level
        return RateInfo(
            limit_requests=self.rpm,
            remaining_requests=math.floor(self.level),
            reset_requests_s=max(0.001, used * 60 / self.rpm),
        )


class ServeLimit(WindowServer):
    """`ttc serve`'s own limit of `--limit-kind kind --reset-means means` on the fake clock, with
    its headers (per minute, the reset to the millisecond as OpenAI's duration format has it)."""

    def __init__(self, clock: FakeClock, rpm: int, window: float, kind: str, means: str) -> None:
        super().__init__(clock, rpm, window)
        options = ServeOptions(rpm=rpm, window=window, limit_kind=kind, reset_means=means)
        self.limit: Limit = make_limit(options, rpm, clock.elapsed)

    def admit(self) -> bool:
        now = self.clock.elapsed
        if self.limit.left(now) < 1:
            self.refused += 1
            return False
        self.limit.add(now, 1)
        self.admitted.append(now)
        return True

    def retry_after(self) -> float:
        return self.limit.room(self.clock.elapsed)

    def headers(self) -> RateInfo:
        now = self.clock.elapsed
        left = self.limit.left(now)
        return RateInfo(
            limit_requests=self.rpm,
            remaining_requests=math.floor(left * 60 / self.window),
            reset_requests_s=math.ceil(self.limit.reset(now) * 1000) / 1000,
        )


async def send(
    limiter: Limiter, server: WindowServer, latency: float, wire: Wire | None = None
) -> None:
    """One request: a slot, the server's admission, an answer `latency` later; a refusal is
    answered at once and retried after its retry-after, as the Sender does with a 429. With a
    `wire`, the server counts each request once the wire has sent it."""
    while True:
        async with limiter.slot() as ticket:
            if wire is not None:
                await wire.send()
            try:
                if server.admit():
                    await asyncio.sleep(latency)
                    limiter.succeeded(server.headers())
                    return
                wait = server.retry_after()
                limiter.rate_limited(ticket, server.headers())
            finally:
                if wire is not None:
                    wire.busy -= 1
        await asyncio.sleep(max(0.5, wait))


async def run_until(
    clock: FakeClock, tasks: list[asyncio.Task[None]], until: float, step: float = 0.01
) -> None:
    """Moves the clock in `step`s until every task is done (or `until`), then cancels any left."""
    await advance(clock, until, step, lambda: all(task.done() for task in tasks))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def advance(
    clock: FakeClock, until: float, step: float = 0.01, done: Callable[[], bool] = lambda: False
) -> None:
    """Moves the clock in `step`s to `until`, or until `done()`."""
    t = clock.elapsed
    while not done() and t < until:
        t += step
        await clock.advance_to(t)


def spawn(n: int, one: Callable[[], object]) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(one()) for _ in range(n)]  # type: ignore[arg-type]


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        most = max(most, i - j + 1)
    return most


async def test_a_late_wake_does_not_slow_the_pace(clock: FakeClock) -> None:
    limiter = Limiter(rpm=60, max_concurrency=10, headroom=0.0)
    entered: list[float] = []

    async def one() -> None:
        async with limiter.slot():
            entered.append(clock.elapsed)

    tasks = spawn(3, one)
    await clock.settle()
    # The loop wakes the second request 0.3 s late; the third is still due at 2 s, not 2.3 s.
    await clock.advance_to(1.3)
    await clock.advance_to(2.0)
    assert entered == pytest.approx([0.0, 1.3, 2.0])
    # A pace left idle starts again from its next request: no burst to catch up.
    await clock.advance_to(10.0)
    tasks += spawn(2, one)
    await clock.settle()
    await clock.advance_to(10.9)
    assert entered == pytest.approx([0.0, 1.3, 2.0, 10.0])
    await clock.advance_to(11.0)
    assert entered == pytest.approx([0.0, 1.3, 2.0, 10.0, 11.0])
    await asyncio.gather(*tasks)


async def test_a_sliding_window_is_learnt_and_filled_at_once_without_a_refusal(
    clock: FakeClock,
) -> None:
    server = WindowServer(clock, rpm=600, window=6.0)  # 60 requests in any 6 s
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(200, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=40.0)
    assert server.refused == 0
    assert len(server.admitted) == 200
    window = limiter.window
    assert window is not None
    assert window.budget == 60
    assert 6.0 <= window.seconds < 6.1
    assert window.span > window.seconds
    # The first window's budget went out in its first second or so (paced: 12 requests), and
    # no window of the server ever held more than its budget.
    assert sum(t < 1.5 for t in server.admitted) >= 55
    assert most_in_any_window(server.admitted, 6.0) <= 60


@pytest.mark.parametrize(
    ("kind", "means", "read_as"),
    [
        ("sliding", "newest", "sliding-newest"),
        ("sliding", "oldest", "sliding-oldest"),
        ("fixed", "newest", "fixed"),
        ("bucket", "newest", "bucket"),
        ("bucket", "oldest", "bucket"),
    ],
)
async def test_each_kind_of_limit_is_read_and_filled_without_a_refusal(
    clock: FakeClock, kind: str, means: str, read_as: str
) -> None:
    server = ServeLimit(clock, rpm=600, window=6.0, kind=kind, means=means)  # 60 in 6 s
    await clock.advance_to(2.5)  # a fixed window's restarts fall between the requests
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(300, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=80.0)
    assert server.refused == 0
    assert len(server.admitted) == 300
    window = limiter.window
    assert window is not None
    assert window.kind == read_as
    assert 54 <= window.budget <= 60
    # Paced, 300 requests take 30.6 s; a learnt window of 60 is filled as it has room (a
    # fixed window, known at its first restart 3.5 s in, from each restart: the last of its
    # five windows opens 27.5 s in; a bucket as it refills).
    assert server.admitted[-1] - server.admitted[0] < (28.0 if kind == "fixed" else 26.0)
    if kind == "sliding":
        assert most_in_any_window(server.admitted, 6.0) <= 60
    if kind == "fixed":  # restarts at 0, 6, 12... s
        assert max(collections.Counter(t // 6.0 for t in server.admitted).values()) <= 60


class Wire:
    """The client's loop sending our requests on a loaded machine: one after another, `cost`
    seconds each and `connect` more for one that opens a connection (more of ours in flight
    than ever before: the pool grows). The server counts a request once it is sent; the pace's
    own timers are on time (the loop is busy sending, not late)."""

    def __init__(self, clock: FakeClock, cost: float, connect: float) -> None:
        self.clock, self.cost, self.connect = clock, cost, connect
        self.free = 0.0  # when the loop has sent all it was given
        self.opened = 0  # connections opened (none is ever closed)
        self.busy = 0  # requests in flight

    async def send(self) -> None:
        self.busy += 1
        cost = self.cost
        if self.busy > self.opened:
            self.opened, cost = self.busy, cost + self.connect
        self.free = max(self.free, self.clock.elapsed) + cost
        await asyncio.sleep(self.free - self.clock.elapsed)


@pytest.mark.parametrize("means", ["oldest", "newest"])
async def test_a_learnt_sliding_windows_requests_counted_as_the_loop_sends_them_are_not_refused(
    clock: FakeClock, means: str
) -> None:
    # The window learnt, the rest of its budget went at once (before: 50 slots in one turn of
    # the loop), and the loop sent them one by one, each on a new connection: the last were
    # counted 0.3 s after their slot. Their replacements, a span after that slot, went on open
    # connections, counted sooner, while the server still held those they replaced: refused
    # (before: 21 refusals here; test_quota's sliding-oldest case beside two busy loops, 4-10
    # in 4 runs of 5). Spread, each is sent before the next is due.
    server = ServeLimit(clock, rpm=600, window=6.0, kind="sliding", means=means)  # 60 in 6 s
    limiter = Limiter(rpm=600, max_concurrency=100)
    wire = Wire(clock, cost=0.002, connect=0.004)
    tasks = spawn(300, lambda: send(limiter, server, latency=0.5, wire=wire))
    await run_until(clock, tasks, until=80.0)
    assert len(server.admitted) == 300
    assert server.refused == 0
    window = limiter.window
    assert window is not None
    assert window.kind == f"sliding-{means}"
    assert most_in_any_window(server.admitted, 6.0) <= 60
    # Filled all the same: paced, 300 requests take 30.6 s.
    assert server.admitted[-1] - server.admitted[0] < 26.0


@pytest.mark.parametrize(
    ("latency", "cost"), [(0.1, 0.001), (0.1, 0.002), (0.3, 0.002), (0.3, 0.004)]
)
@pytest.mark.parametrize("means", ["newest", "oldest"])
async def test_a_learnt_bucket_is_charged_with_ours_the_server_has_not_counted_yet(
    clock: FakeClock, latency: float, cost: float, means: str
) -> None:
    # test_quota's bucket (60 requests, refilling 20 a second), and a loop that sends our
    # requests one by one: a bucket learnt, the burst it lets through reaches the server over
    # 0.05-0.2 s. An answer the server wrote while the burst was still going out reads a
    # fuller, longer bucket; charged only with ours of the last moment, the new bucket let
    # through what the server's had no room for (before: 2-5 refusals and the bucket given up
    # in each of the four reset-means-newest cases; test_quota's case beside a busy test
    # suite, in 3-4 runs of 40).
    server = ServeLimit(clock, rpm=1200, window=3.0, kind="bucket", means=means)
    limiter = Limiter(rpm=1200, max_concurrency=32)
    wire = Wire(clock, cost=cost, connect=2 * cost)
    tasks = spawn(150, lambda: send(limiter, server, latency=latency, wire=wire))
    await run_until(clock, tasks, until=60.0)
    assert len(server.admitted) == 150
    assert server.refused == 0
    window = limiter.window
    assert window is not None
    assert window.kind == "bucket"
    # Filled all the same: paced, 150 requests take 7.6 s.
    assert server.admitted[-1] - server.admitted[0] < 6.0


async def test_answers_read_after_a_stall_do_not_end_the_learnt_window(clock: FakeClock) -> None:
    # test_quota's server (60 requests in any 3 s) on a loaded machine: the process is
    # descheduled for 2 s (beside two busy loops, 1-2 s at a time) soon after the window is
    # learnt; the answers the server wrote in the 0.3 s before are read after it, and count
    # requests of ours that the window has let go since. They are ours all the same: the
    # window is kept (before: given up, "the server counted 8 requests not ours", paced).
    server = ServeLimit(clock, rpm=1200, window=3.0, kind="sliding", means="oldest")
    limiter = Limiter(rpm=1200, max_concurrency=32)
    rng = random.Random(0)
    stall: list[float] = []  # when it begins, once the window is learnt
    length = 2.0

    async def one() -> None:
        while True:
            async with limiter.slot() as ticket:
                if server.admit():
                    await asyncio.sleep(rng.uniform(0.05, 1.0))
                    headers = server.headers()
                    if stall and stall[0] - 0.3 <= clock.elapsed < stall[0]:
                        await asyncio.sleep(stall[0] + length - clock.elapsed)
                    limiter.succeeded(headers)
                    return
                wait = server.retry_after()
                limiter.rate_limited(ticket, server.headers())
            await asyncio.sleep(max(0.5, wait))

    tasks = spawn(150, one)
    await advance(clock, 10.0, done=lambda: limiter.window is not None)
    learnt = limiter.window
    assert learnt is not None
    stall.append(clock.elapsed + 1.0)
    await advance(clock, stall[0])
    await clock.advance_to(stall[0] + length)  # every timer due meanwhile fires at its end
    await run_until(clock, tasks, until=60.0)
    assert len(server.admitted) == 150
    assert server.refused == 0
    assert limiter.window == learnt


async def test_a_bucket_only_ever_seen_one_request_short_is_paced(clock: FakeClock) -> None:
    # A minute's bucket, announced in requests: paced, it is never more than one short, and
    # readings of one state never agree on a window.
    server = BucketServer(clock, rpm=600)
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(100, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=30.0)
    assert limiter.window is None
    assert server.refused == 0
    gaps = [b - a for a, b in zip(server.admitted, server.admitted[1:], strict=False)]
    assert min(gaps) >= 0.1 - 0.011  # paced at 600 RPM less the headroom (0.01 s steps)


async def share(clock: FakeClock, learn: bool) -> tuple[Limiter, int, float]:
    """300 requests of ours; from 8 s on, another client asks for one every 0.2 s (half the
    quota): our limiter, the server's refusals, and the share of the other's requests admitted."""
    server = WindowServer(clock, rpm=600, window=6.0)
    ours = Limiter(rpm=600, max_concurrency=100, learn_window=learn)
    began = clock.elapsed
    tasks = spawn(300, lambda: send(ours, server, latency=0.5))
    asked = admitted = 0

    async def other() -> None:
        nonlocal asked, admitted
        await asyncio.sleep(8.0)
        while True:
            asked += 1
            admitted += server.admit()
            await asyncio.sleep(0.2)

    background = asyncio.create_task(other())
    await advance(clock, began + 8.0)
    assert (ours.window is not None) == learn
    await run_until(clock, tasks, until=began + 300.0, step=0.02)
    background.cancel()
    await asyncio.gather(background, return_exceptions=True)
    assert len(server.admitted) - admitted == 300  # all of ours answered
    return ours, server.refused, admitted / asked


async def test_another_client_on_the_quota_ends_the_window_and_ours_backs_off(
    clock: FakeClock,
) -> None:
    ours, refused, theirs = await share(clock, learn=True)
    assert ours.window is None
    assert ours._requests is not None
    assert ours._requests.dropped is not None  # the other's requests counted, or a refusal
    # Backing off, learnt window or not: the refusals slow our pace (the cap alone cannot, the
    # pace sets the rate), so the other client, which asks for half the quota and never backs
    # off, gets most of what it asks for (two thirds, paced at our full rate regardless).
    _, paced_refused, paced_theirs = await share(clock, learn=False)
    assert theirs >= 0.75
    assert paced_theirs >= 0.75
    assert max(refused, paced_refused) <= 80  # of about 300 the other asked for and our 300


async def _learnt(clock: FakeClock) -> tuple[WindowServer, Limiter, Window]:
    """A server of a 6 s window of 60, and a limiter that has learnt it from 20 s of requests
    (its window)."""
    server = WindowServer(clock, rpm=600, window=6.0)
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(60, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=20.0)
    learnt = limiter.window
    assert learnt is not None
    return server, limiter, learnt


async def test_refusals_widen_the_margin_until_the_window_is_given_up(clock: FakeClock) -> None:
    _, limiter, learnt = await _learnt(clock)
    margin = learnt.span - learnt.seconds
    assert margin == pytest.approx(0.06, abs=0.002)  # 1% of 6 s
    margins = []
    for ticket in (10**6, 10, 10**7):  # a new episode, the same one, a new one
        limiter.rate_limited(ticket)
        window = limiter.window
        assert window is not None
        assert window.budget == learnt.budget
        margins.append(window.span - window.seconds)
    assert margins == pytest.approx([3 * margin, 3 * margin, 9 * margin])
    limiter.rate_limited(10**8)  # 27 times 60 ms would pass a tenth of the window
    assert limiter.window is None


async def test_a_widened_margin_narrows_back_after_clean_windows(clock: FakeClock) -> None:
    server, limiter, learnt = await _learnt(clock)
    margin = learnt.span - learnt.seconds
    limiter.rate_limited(10**6)  # two episodes: nine times the margin
    limiter.rate_limited(10**7)
    began = clock.elapsed

    def widened() -> float:
        window = limiter.window
        assert window is not None
        return (window.span - window.seconds) / margin

    assert widened() == pytest.approx(9)
    # Answers keep coming without a refusal: a step back five windows (30 s) after the widening
    # and another five after that, down to the margin adopted; the window keeps its budget.
    tasks = spawn(900, lambda: send(limiter, server, latency=0.5))
    steps: list[tuple[float, float]] = [(0.0, widened())]
    while clock.elapsed < began + 120.0:
        await advance(clock, clock.elapsed + 0.5)
        if round(widened(), 6) != round(steps[-1][1], 6):
            steps.append((clock.elapsed - began, widened()))
    await run_until(clock, tasks, until=began + 200.0)
    assert [f for _, f in steps] == pytest.approx([9, 3, 1])
    assert steps[1][0] >= 30.0
    assert steps[2][0] - steps[1][0] >= 30.0
    assert steps[2][0] < 80.0
    assert server.refused == 0
    assert most_in_any_window(server.admitted, 6.0) <= 60


async def test_a_refused_request_leaves_the_learnt_window(clock: FakeClock) -> None:
    server = WindowServer(clock, rpm=600, window=6.0)
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(60, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=20.0)
    await advance(clock, 30.0)  # the window is empty again
    window = limiter.window
    assert window is not None
    budget = window.budget
    # The whole budget in flight; one is refused: the server never counted it, so one more
    # request may start at once, and no more.
    held = asyncio.Event()
    entered: list[float] = []

    async def hold() -> None:
        async with limiter.slot() as ticket:
            entered.append(clock.elapsed)
            if len(entered) == 1:
                limiter.rate_limited(ticket)
            await held.wait()

    holders = spawn(budget + 2, hold)
    await advance(clock, clock.elapsed + 2.0)  # the budget spread over its first second
    assert len(entered) == budget + 1
    held.set()
    await advance(clock, 40.0)
    await asyncio.gather(*holders)


async def test_a_full_learnt_window_does_not_close_the_gate(clock: FakeClock) -> None:
    server = WindowServer(clock, rpm=600, window=6.0)
    limiter = Limiter(rpm=600, max_concurrency=100)
    tasks = spawn(30, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=20.0)
    assert limiter.window is not None
    # Its own budget used up is what the window means: the window, not the gate, waits.
    limiter.succeeded(RateInfo(limit_requests=600, remaining_requests=0, reset_requests_s=5.0))
    assert limiter._gate_timer is None
    unlearnt = Limiter(rpm=600, learn_window=False)
    unlearnt.succeeded(RateInfo(limit_requests=600, remaining_requests=0, reset_requests_s=5.0))
    assert unlearnt._gate_timer is not None


async def test_a_window_of_a_few_requests_is_paced(clock: FakeClock) -> None:
    server = WindowServer(clock, rpm=30, window=6.0)  # 3 requests in any 6 s
    limiter = Limiter(rpm=30, max_concurrency=10)
    tasks = spawn(12, lambda: send(limiter, server, latency=0.5))
    await run_until(clock, tasks, until=40.0, step=0.05)
    assert limiter.window is None
    assert server.refused == 0


@pytest.mark.parametrize("tpm", [None, 60_000])
async def test_a_pause_does_not_release_a_burst_at_the_resume(
    clock: FakeClock, tpm: int | None
) -> None:
    # 10 requests a second; 8 wait on the pace when `ttc ctl pause` comes. Had they kept the
    # rate units taken before it, all 8 would start at the resume, over the limit.
    limiter = Limiter(rpm=600, tpm=tpm, max_concurrency=8, headroom=0.0)
    starts: list[float] = []

    async def one() -> None:
        async with limiter.slot(est_tokens=100):
            starts.append(clock.elapsed)
            await asyncio.sleep(0)

    tasks = spawn(40, one)
    await advance(clock, 0.5)
    limiter.pause()
    await advance(clock, 2.5)
    held = len(starts)
    limiter.unpause()
    await run_until(clock, tasks, until=10.0)
    assert len(starts) == 40
    assert not [t for t in starts if 0.55 < t < 2.5]  # nothing started while paused
    assert sum(2.5 <= t < 2.6 for t in starts) <= 2  # the resume is paced, not a burst
    assert most_in_any_window([t for t in starts if t >= 2.5], 1.0) <= 11
    assert held <= 7
