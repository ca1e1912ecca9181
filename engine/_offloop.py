"""Keeping the host's event loop free: blocking work in a thread, long loops in short turns.

The engine runs inside its host's loop, so every millisecond it holds the loop thread is a
millisecond of lag for every other coroutine of the host. Two tools keep that short:

- `in_thread(fn, ...)`: a blocking call (a file read whole, an fsync, a report written) runs in
  a worker thread while the loop goes on. Unlike `asyncio.to_thread`, a cancelled caller still
  waits for the call to return before the cancellation goes on, so what follows it (a file
  closed, a lock released) never overlaps it.
- `await pause()`: called inside a long loop on the loop thread (a round's send workers, the
  replay of a journal), it gives the loop a turn once the engine's code has held it for
  `TURN_S` since its last turn, and then every other `pause()` of the same loop iteration gives
  way too, so one iteration of the loop stays short however many tasks were ready in it.
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
    """When the loop last had a turn, and whether one is owed."""

    __slots__ = ("owed", "since")

    def __init__(self) -> None:
        self.since = time.perf_counter()
        self.owed = False

    def turned(self) -> None:
        self.owed = False
        self.since = time.perf_counter()


_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()


async def pause() -> None:
    """Gives the loop a turn if the engine's code has held it for TURN_S or more."""
    loop = asyncio.get_running_loop()
    turns = _TURNS.get(loop)
    if turns is None:
        turns = _TURNS[loop] = _Turns()
    while True:
        if not turns.owed:
            if time.perf_counter() - turns.since < TURN_S:
                return
            # Runs at the start of the loop's next iteration, before the tasks giving way now.
            turns.owed = True
            loop.call_soon(turns.turned)
        # Back from its turn, a task gives way again if another has used up the new one.
        await asyncio.sleep(0)
