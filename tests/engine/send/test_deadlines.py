"""The per-attempt timeout on one timer (`Deadlines`): each attempt times out at its own deadline,
as under `asyncio.timeout`, on a fake clock; a cancel from elsewhere stays a cancel; nothing is
left watched once the attempts end; and a new loop takes over from one that has ended."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import weakref
from collections.abc import Sequence
from typing import Any

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


async def _tick_until(clock: FakeClock, tasks: Sequence[asyncio.Task[Any]], step: float) -> None:
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
    await clock.advance_to(20.0)  # the timer was cancelled when the attempt ended
    assert len(deadlines) == 0
    assert deadlines._by_loop == {}  # nothing of the loop kept: no timer, no entry


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


def test_two_loops_running_at_once_each_keep_their_deadlines() -> None:
    deadlines = Deadlines(0.2)
    entered = threading.Event()
    said: list[str] = []

    async def cut(who: str) -> None:
        try:
            with deadlines.watch():
                entered.set()
                await asyncio.sleep(30)
        except TimeoutError:
            said.append(who)

    thread = threading.Thread(target=asyncio.run, args=(cut("thread"),))
    thread.start()
    try:
        assert entered.wait(60)
        asyncio.run(asyncio.wait_for(cut("main"), 60))
    finally:
        thread.join(60)
    assert sorted(said) == ["main", "thread"]
    assert len(deadlines) == 0


def test_a_loop_stopped_for_a_while_finds_its_attempts_as_it_left_them() -> None:
    # A host that runs two loops in turn (run_until_complete on each): an attempt under way on
    # the first still times out once that loop runs again, whatever ran on the second meanwhile.
    deadlines = Deadlines(0.2)
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        started = first.create_future()

        async def long_one() -> str:
            try:
                with deadlines.watch():
                    started.set_result(None)
                    await asyncio.sleep(30)
            except TimeoutError:
                return "timed out"
            return "not cut"

        async def short_one() -> None:
            with deadlines.watch():
                await asyncio.sleep(0)

        task = first.create_task(long_one())
        first.run_until_complete(started)  # the first loop stops with its attempt under way
        second.run_until_complete(short_one())
        assert first.run_until_complete(asyncio.wait_for(task, 60)) == "timed out"
    finally:
        first.close()
        second.close()


async def test_a_task_cancelled_before_and_carrying_on_still_times_out(clock: FakeClock) -> None:
    # asyncio.timeout compares the cancels at the deadline with those the task had on entry.
    deadlines = Deadlines(5.0)

    async def attempt() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # carried on without uncancel():
            await asyncio.sleep(0)  # cancelling() stays 1
        try:
            with deadlines.watch():
                await asyncio.sleep(60)
        except TimeoutError:
            return f"timeout@{clock.elapsed:g}"
        return "not cut"

    task = asyncio.create_task(attempt())
    await _tick_until(clock, [task], 0.5)
    assert task.result() == "timeout@5"


async def test_deadlines_nested_each_cut_at_their_own(clock: FakeClock) -> None:
    outer, inner = Deadlines(8.0), Deadlines(3.0)
    ended: list[str] = []

    async def attempt(length: float) -> None:
        try:
            with outer.watch():
                try:
                    with inner.watch():
                        await asyncio.sleep(length)
                except TimeoutError:
                    ended.append(f"inner@{clock.elapsed:g}")
                    await asyncio.sleep(60)  # then waits on, under the outer deadline alone
        except TimeoutError:
            ended.append(f"outer@{clock.elapsed:g}")

    task = asyncio.create_task(attempt(60))
    await _tick_until(clock, [task], 0.5)
    assert ended == ["inner@3", "outer@8"]
    assert len(outer) == len(inner) == 0


def test_a_loop_is_let_go_once_its_attempts_have_ended() -> None:
    # A host that runs a loop per job (asyncio.run in a worker) with one long-lived Sender must
    # not keep every loop alive through the Sender's timeout.
    deadlines = Deadlines(30.0)

    async def work() -> asyncio.AbstractEventLoop:
        for _ in range(3):
            with deadlines.watch():
                await asyncio.sleep(0)
        return asyncio.get_running_loop()

    async def cut() -> asyncio.AbstractEventLoop:
        with contextlib.suppress(TimeoutError), short.watch():
            await asyncio.sleep(30)
        return asyncio.get_running_loop()

    short = Deadlines(0.05)
    for job, used in ((work, deadlines), (cut, short)):  # ended in time, and timed out
        with asyncio.Runner() as runner:
            loop = weakref.ref(runner.run(job()))
        gc.collect()
        assert loop() is None
        assert len(used) == 0
