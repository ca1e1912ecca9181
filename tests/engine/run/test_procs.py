"""Worker processes over pipes the event loop reads: what the verifier pool relies on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ttc.engine.run._procs import Workers, WorkersBroken


def _nothing() -> None:
    """The workers' set-up (module level: a spawned worker imports it)."""


def _slowly_but_the_first(marker: str) -> None:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))  # the first worker here: at once
    except FileExistsError:
        time.sleep(1.0)


def _slowly() -> None:
    time.sleep(0.5)  # the parent closes the pipes before this set-up is done


def _work(request: tuple[str, object]) -> object:
    what, value = request
    if what == "echo":
        return value
    if what == "upper":
        assert isinstance(value, str)
        return value.upper()
    if what == "raise":
        raise ValueError(value)
    if what == "pid":
        return os.getpid()
    if what == "die":
        os._exit(3)
    if what == "unreadable":
        raise _Unreadable("a", "b")
    if what == "sleep":
        assert isinstance(value, float)
        time.sleep(value)
        return value
    raise AssertionError(what)


class _Unreadable(Exception):
    """An error pickle cannot rebuild: its __init__ takes two arguments, its args hold one."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"{first}{second}")


@contextlib.contextmanager
def _running(
    n: int, setup: Callable[..., None] = _nothing, args: tuple[object, ...] = ()
) -> Iterator[Workers]:
    """`n` workers answering `_work`, closed and reaped (killed if they linger) at the end."""
    workers = Workers(n, setup, args, _work)
    try:
        yield workers
    finally:
        workers.close()
        workers.join()


async def test_large_requests_and_replies_cross_whole_and_in_order() -> None:
    with _running(2) as workers:
        await workers.ready()
        # Far more than a pipe holds (64 KB): written and read in pieces by the loop.
        texts = [f"{i}:" + "x" * (3_000_000 + i) for i in range(4)]
        threads = threading.active_count()
        replies = await asyncio.gather(*(workers.call(("upper", t)) for t in texts))
        assert replies == [t.upper() for t in texts]
        assert threading.active_count() == threads  # no thread of the parent's in between


async def test_an_error_comes_back_as_itself_and_the_worker_goes_on() -> None:
    with _running(1) as workers:
        with pytest.raises(ValueError, match="bad input"):
            await workers.call(("raise", "bad input"))
        assert await workers.call(("echo", 7)) == 7


async def test_a_cancelled_callers_reply_is_dropped_and_the_worker_serves_the_next() -> None:
    with _running(1) as workers:
        await workers.ready()
        first = asyncio.create_task(workers.call(("echo", "first")))
        await asyncio.sleep(0)
        first.cancel()
        assert await workers.call(("echo", "second")) == "second"
        assert first.cancelled()


async def test_a_worker_that_exits_breaks_the_set_for_every_call() -> None:
    with _running(2) as workers:
        await workers.ready()
        assert workers.started
        with pytest.raises(WorkersBroken, match=r"exited"):
            await workers.call(("die", None))
        with pytest.raises(WorkersBroken):
            await workers.call(("echo", 1))
    assert all(not w.process.is_alive() for w in workers._workers)


def test_a_set_started_outside_a_loop_serves_one_loop_after_another() -> None:
    with _running(1) as workers:
        first = asyncio.run(workers.call(("pid", None)))
        second = asyncio.run(workers.call(("pid", None)))
        assert first == second  # the same worker, watched from the second loop


_CLOSED_EARLY = """
import sys
from test_procs import Workers, _slowly, _work

if __name__ == "__main__":
    workers = Workers(2, _slowly, (), _work)
    workers.close()
    workers.join()
    print("exit codes", *(w.process.exitcode for w in workers._workers))
"""


def test_workers_closed_before_their_set_up_is_done_exit_quietly(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(_CLOSED_EARLY)
    here = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path])}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["exit", "codes", "0", "0"]
    assert done.stderr == ""  # no "Process SpawnProcess-1: Traceback ... BrokenPipeError"


async def test_a_reply_the_parent_cannot_read_fails_its_call_not_the_loop() -> None:
    with _running(1) as workers:
        with pytest.raises(RuntimeError, match="cannot be read"):
            await asyncio.wait_for(workers.call(("unreadable", None)), 60)
        assert await workers.call(("echo", 2)) == 2  # the worker goes on


async def test_a_cancelled_wait_for_the_set_up_leaves_the_set_whole() -> None:
    with _running(2, _slowly) as workers:
        waiting = asyncio.create_task(workers.ready())
        await asyncio.sleep(0.05)
        waiting.cancel()  # a run cancelled while its workers still import
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.wait_for(workers.ready(), 60)
        assert workers.started
        assert await asyncio.wait_for(workers.call(("echo", 3)), 60) == 3


def test_a_loop_that_gave_up_on_a_call_leaves_the_set_to_the_next_loop() -> None:
    async def gives_up(workers: Workers) -> None:
        await workers.ready()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(workers.call(("sleep", 0.5)), 0.05)

    with _running(1) as workers:
        asyncio.run(gives_up(workers))
        assert asyncio.run(workers.call(("echo", 4))) == 4


async def test_a_dead_workers_descriptor_is_never_unwatched_again() -> None:
    loop = asyncio.get_running_loop()
    with _running(2) as workers:
        await workers.ready()
        with pytest.raises(WorkersBroken):
            await workers.call(("die", None))
        # A new socket may take the dead worker's descriptor number; closing the set must not
        # unregister what is watched under it now.
        mine, theirs = socket.socketpair()
        try:
            heard: asyncio.Future[bool] = loop.create_future()

            def readable() -> None:
                if not heard.done():
                    heard.set_result(True)

            loop.add_reader(mine.fileno(), readable)
            workers.close()
            theirs.send(b"x")
            assert await asyncio.wait_for(heard, 60)
            loop.remove_reader(mine.fileno())
        finally:
            mine.close()
            theirs.close()


def test_a_set_half_up_when_its_loop_ended_is_waited_for_in_the_next(tmp_path: Path) -> None:
    async def first_up(workers: Workers) -> None:
        await workers.call(("echo", 0))  # the quick worker is up; the other still sets up

    with _running(2, _slowly_but_the_first, (str(tmp_path / "first"),)) as workers:
        asyncio.run(first_up(workers))
        asyncio.run(workers.ready())
        assert workers.started
