"""Progress of a run: a live status line on a terminal, plain log lines elsewhere (CI, nohup).

A `RunObserver` of the engine: a ticker task renders every `every_s` seconds from the run's own
totals, so a run that waits on slow requests still shows that it is alive. Nothing here changes
what the run does. The live line always fits the terminal's width, on one line (a line longer
than the terminal wraps, and `\r` then redraws only its last part, so a narrow terminal got a
new line every tick): the full line when it fits, else a compact one, else its first fields,
cut with `…`; it is redrawn in place and the rest of the terminal's line erased.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

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
        columns: Callable[[], int] | None = None,
    ) -> None:
        self.live = live
        # The terminal's width, read at every redraw (a terminal may be resized).
        self.columns = columns or self._terminal_columns
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
            self.stream.write("\r" + ERASE)
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

    def counts(self) -> dict[str, Any]:
        """For `ttc ctl status`: the round, its samples done of those planned, the rate."""
        state = self._state
        if state is None or not state.rounds:
            return {"done": 0, "total": 0, "per_minute": 0.0}
        stats = state.rounds[-1]
        return {
            "done": stats.samples,
            "total": stats.planned,
            "round": stats.round,
            "rounds": self._rounds,
            "per_minute": self.per_minute(),
        }

    def line(self) -> str:
        """The status line: round, done/planned, solved and coverage, tokens, cost, rate, errors,
        ETA."""
        return " | ".join(self._fields(compact=False))

    def fitted(self, width: int) -> str:
        """The status line in at most `width` characters: the full line, else the compact one,
        else the compact one's first fields (the round, solved, the ETA kept last), cut."""
        full = " | ".join(self._fields(compact=False))
        if len(full) <= width:
            return full
        fields = self._fields(compact=True)
        while len(fields) > 2 and len(" | ".join(fields)) > width:
            del fields[-2]  # the ETA stays; the fields before it go, last first
        text = " | ".join(fields)
        return text if len(text) <= width else text[: max(0, width - 1)] + "…"

    def _fields(self, *, compact: bool) -> list[str]:
        state = self._state
        if state is None or not state.rounds:
            return ["starting"]
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
        # Before its samples are planned, a round is choosing demonstrations.
        done = f"{stats.samples}/{planned}" if planned else "planning"
        if self._waiting is not None:
            what, since = self._waiting
            done = f"waiting for {what}, {time.monotonic() - since:.0f} s"
        eta = _eta(planned - stats.samples, rate)
        coverage = 100 * covered / state.n
        if compact:
            return [
                f"r{stats.round}/{self._rounds} {done}",
                f"solved {solved}/{state.n} {coverage:.1f}%",
                f"out {_short(usage.output_tokens + usage.thinking_tokens)}",
                f"${cost:.4f}" if cost is not None else "$?",
                f"{rate:.0f}/min",
                f"429s {limited} retries {retries}",
                eta,
            ]
        return [
            f"round {stats.round}/{self._rounds} {done}",
            f"solved {solved}/{state.n}, coverage {coverage:.1f}%",
            f"tokens in {usage.input_tokens:,} out {usage.output_tokens:,} think "
            f"{usage.thinking_tokens:,}",
            f"${cost:.4f}" if cost is not None else "price unknown",
            f"{rate:.0f} req/min",
            f"429s {limited} retries {retries}",
            eta,
        ]

    def render(self) -> None:
        if self.live:
            # One column spare: a line that fills the last one wraps on some terminals.
            text = self.fitted(max(20, self.columns() - 1))
            self._width = max(self._width, len(text))
            self.stream.write("\r" + text + ERASE)
            self.stream.flush()
        else:
            log.info("%s", self.line())

    def _terminal_columns(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return shutil.get_terminal_size().columns


# Erases the rest of the terminal's line (ANSI EL): what a longer earlier line left is gone.
ERASE = "\x1b[K"


def _short(tokens: int) -> str:
    """A token count in a few characters: 950, 12.3k, 4.56M."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k"
    return f"{tokens / 1_000_000:.2f}M"


def _eta(remaining: int, per_minute: float) -> str:
    """The round's time to go at the achieved rate; under a second to go, it waits on its last
    samples (slow requests, the verifiers), which no rate predicts."""
    if remaining <= 0 or per_minute <= 0:
        return "ETA -"
    seconds = remaining / (per_minute / 60)
    if seconds < 1:
        return f"waiting on the last {remaining}"
    return f"ETA {seconds:.0f}s"
