"""The per-attempt timeout on one timer (`Deadlines`): each attempt times out at its own deadline,
as under `asyncio.timeout`, on a fake clock; a cancel from elsewhere stays a cancel; nothing is
left watched once the attempts end; and a new loop takes over from one that has ended."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest
from fakes import FakeClock

from ttc.engine.send._deadlines import Deadlines


async def _attempt(deadlines: Deadlines, clock: FakeClock, seconds: float) -> str:
    """Sleeps `seconds` under a deadline; says how it ended and when (elapsed on the clock)."""
    try:
        with deadlines.watch():
            await asyncio.sleep(seconds)
    except TimeoutError:
        return f"timeout@{clock.elapsed:g}"
    return f"done@{clock.elapsed:g}"


async def _tick_until(clock: FakeClock, tasks: list[asyncio.Task[str]], step: float) -> None:
    await clock.settle()  # the tasks begin at the clock's present
    t = clock.elapsed
    while not all(task.done() for task in tasks) and t < 100:
        t = round(t + step, 3)
        await clock.advance_to(t)


async def test_each_attempt_times_out_at_its_own_deadline_and_no_sooner(clock: FakeClock) -> None:
    deadlines = Deadlines(5.0)
    tasks = []
    # Attempts start a second apart; each takes as long as its index says.
    for i, length in enumerate([1.0, 9.0, 4.0, 7.0, 2.0]):
        await clock.advance_to(float(i))
        tasks.append(asyncio.create_task(_attempt(deadlines, clock, length)))
        await clock.settle()
    await _tick_until(clock, tasks, 0.25)
    assert [t.result() for t in tasks] == [
        "done@1",  # 1 s: well within its 5 s
        "timeout@6",  # started at 1, cut at 6
        "done@6",  # started at 2, took 4: answered before its deadline at 7
        "timeout@8",  # started at 3, cut at 8
        "done@6",  # started at 4, took 2
    ]
    assert len(deadlines) == 0  # nothing left watched


async def test_an_attempt_that_ends_in_time_leaves_the_deadline_unarmed(clock: FakeClock) -> None:
    deadlines = Deadlines(5.0)
    task = asyncio.create_task(_attempt(deadlines, clock, 1.0))
    await _tick_until(clock, [task], 0.5)
    assert task.result() == "done@1"
    await clock.advance_to(20.0)  # the timer fires at 5 s, finds nothing, and stays off
    assert len(deadlines) == 0
    assert deadlines._timer is None


async def test_a_cancel_from_elsewhere_is_a_cancel_not_a_timeout(clock: FakeClock) -> None:
    deadlines = Deadlines(5.0)
    task = asyncio.create_task(_attempt(deadlines, clock, 60.0))
    await clock.advance_to(2.0)
    task.cancel()
    await clock.settle()
    assert task.cancelled()
    assert len(deadlines) == 0


async def test_a_cancel_from_elsewhere_at_the_deadline_itself_stays_a_cancel(
    clock: FakeClock,
) -> None:
    # Both cancels land before the task runs again: the owner's wins, as with asyncio.timeout.
    deadlines = Deadlines(5.0)
    task = asyncio.create_task(_attempt(deadlines, clock, 60.0))
    await clock.settle()
    clock.now += 5.0
    await asyncio.sleep(0)  # the timer's callback runs in this turn: the task is cancelled
    task.cancel()
    await clock.settle()
    assert task.cancelled()


async def test_an_error_raised_inside_passes_through_untouched(clock: FakeClock) -> None:
    deadlines = Deadlines(5.0)
    with pytest.raises(ValueError, match="the provider's own"), deadlines.watch():
        raise ValueError("the provider's own")
    assert len(deadlines) == 0


async def test_no_seconds_means_no_deadline(clock: FakeClock) -> None:
    deadlines = Deadlines(None)
    task = asyncio.create_task(_attempt(deadlines, clock, 50.0))
    await _tick_until(clock, [task], 5.0)
    assert task.result() == "done@50"


async def test_outside_a_task_is_an_error() -> None:
    said: list[BaseException] = []

    def callback() -> None:  # a loop's callback runs in no task
        try:
            with Deadlines(1.0).watch():
                pass
        except RuntimeError as exc:
            said.append(exc)

    asyncio.get_running_loop().call_soon(callback)
    await asyncio.sleep(0)
    assert len(said) == 1
    assert "inside a task" in str(said[0])


def test_a_new_loop_takes_over_from_one_that_ended_with_attempts_under_way() -> None:
    deadlines = Deadlines(0.05)
    first = asyncio.new_event_loop()
    try:
        # An attempt left under way when its loop stops (its host never cancelled it).
        started = first.create_future()

        async def stuck() -> None:
            with deadlines.watch():
                started.set_result(None)
                await asyncio.Event().wait()

        task = first.create_task(stuck())
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # pending on purpose
        first.run_until_complete(started)
        assert len(deadlines) == 1
    finally:
        first.close()
    del task

    async def in_time() -> str:
        try:
            with deadlines.watch():
                await asyncio.sleep(10)
        except TimeoutError:
            return "timed out"
        return "not cut"

    assert asyncio.run(asyncio.wait_for(in_time(), 5)) == "timed out"
    assert len(deadlines) == 0


def test_two_loops_running_at_once_are_refused() -> None:
    deadlines = Deadlines(30.0)
    entered, release = threading.Event(), threading.Event()

    async def hold() -> None:
        with deadlines.watch():
            entered.set()
            await asyncio.to_thread(release.wait, 60)

    thread = threading.Thread(target=asyncio.run, args=(hold(),))
    thread.start()
    try:
        assert entered.wait(60)

        async def second() -> None:
            with deadlines.watch():
                pass

        with pytest.raises(RuntimeError, match="another event loop"):
            asyncio.run(second())
    finally:
        release.set()
        thread.join(60)


def test_a_loop_is_let_go_once_its_attempts_have_ended() -> None:
    # A host that runs a loop per job (asyncio.run in a worker) with one long-lived Sender must
    # not keep every loop alive through the Sender's timeout.
    deadlines = Deadlines(30.0)

    async def work() -> asyncio.AbstractEventLoop:
        for _ in range(3):
            with deadlines.watch():
                await asyncio.sleep(0)
        return asyncio.get_running_loop()

    with asyncio.Runner() as runner:
        loop = weakref.ref(runner.run(work()))
    gc.collect()
    assert loop() is None
    assert len(deadlines) == 0
