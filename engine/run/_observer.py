"""What a host sees of a run while it goes: an observer the engine calls, every hook a no-op.

The engine calls `run_started` once its set-up is done, `round_started` as each round begins,
`waiting` while it waits for something other than requests (the embedder),
`event` with every typed event as it is journaled (whether or not the run has a directory), and
`run_ended` once no more requests will be sent. The command line's live progress line
(`ttc.engine.cli`) is one observer; an event stream (`Engine.stream`, issue 13) can be another,
fed by the same calls.
"""

from __future__ import annotations

from collections.abc import Callable

from ttc.engine.contract._state import RoundStats, RunState
from ttc.engine.contract._types import Usage
from ttc.engine.journal._events import Event
from ttc.engine.run._budget import StopReason


class RunObserver:
    """Hooks the engine calls as a run goes; subclass and override the ones you need."""

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
