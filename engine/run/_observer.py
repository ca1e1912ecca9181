"""What a host sees of a run while it goes: an observer the engine calls, every hook a no-op.

The engine calls `run_started` once its set-up is done, `round_started` as each round begins,
`waiting` while it waits for something other than requests (the embedder),
`event` with every typed event as it is journaled (whether or not the run has a directory), and
`run_ended` once no more requests will be sent. An observer that sets `traces_attempts` is also
told of every attempt of a sample as it ends (`attempt`: a tracer's, `--otel`), and the limiter
then times why each attempt waited; otherwise the send path measures nothing for it. The
command line's live progress line (`ttc.engine.cli`) is one observer; an event stream
(`Engine.stream`, issue 13) can be another, fed by the same calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttc.engine.contract._state import RoundStats, RunState
from ttc.engine.contract._types import Usage
from ttc.engine.journal._events import Event
from ttc.engine.run._budget import StopReason
from ttc.engine.send._waits import Waited


@dataclass(frozen=True, slots=True)
class Attempted:
    """One attempt of a planned sample as it ended: its key, its number, its usage (None: it
    failed, with the error's kind), the backoff it waited after the attempt before it, what it
    waited for at the limiter, and when it ended (wall clock, ns since the epoch)."""

    round: int
    item: str
    k: int
    attempt: int
    usage: Usage | None
    error: str | None
    backoff_s: float
    waited: Waited | None
    ended_ns: int
    temperature: float | None = None
    latency_s: float | None = None


class RunObserver:
    """Hooks the engine calls as a run goes; subclass and override the ones you need."""

    # Set by an observer that wants `attempt` called (and the limiter's waits timed for it).
    traces_attempts: bool = False

    def run_started(
        self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]
    ) -> None:
        """The run is set up: `state` is live, `rounds` planned, `cost` prices a usage."""

    def round_started(self, stats: RoundStats) -> None:
        """A round begins (its totals fill in `stats` as it goes)."""

    def waiting(self, what: str | None) -> None:
        """The run waits for `what` (e.g. the embedder loading its model) before it can go on;
        None: it waits no more."""

    def event(self, event: Event) -> None:
        """An event was journaled (a sample landed or failed, a verdict, a retry, a round...)."""

    async def run_ended(self, stopped: StopReason | None) -> None:
        """No more requests will be sent (`stopped`: why the run ended early, if it did)."""

    def attempt(self, attempted: Attempted) -> None:
        """An attempt of a sample ended (called only when `traces_attempts` is set)."""
