"""The engine's one bounded worker pool: `workers` tasks under an `asyncio.TaskGroup` that share
one source of work, so no task exists for work that cannot start yet.

The source is pulled lazily, one item per free worker: a generator of jobs is advanced only as
fast as workers take them, and memory stays flat however long it is. An async source is a
`Closable` queue of batches: each worker takes what has landed meanwhile (up to a batch) in one
go, because handing work across a process boundary costs more than the work itself.
"""

from __future__ import annotations

import asyncio
import collections
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

    A deque and the waiters' futures, not an `asyncio.Queue`: at full speed every sample of a
    round is put here, mostly into a full queue, and the queue's own bookkeeping (its task
    count, its `join` event, a wake-up per item taken) was a few percent of a request's CPU.
    """

    def __init__(self, maxsize: int, batch: int) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._maxsize = max(1, maxsize)
        self._batch = max(1, batch)
        self._closed = False
        self._putters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._readers: collections.deque[asyncio.Future[None]] = collections.deque()

    async def put(self, x: T) -> None:
        """Adds one item, waiting for room."""
        if self._closed:
            raise RuntimeError("put on closed Batches")
        items = self._items
        while len(items) >= self._maxsize:
            await _wait(self._putters)
        items.append(x)
        _wake(self._readers, 1)

    def offer(self, x: T) -> bool:
        """Adds one item if there is room (then True), at once: a producer awaits `put` only
        when this finds the queue full (a coroutine less for each item otherwise)."""
        if self._closed:
            raise RuntimeError("put on closed Batches")
        if len(self._items) >= self._maxsize:
            return False
        self._items.append(x)
        _wake(self._readers, 1)
        return True

    async def close(self) -> None:
        """No more items: readers finish what is queued, then stop."""
        self._closed = True
        _wake(self._readers, len(self._readers))

    def __aiter__(self) -> AsyncIterator[list[T]]:
        return self

    async def __anext__(self) -> list[T]:
        items = self._items
        while not items:
            if self._closed:
                raise StopAsyncIteration
            await _wait(self._readers)
        take = min(self._batch, len(items))
        group = [items.popleft() for _ in range(take)]
        _wake(self._putters, take)
        if items:  # more than a batch: the next reader need not wait for another put
            _wake(self._readers, 1)
        return group


async def _wait(waiters: collections.deque[asyncio.Future[None]]) -> None:
    """Waits in line to be woken (the caller then looks again); a waiter cancelled after it
    was woken passes its wake-up on, so that no item or room is left with no one told of it."""
    fut = asyncio.get_running_loop().create_future()
    waiters.append(fut)
    try:
        await fut
    except asyncio.CancelledError:
        if fut.done() and not fut.cancelled():
            _wake(waiters, 1)
        elif fut in waiters:
            waiters.remove(fut)
        raise


def _wake(waiters: collections.deque[asyncio.Future[None]], n: int) -> None:
    """Wakes the first `n` waiters still waiting."""
    while n > 0 and waiters:
        fut = waiters.popleft()
        if not fut.done():
            fut.set_result(None)
            n -= 1
