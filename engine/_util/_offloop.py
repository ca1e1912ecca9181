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
  else that is ready (its timers, and the tasks they wake), and each turn lets through only as
  many waiting tasks as fit in about TURN_S, so however many of the engine's tasks were ready,
  the host's coroutines wait about TURN_S or two for the loop. `await pause(ahead=True)` is
  for the work that frees the others (a round's verdicts, which make room in the queue the
  send workers fill): it goes on while the current turn has time left, and waits at the head
  of the line, not behind every send worker.
"""

from __future__ import annotations

import asyncio
import collections
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
    """When the engine's code last began a turn on a loop, the tasks waiting for the next, and
    how many of them one turn lets through. It holds no reference to its loop (its methods run
    in it): a loop that ends is freed, and its entry in `_TURNS` with it."""

    __slots__ = ("share", "since", "waiters")

    def __init__(self) -> None:
        self.since = time.perf_counter()
        # Each waiting task has its own future: a cancelled waiter cancels only its own.
        self.waiters: collections.deque[asyncio.Future[None]] | None = None
        self.share = _FIRST_SHARE

    def wait(self, ahead: bool) -> asyncio.Future[None]:
        """A future done once this task's turn comes (first come, first served; `ahead`: before
        every task waiting already)."""
        fut = asyncio.get_running_loop().create_future()
        if self.waiters is None:
            self.waiters = collections.deque()
            self._shut()
        if ahead:
            self.waiters.appendleft(fut)
        else:
            self.waiters.append(fut)
        return fut

    def _shut(self) -> None:
        """Shuts the gate for two iterations of the loop: in the first, the loop's own callbacks
        run (a timer that fell due, data that arrived); in the second, the tasks they woke. An
        iteration is first come, first served, so the engine's tasks go on in a third."""
        loop = asyncio.get_running_loop()  # called in the loop, by a task or by `_open`
        loop.call_soon(loop.call_soon, self._open)

    def _open(self) -> None:
        now = time.perf_counter()
        # The share the last turn let through, fitted to the time the turn took: each turn
        # wakes a bounded number of tasks (never all of them: 256 send workers woken at once
        # held the loop for tens of milliseconds), and every task waits once, not again.
        took = now - self.since
        if took > 2 * TURN_S:
            self.share = max(1, self.share // 2)
        elif took < TURN_S:
            self.share = min(_MAX_SHARE, self.share * 2)
        self.since = now
        waiters = self.waiters
        woken = 0
        while waiters and woken < self.share:
            fut = waiters.popleft()
            if not fut.done():  # a cancelled waiter takes no one's place
                fut.set_result(None)
                woken += 1
        if waiters:
            self._shut()  # the rest after the loop's next turn
        else:
            self.waiters = None


# How many waiting tasks a turn lets through at first, and at most.
_FIRST_SHARE, _MAX_SHARE = 16, 4096

_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = weakref.WeakKeyDictionary()
# The loop that paused last, and its turns: a weak dictionary's lookup makes a weak reference
# each time, and `pause` runs several times per request.
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Turns] | None = None


def _turns(loop: asyncio.AbstractEventLoop) -> _Turns:
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    turns = _TURNS.get(loop)
    if turns is None:
        turns = _TURNS[loop] = _Turns()
    _last = (weakref.ref(loop), turns)
    return turns


async def pause(*, ahead: bool = False) -> None:
    """Gives the loop a turn if the engine's code has held it for TURN_S or more (or a turn is
    being given already): the task waits for its place, once. Each turn lets through at least
    one task, so the engine progresses however slow the machine (a loaded one, a profiler).

    `ahead`: for work the other tasks wait on (a round's verdicts). It goes on while the turn
    has time left, even with tasks waiting for the next, and once the turn is spent it waits
    before them: the next turn lets it through first."""
    turns = _turns(asyncio.get_running_loop())
    if (ahead or turns.waiters is None) and time.perf_counter() - turns.since < TURN_S:
        return
    await turns.wait(ahead)
