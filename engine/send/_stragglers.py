"""Hedging the stragglers once the work has run out: a second copy of an attempt far slower than
the others, the first answer kept and the other copy cancelled.

A request that hangs holds its slot until the per-attempt timeout; in the middle of a run that
costs nothing (another request takes the rate unit), but at the end of a run or a round the run
waits for it: one hang in the last seconds added the whole 10 s timeout to a 60 s run, and the
slowest of the last hundred ordinary answers adds seconds more. So once the work has run out
(fewer requests are under way than the concurrency cap and none waits for a slot: the end of a
run or of a round), an attempt running longer than `factor` times the `quantile` (90th
percentile) of the latest successful attempts' latencies is due: the Sender sends the same call
again through the limiter (its own slot, rate unit and timeout) and keeps whichever answers
first, cancelling the other. The original is never cut: a request that is slow by nature loses
no time, and costs one more request at most. Only one answer of a request is ever kept, so none
is counted twice. With fewer than `min_samples` latencies known nothing is due.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

__all__ = ["Stragglers", "first_answer"]

T = TypeVar("T")


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _resolve_any(fut: asyncio.Future[None], _: object) -> None:
    _resolve(fut)


async def _run(
    first: Callable[[asyncio.Future[None]], Awaitable[T]], due: asyncio.Future[None]
) -> T:
    return await first(due)


class Stragglers:
    """Watches the attempts in flight; makes each straggler's `due` future done once `idle()`
    says the work ran out."""

    def __init__(
        self,
        idle: Callable[[], bool],
        *,
        quantile: float = 0.90,
        factor: float = 1.0,
        min_samples: int = 100,
        keep: int = 1000,
    ) -> None:
        self._idle = idle
        self.quantile = quantile
        self.factor = factor
        self.min_samples = min_samples
        self._latencies: collections.deque[float] = collections.deque(maxlen=keep)
        self._threshold: float | None = None
        self._fresh = 0  # latencies added since the threshold was computed
        # Running attempts that may be hedged: their `due` future, and when they started.
        self._running: dict[asyncio.Future[None], float] = {}
        self._timers: dict[asyncio.Future[None], asyncio.TimerHandle] = {}
        self.hedges = 0  # due futures made done: second copies on their way
        self.copies = 0  # second copies that got their slot and went out (the Sender counts)

    def threshold(self) -> float | None:
        """Seconds after which an attempt is a straggler; None while too few are known."""
        if len(self._latencies) < self.min_samples:
            return None
        if self._threshold is None or self._fresh >= 32:
            ordered = sorted(self._latencies)
            rank = min(len(ordered) - 1, math.ceil(self.quantile * len(ordered)) - 1)
            self._threshold = self.factor * ordered[rank]
            self._fresh = 0
        return self._threshold

    @contextlib.contextmanager
    def watch(self, due: asyncio.Future[None] | None) -> Iterator[None]:
        """Runs one attempt; `due` (if given) is made done when it becomes a straggler while the
        work has run out. A successful attempt's latency is learnt."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        if due is not None:
            self._running[due] = start
            self.idle()
        try:
            yield
        finally:
            if due is not None:
                self._running.pop(due, None)
                timer = self._timers.pop(due, None)
                if timer is not None:
                    timer.cancel()
        self._latencies.append(loop.time() - start)
        self._fresh += 1

    def idle(self) -> None:
        """Called when a request or a slot ends: if the work has run out, every running attempt
        is due once it is a straggler."""
        if not self._running or not self._idle():
            return
        after = self.threshold()
        if after is None:
            return
        loop = asyncio.get_running_loop()
        for due, start in self._running.items():
            if due not in self._timers and not due.done():
                self._timers[due] = loop.call_at(start + after, self._fire, due)

    def _fire(self, due: asyncio.Future[None]) -> None:
        self._timers.pop(due, None)
        # The work may have come back since the timer was set (a worker between two requests
        # looks like the end for one turn of the loop): then no copy; the next `idle()` that
        # finds the work really run out sets the timer again.
        if not due.done() and self._idle():
            self.hedges += 1
            _resolve(due)


async def first_answer(
    first: Callable[[asyncio.Future[None]], Awaitable[T]], again: Callable[[], Awaitable[T]]
) -> T:
    """`first(due)`'s answer; if `due` is done before it answers, the first answer of it and of
    `again()` (the other is cancelled). When every copy fails, the last failure is raised."""
    loop = asyncio.get_running_loop()
    due: asyncio.Future[None] = loop.create_future()
    copies: list[asyncio.Future[T]] = [loop.create_task(_run(first, due))]
    try:
        # The first of the attempt's end and its `due`, with one future and two callbacks:
        # every attempt passes here, and `asyncio.wait` costs twice as much.
        turn: asyncio.Future[None] = loop.create_future()
        wake = functools.partial(_resolve_any, turn)
        copies[0].add_done_callback(wake)
        due.add_done_callback(wake)
        await turn
        if not copies[0].done():
            copies.append(asyncio.ensure_future(again()))
        pending: set[asyncio.Future[T]] = set(copies)
        failure: BaseException | None = None
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for copy in done:
                failure = copy.exception()
                if failure is None:
                    return copy.result()
        assert failure is not None
        raise failure
    finally:
        # Each copy's end is collected, so no failure is left unretrieved.
        running = [copy for copy in copies if not copy.done()]
        for copy in copies:
            if copy.done() and not copy.cancelled():
                copy.exception()
            else:
                copy.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
