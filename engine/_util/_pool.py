"""The engine's one bounded worker pool: `workers` tasks under an `asyncio.TaskGroup` that share
one source of work, so no task exists for work that cannot start yet.

The source is pulled lazily, one item per free worker: a generator of jobs is advanced only as
fast as workers take them, and memory stays flat however long it is. An async source is a
`Closable` queue of batches: each worker takes what has landed meanwhile (up to a batch) in one
go, because handing work across a process boundary costs more than the work itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any, Generic, TypeVar

from ttc.engine._util._offloop import pause

T = TypeVar("T")

__all__ = ["Batches", "bounded"]


async def bounded(
    things: Iterable[T] | AsyncIterator[T], fn: Callable[[T], Awaitable[Any]], workers: int
) -> None:
    """Runs `await fn(x)` for every x, at most `workers` at once, with no task per x.

    Each x goes to exactly one worker (the workers share one iterator). The first error cancels
    the others and propagates as itself (a group only when several workers failed at once), so
    that `except ValueError` around a pool catches what `fn` raised.
    """

    worker = _worker(things, fn)
    try:
        async with asyncio.TaskGroup() as tg:
            for _ in range(max(1, workers)):
                tg.create_task(worker())
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def _worker(
    things: Iterable[T] | AsyncIterator[T], fn: Callable[[T], Awaitable[Any]]
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A worker of the pool: takes the next x from the shared source and awaits `fn(x)` itself,
    with no coroutine around it (every request of a round passes here)."""
    if isinstance(things, AsyncIterator):
        source = things

        async def take_async() -> None:
            async for x in source:  # a shared iterator: each x goes to one worker
                try:
                    await fn(x)
                except asyncio.CancelledError as exc:
                    _loud(fn, exc)
                await pause()  # work that never waits must not hold the host's loop

        return take_async
    it = iter(things)

    async def take() -> None:
        for x in it:
            try:
                await fn(x)
            except asyncio.CancelledError as exc:
                _loud(fn, exc)
            await pause()

    return take


def _loud(fn: Callable[..., Awaitable[Any]], exc: asyncio.CancelledError) -> None:
    """A CancelledError out of `fn`: raised again if the pool is being cancelled, else (a stray
    one from code `fn` awaited) made a loud error: a task group ignores a cancelled child, so the
    worker and its work would end in silence."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise exc  # the pool is being cancelled
    name = getattr(fn, "__qualname__", repr(fn))
    raise RuntimeError(f"{name} raised a CancelledError no one asked for") from exc


class Batches(Generic[T]):
    """A bounded queue read as an async iterator of batches, by several workers at once.

    `put` waits while the queue is full (back-pressure on the producers); `close` ends the
    iteration for every reader once what was put before it has been read.
    """

    def __init__(self, maxsize: int, batch: int) -> None:
        self._queue: asyncio.Queue[T | None] = asyncio.Queue(maxsize=maxsize)
        self._batch = max(1, batch)

    async def put(self, x: T) -> None:
        """Adds one item, waiting for room."""
        queue = self._queue
        if queue.full():
            await queue.put(x)
        else:  # no wait: no coroutine of the queue's own (once per sample of a round)
            queue.put_nowait(x)

    async def close(self) -> None:
        """No more items: readers finish what is queued, then stop."""
        await self._queue.put(None)

    def __aiter__(self) -> AsyncIterator[list[T]]:
        return self

    async def __anext__(self) -> list[T]:
        first = await self._queue.get()
        if first is None:
            self._reclose()
            raise StopAsyncIteration
        group = [first]
        while len(group) < self._batch and not self._queue.empty():
            more = self._queue.get_nowait()
            if more is None:
                self._reclose()
                break
            group.append(more)
        return group

    def _reclose(self) -> None:
        # The end mark goes back for the next reader. Nothing is put after it, and it was just
        # taken out, so there is room.
        self._queue.put_nowait(None)
