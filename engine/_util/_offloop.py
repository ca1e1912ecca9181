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
    """When the engine's code last began a turn on a loop, and the gate it waits at when it has
    had its turn."""

    __slots__ = ("gate", "loop", "since")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.since = time.perf_counter()
        self.gate: asyncio.Future[None] | None = None

    def close(self) -> asyncio.Future[None]:
        """Shuts the gate for two iterations of the loop: in the first, the loop's own callbacks
        run (a timer that fell due, data that arrived); in the second, the tasks they woke. An
        iteration is first come, first served, so the engine's tasks wait for a third."""
        if self.gate is None:
            self.gate = self.loop.create_future()
            self.loop.call_soon(self.loop.call_soon, self._open)
        return self.gate

    def _open(self) -> None:
        gate, self.gate = self.gate, None
        self.since = time.perf_counter()
        if gate is not None and not gate.done():
            gate.set_result(None)


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def pause() -> None:
    """Gives the loop a turn if the engine's code has held it for TURN_S or more."""
    loop = asyncio.get_running_loop()
    turns = _TURNS.get(loop)
    if turns is None:
        turns = _TURNS[loop] = _Turns(loop)
    while turns.gate is not None or time.perf_counter() - turns.since >= TURN_S:
        # Shielded: a task cancelled at the gate leaves it shut for the others. Back through
        # it, a task waits again if another has used up the new turn already.
        await asyncio.shield(turns.close())
