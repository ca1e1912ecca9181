"""Keeping the host's event loop free: blocking work in a thread, long loops in short turns.

The engine runs inside its host's loop, so every millisecond it holds the loop thread is a
millisecond of lag for every other coroutine of the host. Two tools keep that short:

- `in_thread(fn, ...)`: a blocking call (a file read whole, an fsync, a report written) runs in
  a worker thread while the loop goes on. Unlike `asyncio.to_thread`, a cancelled caller still
  waits for the call to return before the cancellation goes on, so what follows it (a file
  closed, a lock released) never overlaps it.
- `await pause()`: called inside a long loop on the loop thread (a round's send workers, the
  replay of a journal), it gives the loop a turn once the engine's code has held it for
  `TURN_S`: every task that calls it then waits at one gate while the loop runs everything
  else that is ready (its timers, and the tasks they wake), so however many of the engine's
  tasks were ready, the host's coroutines wait at most about TURN_S for the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["TURN_S", "in_thread", "pause"]

P = ParamSpec("P")
T = TypeVar("T")

# How long the engine's code may hold the loop thread between two turns of the loop.
TURN_S = 0.002


async def in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` in the loop's default executor, the loop free meanwhile; cancelled,
    it waits for `fn` to return, then raises CancelledError."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    future = loop.run_in_executor(None, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
        raise


class _Turns:
    """When the engine's code last began a turn on a loop, and the tasks waiting for the next."""

    __slots__ = ("again", "loop", "since", "waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.since = time.perf_counter()
        # Each waiting task has its own future (a cancelled waiter cancels only its own), done
        # with True for the first one through the gate. `again`: tasks back for a second wait,
        # let through before the newcomers.
        self.waiters: list[asyncio.Future[bool]] | None = None
        self.again: list[asyncio.Future[bool]] = []

    def wait(self, *, again: bool = False) -> asyncio.Future[bool]:
        """A future done once the gate opens. The gate is shut for two iterations of the loop:
        in the first, the loop's own callbacks run (a timer that fell due, data that arrived);
        in the second, the tasks they woke. An iteration is first come, first served, so the
        engine's tasks go on in a third."""
        fut = self.loop.create_future()
        if self.waiters is None:
            self.waiters = []
            self.loop.call_soon(self.loop.call_soon, self._open)
        (self.again if again else self.waiters).append(fut)
        return fut

    def _open(self) -> None:
        waiters = self.again + (self.waiters or [])
        self.again, self.waiters = [], None
        self.since = time.perf_counter()
        first = True
        for fut in waiters:
            if not fut.done():
                fut.set_result(first)
                first = False


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def pause() -> None:
    """Gives the loop a turn if the engine's code has held it for TURN_S or more (or a turn is
    being given already). Back through the gate, a task waits once more if the others have used
    up the new turn, ahead of the newcomers; the first task through always goes on, so the
    engine progresses however slow the machine (a loaded one, a profiler)."""
    loop = asyncio.get_running_loop()
    turns = _TURNS.get(loop)
    if turns is None:
        turns = _TURNS[loop] = _Turns(loop)
    if turns.waiters is None and time.perf_counter() - turns.since < TURN_S:
        return
    first = await turns.wait()
    while not first and time.perf_counter() - turns.since >= TURN_S:
        first = await turns.wait(again=True)
