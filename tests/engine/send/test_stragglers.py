"""Stragglers on a fake clock: with hedging on (`--hedge`), once the work has run out, an attempt
far slower than the others gets a second copy and the first answer is kept; never while other
requests still wait; and with it off (the default), no request is ever sent twice unless its
attempt failed."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable

import pytest
from fakes import FakeClock

from ttc.engine import Limiter, RetryPolicy, Transient
from ttc.engine._util._pool import bounded
from ttc.engine.send._sender import Sender
from ttc.engine.send._stragglers import first_answer

HANG = 10_000.0  # seconds: never, on the test's clock


class Calls:
    """Raw calls whose n-th invocation for a key waits its scripted seconds, then answers
    `key#n`; records when each started and which were cancelled."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.started: dict[int, list[float]] = defaultdict(list)
        self.cancelled: list[tuple[int, int]] = []

    def call(self, key: int, script: list[float]) -> Callable[[], Awaitable[str]]:
        async def once() -> str:
            n = len(self.started[key])
            self.started[key].append(self.clock.elapsed)
            try:
                await asyncio.sleep(script[n])
            except asyncio.CancelledError:
                self.cancelled.append((key, n))
                raise
            return f"{key}#{n}"

        return once


async def run(
    clock: FakeClock,
    scripts: list[list[float]],
    timeout_s: float,
    workers: int = 4,
    fed: bool = True,
    hedge: bool = True,
) -> tuple[Calls, dict[int, tuple[str | None, int]], Limiter, float]:
    """Sends one request per script through a Sender (base delay 0), `workers` at once, the
    jobs fed through the limiter (`fed`) as the engine and `ttc batch` do; moves the clock until
    all have answered. Returns the calls, each request's (answer, attempts), the limiter and
    when the last answered."""
    calls = Calls(clock)
    limiter = Limiter(max_concurrency=workers)
    limiter.hedge = hedge
    sender = Sender(None, limiter, RetryPolicy(base_delay=0.0), timeout_s)
    results: dict[int, tuple[str | None, int]] = {}

    async def one(key: int) -> None:
        answer, _, attempts = await sender.call_with_retry(
            0, calls.call(key, scripts[key]), lambda r: (0, None), lambda *a: None
        )
        results[key] = (answer, attempts)

    keys = range(len(scripts))
    pool = asyncio.create_task(bounded(limiter.fed(keys) if fed else keys, one, workers))
    t = 0.0
    while not pool.done() and t < 1000:
        t = round(t + 0.05, 2)
        await clock.advance_to(t)
    await pool
    return calls, results, limiter, t


async def test_a_hang_at_the_end_gets_a_second_copy_and_one_answer_is_kept(
    clock: FakeClock,
) -> None:
    scripts = [[1.0]] * 120 + [[HANG, 1.0]]
    calls, results, limiter, ended = await run(clock, scripts, timeout_s=100.0)
    # The last four start at 30 s; three answer at 31 s, and the work has run out: the hang,
    # as slow as the 90th percentile (1 s) by then, gets its copy, which answers at 32 s.
    assert results[120] == ("120#1", 1)
    assert calls.started[120] == pytest.approx([30.0, 31.0], abs=0.06)
    assert calls.cancelled == [(120, 0)]  # the hung copy is let go once the other answered
    assert limiter.stragglers.hedges == 1
    assert limiter.stragglers.copies == 1  # what summary.json reports as hedged copies
    assert ended <= 32.2
    assert all(results[k] == (f"{k}#0", 1) for k in range(120))  # nothing else copied


async def test_without_hedging_no_request_is_sent_twice_unless_its_attempt_failed(
    clock: FakeClock,
) -> None:
    # The default: the same hang at the end runs to its timeout and is retried then; every
    # other request is sent exactly once.
    scripts = [[1.0]] * 120 + [[HANG, 1.0]] + [[1.0, 1.0]] * 30
    calls, results, limiter, _ = await run(clock, scripts, timeout_s=20.0, hedge=False)
    assert results[120] == ("120#1", 2)
    first, second = calls.started[120]
    assert second - first == pytest.approx(20.0, abs=0.06)  # its timeout, not a copy
    assert calls.cancelled == [(120, 0)]
    assert all(len(calls.started[k]) == 1 for k in range(len(scripts)) if k != 120)
    assert limiter.stragglers.hedges == limiter.stragglers.copies == 0


async def test_no_copy_while_other_requests_wait_for_a_slot(clock: FakeClock) -> None:
    # The hang starts at 27.5 s, with 100 answers known but 90 requests still to send: it runs
    # to its timeout and is retried, as any timed-out attempt is.
    scripts = [[1.0]] * 110 + [[HANG, 1.0]] + [[1.0]] * 90
    calls, results, _, _ = await run(clock, scripts, timeout_s=5.0)
    assert results[110] == ("110#1", 2)
    first, second = calls.started[110]
    assert second - first == pytest.approx(5.0, abs=0.06)
    assert calls.cancelled == [(110, 0)]  # by its timeout, no copy sent before
    assert all(len(started) == 1 for k, started in calls.started.items() if k != 110)


async def test_no_copy_of_a_slow_attempt_while_jobs_remain_to_be_taken(clock: FakeClock) -> None:
    # Between two requests a worker passes the loop once (the pool's pause): for that moment
    # fewer requests are under way than the cap and none waits, which is not the end of the work.
    # The last ones answer faster than the 90th percentile: none of them is due at the end.
    scripts = [[1.0]] * 120 + [[3.0]] + [[0.5]] * 40
    calls, results, limiter, _ = await run(clock, scripts, timeout_s=100.0)
    assert results[120] == ("120#0", 1)
    assert limiter.stragglers.hedges == limiter.stragglers.copies == 0
    assert all(len(started) == 1 for started in calls.started.values())


async def test_work_not_fed_through_the_limiter_is_never_copied(clock: FakeClock) -> None:
    scripts = [[1.0]] * 120 + [[HANG, 1.0]]
    _, results, limiter, _ = await run(clock, scripts, timeout_s=5.0, fed=False)
    assert results[120] == ("120#1", 2)  # waited out its timeout, then retried
    assert limiter.stragglers.hedges == 0


async def test_no_copy_while_too_few_latencies_are_known(clock: FakeClock) -> None:
    scripts = [[1.0]] * 20 + [[HANG, 1.0]]
    _, results, limiter, _ = await run(clock, scripts, timeout_s=8.0)
    assert results[20] == ("20#1", 2)
    assert limiter.stragglers.hedges == 0


async def test_first_answer_without_a_due_copy_calls_once() -> None:
    again_called = False

    async def first(due: asyncio.Future[None]) -> str:
        return "first"

    async def again() -> str:
        nonlocal again_called
        again_called = True
        return "again"

    assert await first_answer(first, again) == "first"
    assert not again_called


async def test_first_answer_raises_the_last_failure_when_every_copy_fails() -> None:
    async def first(due: asyncio.Future[None]) -> str:
        due.set_result(None)
        await asyncio.sleep(0.01)
        raise Transient("first failed")

    async def again() -> str:
        raise Transient("second failed")

    with pytest.raises(Transient, match="first failed"):
        await first_answer(first, again)


async def test_first_answer_cancelled_cancels_both_copies() -> None:
    cancelled: list[str] = []
    started = asyncio.Event()

    async def first(due: asyncio.Future[None]) -> str:
        due.set_result(None)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append("first")
            raise
        return "first"

    async def again() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append("again")
            raise
        return "again"

    task = asyncio.create_task(first_answer(first, again))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["again", "first"]
