"""The host's loop is never made to wait: a run on a slow disk, a resume whose journal is slow to
read, a long stretch of the engine's own work, a blocking call cancelled half way."""

from __future__ import annotations

import asyncio
import gc
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSuite, ScriptedProvider, items

from ttc.engine import Engine, RunConfig, RunStarted, SampleLanded, Usage
from ttc.engine._util import _offloop
from ttc.engine._util._offloop import in_thread, pause
from ttc.engine._util._pool import Batches
from ttc.engine.journal import completed_samples
from ttc.engine.journal._journal import Journal, Replays
from ttc.engine.run import _runinfo


async def longest_wait(work: Awaitable[Any]) -> tuple[float, int]:
    """Runs `work` beside a host coroutine that wakes every millisecond: the longest the host
    waited for the loop, and how often it woke."""
    gaps: list[float] = []
    done = False

    async def host() -> None:
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            gaps.append(time.perf_counter() - before)

    beside = asyncio.create_task(host())
    await asyncio.sleep(0.01)  # the host is waiting on the loop before the work begins
    try:
        await work
    finally:
        done = True
        await beside
    return max(gaps), len(gaps)


async def run(out: Path, *, resume: bool = False) -> None:
    config = RunConfig(method="elim", rounds=2, verifier_workers=0)
    suite = FakeSuite(pool=items(6))
    provider = ScriptedProvider({"q0": ["right:q0"], "q1": ["wrong", "right:q1"]})
    async with Engine(provider, suite, config, out_dir=out, resume=resume) as engine:
        await engine.run()


def slowed(fn: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return fn(*args, **kwargs)

    return slow


async def test_a_run_on_a_slow_disk_never_makes_the_loop_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every write and every fsync takes 300 ms: the journal's lines, its syncs at the round
    # barriers, config.json, results.jsonl and summary.json.
    monkeypatch.setattr(os, "write", slowed(os.write, 0.3))
    monkeypatch.setattr(os, "fsync", slowed(os.fsync, 0.3))
    waited, woke = await longest_wait(run(tmp_path / "run"))
    monkeypatch.undo()
    assert waited < 0.25, f"the loop waited {waited:.3f} s for the disk"
    assert woke > 50
    assert (tmp_path / "run" / "summary.json").exists()


async def test_a_resume_reads_its_journal_without_making_the_loop_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await run(tmp_path / "run")
    # The journal read back (and config.json written) as if from a slow disk.
    monkeypatch.setattr(_runinfo, "prepare_rundir", slowed(_runinfo.prepare_rundir, 0.3))
    waited, _ = await longest_wait(run(tmp_path / "run", resume=True))
    assert waited < 0.25, f"the loop waited {waited:.3f} s for the journal"


async def test_pause_gives_the_host_turns_while_the_engine_works() -> None:
    async def engine_task() -> None:
        for _ in range(40):
            end = time.perf_counter() + 0.001
            while time.perf_counter() < end:  # 1 ms of work that never waits
                pass
            await pause()

    async def engine() -> None:
        await asyncio.gather(*(engine_task() for _ in range(8)))  # 320 ms of work

    # Without pause() the host would wake once or twice in the 320 ms; with it, between the
    # engine's turns. No bound on the longest wait: a loaded machine deschedules the process.
    _, woke = await longest_wait(engine())
    assert woke > 20


async def test_in_thread_when_cancelled_waits_for_the_call_to_return() -> None:
    said: list[str] = []

    def slow() -> None:
        time.sleep(0.2)
        said.append("returned")

    task = asyncio.create_task(in_thread(slow))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancellation came through only once the call had returned: what follows it (a
    # journal closed, a lock released) never overlaps it.
    assert said == ["returned"]


def test_a_resumed_journal_is_kept_as_lines_the_collector_never_walks(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(RunStarted(resumed=False, t=1.0))
        for i in range(200):
            journal.append(SampleLanded(1, f"q{i}", 0, f"text {i}", Usage(1, 2, 0)))
    replays = Replays.read(path)
    gc.collect()
    assert not any(gc.is_tracked(lines) for lines in replays._lines.values())
    assert dict(replays) == completed_samples(path)
    landed = replays.pop((1, "q7", 0))
    assert landed.sample.text == "text 7"
    assert (1, "q7", 0) not in replays
    assert len(replays) == 199


async def test_pause_lets_every_task_through_on_a_machine_too_slow_for_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock on which every reading is a turn later than the last: the machine (a loaded one,
    # a profiler) is so slow that waking the tasks at the gate uses up each new turn. Every
    # task must still get through: the first one through the gate always goes on.
    now = [0.0]

    def slow_clock() -> float:
        now[0] += 2 * _offloop.TURN_S
        return now[0]

    monkeypatch.setattr(time, "perf_counter", slow_clock)  # the module _offloop reads it from
    passed = 0

    async def task() -> None:
        nonlocal passed
        for _ in range(5):
            await pause()
            passed += 1

    await asyncio.wait_for(asyncio.gather(*(task() for _ in range(50))), timeout=60)
    assert passed == 250


def test_a_loop_that_paused_is_freed_once_its_host_is_done_with_it() -> None:
    # Hosts that make a loop per job (asyncio.run in a worker) must not keep each one alive.
    async def work() -> asyncio.AbstractEventLoop:
        for _ in range(3):
            await pause()
        return asyncio.get_running_loop()

    loops = []
    for _ in range(2):
        with asyncio.Runner() as runner:
            loops.append(weakref.ref(runner.run(work())))
    gc.collect()
    assert loops[0]() is None  # the one before the last is gone (the last may stay cached)
    assert len(_offloop._TURNS) <= 1


async def test_work_that_goes_ahead_passes_the_gate_before_the_tasks_waiting_at_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A round's verdicts make room for its send workers: behind them at the gate, a verdict
    # waited for hundreds of sends. On a clock the test moves, 20 tasks wait for the next turn.
    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    _offloop._TURNS.clear()
    monkeypatch.setattr(_offloop, "_last", None)
    await pause()  # the loop's turns begin now
    now[0] += 2 * _offloop.TURN_S  # and this one is spent
    passed: list[str] = []
    opened = asyncio.Event()

    async def task(name: str, ahead: bool) -> None:
        await pause(ahead=ahead)
        passed.append(name)
        opened.set()

    waiting = [asyncio.create_task(task(f"t{i}", False)) for i in range(20)]
    await asyncio.sleep(0)
    ahead = asyncio.create_task(task("ahead", True))
    await asyncio.gather(*waiting, ahead)
    assert passed[0] == "ahead"
    assert sorted(passed[1:]) == sorted(f"t{i}" for i in range(20))

    # A turn with time left: the tasks at the gate wait for the next one, work that goes ahead
    # goes on at once; once the turn is spent, it waits too.
    now[0] += 2 * _offloop.TURN_S
    opened.clear()
    waiting = [asyncio.create_task(task(f"u{i}", False)) for i in range(200)]
    await opened.wait()  # the gate opened: some went through, the others wait
    turns = _offloop._turns(asyncio.get_running_loop())
    assert turns.waiters
    paused = pause(ahead=True)
    with pytest.raises(StopIteration):  # it returns without waiting for anything
        paused.send(None)
    plain = asyncio.create_task(pause())
    await asyncio.sleep(0)
    assert not plain.done()  # the same pause, not ahead, waits for the next turn
    now[0] += 2 * _offloop.TURN_S
    ahead = asyncio.create_task(task("ahead again", True))
    await asyncio.sleep(0)
    assert not ahead.done()
    await asyncio.gather(*waiting, ahead, plain)
    assert passed.index("ahead again") < passed.index("u199")


async def test_verdicts_keep_up_with_send_workers_at_full_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answers that land at once, 256 send workers, and the verdicts accounted in this process:
    # the judges must keep up, or the queue of answers to judge fills and every send worker
    # waits for room in it (a suspension per request, for nothing): as when a verdict paused
    # behind the send workers at the loop's gate.
    waited = [0, 0]
    offer = Batches.offer

    def counted(self: Batches[Any], x: Any) -> bool:  # each answer offered; False: it waits
        waited[0] += 1
        room = offer(self, x)
        waited[1] += not room
        return room

    monkeypatch.setattr(Batches, "offer", counted)
    n = 2000
    config = RunConfig(method="unif", rounds=1, concurrency=256, verifier_workers=0)
    provider = ScriptedProvider({f"q{i}": [f"right:q{i}"] for i in range(n)})
    async with Engine(provider, FakeSuite(pool=items(n)), config, out_dir=tmp_path) as engine:
        result = await engine.run()
    assert result.coverage == 1.0
    assert waited[0] == n
    # Before, 1,172-1,232 of them; now none, and under 200 with the process descheduled for
    # 10 ms at one clock reading in twenty: a loaded machine has room below the bound.
    assert waited[1] < n / 4, f"{waited[1]} of {n} answers waited for room to be judged"
