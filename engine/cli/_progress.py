"""Progress of a run: a live status line on a terminal, plain log lines elsewhere (CI, nohup).

A `RunObserver` of the engine: a ticker task renders every `every_s` seconds from the run's own
totals, so a run that waits on slow requests still shows that it is alive. Nothing here changes
what the run does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from ttc.engine import (
    Event,
    RoundStats,
    RunObserver,
    RunState,
    SampleFailed,
    SampleLanded,
    StopReason,
    Usage,
)
from ttc.engine.journal._batch_events import BatchUpdated

log = logging.getLogger("ttc")


class Progress(RunObserver):
    """Renders one run's progress; `live` redraws a line on `stream`, else logs every `every_s`."""

    def __init__(
        self,
        live: bool = False,
        every_s: float | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.live = live
        self.every_s = every_s if every_s is not None else (0.5 if live else 10.0)
        self.stream = stream or sys.stderr
        self._state: RunState | None = None
        self._rounds = 0
        self._cost: Callable[[Usage], float | None] = lambda usage: None
        # Requests finished per second over the last minute, for the achieved rate.
        self._done_at: deque[tuple[int, int]] = deque()
        self._ticker: asyncio.Task[None] | None = None
        self._round_started = time.monotonic()
        self._width = 0
        # What the run waits for besides requests (the embedder), and since when.
        self._waiting: tuple[str, float] | None = None

    def start(self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]) -> None:
        """Begin rendering `state` (call inside the running loop)."""
        self._state, self._rounds, self._cost = state, rounds, cost
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def run_started(
        self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]
    ) -> None:
        """The engine's hook: the run is set up."""
        self.start(state, rounds, cost)

    def round_started(self, stats: RoundStats | None = None) -> None:
        """The engine's hook: a round begins."""
        self._round_started = time.monotonic()

    def waiting(self, what: str | None) -> None:
        """The engine's hook: the run waits for `what` (None: no more); the line says so."""
        self._waiting = None if what is None else (what, time.monotonic())

    def event(self, event: Event) -> None:
        """The engine's hook: a sample that landed or failed is a finished request."""
        if isinstance(event, SampleLanded | SampleFailed):
            self.request_done()
        elif isinstance(event, BatchUpdated):  # batch mode: the line shows the batch waited for
            final = event.status in ("completed", "failed", "expired", "cancelled")
            what = f"batch {event.batch_id}: {event.status.replace('_', ' ')}, " + (
                f"{event.completed}/{event.total} done, {event.failed} failed"
            )
            self._waiting = None if final else (what, time.monotonic() - event.waited_s)

    async def run_ended(self, stopped: StopReason | None) -> None:
        """The engine's hook: no more requests; the ticker stops."""
        await self.stop()

    def request_done(self) -> None:
        """Count one finished request (not a replay) for the achieved requests per minute."""
        second = int(time.monotonic())
        if self._done_at and self._done_at[-1][0] == second:
            self._done_at[-1] = (second, self._done_at[-1][1] + 1)
        else:
            self._done_at.append((second, 1))

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            self.render()

    def per_minute(self) -> float:
        now = int(time.monotonic())
        while self._done_at and self._done_at[0][0] < now - 60:
            self._done_at.popleft()
        if not self._done_at:
            return 0.0
        span = max(1, min(60, now - self._done_at[0][0] + 1))
        return sum(count for _, count in self._done_at) * 60.0 / span

    def line(self) -> str:
        """The status line: round, done/planned, solved and coverage, tokens, cost, rate, errors,
        ETA."""
        state = self._state
        if state is None or not state.rounds:
            return "starting"
        stats: RoundStats = state.rounds[-1]
        usage = Usage()
        for s in state.rounds:
            usage = usage + s.usage
        retries = sum(s.retries for s in state.rounds)
        limited = sum(s.rate_limited for s in state.rounds)
        solved = state.solved_count()
        covered = state.covered_count()
        planned = stats.planned
        rate = self.per_minute()
        cost = self._cost(usage)
        cost_text = f"${cost:.4f}" if cost is not None else "price unknown"
        # Before its samples are planned, a round is choosing demonstrations.
        done = f"{stats.samples}/{planned}" if planned else "planning"
        if self._waiting is not None:
            what, since = self._waiting
            done = f"waiting for {what}, {time.monotonic() - since:.0f} s"
        return (
            f"round {stats.round}/{self._rounds} {done} | solved {solved}/{state.n}, coverage "
            f"{100 * covered / state.n:.1f}% | tokens in {usage.input_tokens:,} out "
            f"{usage.output_tokens:,} think {usage.thinking_tokens:,} | {cost_text} | "
            f"{rate:.0f} req/min | 429s {limited} retries {retries} | "
            + _eta(planned - stats.samples, rate)
        )

    def render(self) -> None:
        text = self.line()
        if self.live:
            self._width = max(self._width, len(text))
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
        else:
            log.info("%s", text)


def _eta(remaining: int, per_minute: float) -> str:
    """The round's time to go at the achieved rate; under a second to go, it waits on its last
    samples (slow requests, the verifiers), which no rate predicts."""
    if remaining <= 0 or per_minute <= 0:
        return "ETA -"
    seconds = remaining / (per_minute / 60)
    if seconds < 1:
        return f"waiting on the last {remaining}"
    return f"ETA {seconds:.0f}s"
