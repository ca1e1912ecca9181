"""What a run returns: its items, per-question records, per-round totals, and why it stopped."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttc.engine.contract._state import QuestionRecord, RoundStats, RunState
from ttc.engine.contract._types import Item, Usage
from ttc.engine.run._budget import StopReason


@dataclass(frozen=True, slots=True, repr=False)
class RunResult:
    """What a run produced: per-round totals, per-question records, coverage and tokens."""

    def __repr__(self) -> str:
        # Compact on purpose: asyncio.run (3.11) builds the repr of a coroutine's result, and a
        # field-by-field repr of 100,000 records costs hundreds of megabytes.
        return f"RunResult(n={self.n}, solved={self.solved}, rounds={len(self.rounds)})"

    items: list[Item]
    records: list[QuestionRecord]
    rounds: list[RoundStats]
    wall_s: float
    out_dir: Path | None
    state: RunState | None = None
    # Why the run stopped early (None: it was not stopped).
    stopped: StopReason | None = None
    # The samples of this session that failed for good, and their commonest cause, in a line
    # (None: none did). A resumed run sends them again.
    failed: str | None = None

    @property
    def complete(self) -> bool:
        """Whether every planned round ran to its barrier (False for a run stopped early)."""
        return self.stopped is None and bool(self.rounds) and all(s.complete for s in self.rounds)

    @property
    def simulated(self) -> bool:
        """Whether any answer of the run came from the offline simulator (live, from the response
        cache or from the journal): its numbers measure the machinery, not the method."""
        return self.state is not None and self.state.simulated

    @property
    def n(self) -> int:
        """The number of questions."""
        return len(self.items)

    @property
    def _state(self) -> RunState:
        if self.state is not None:
            return self.state
        state = RunState(self.items)
        state.records = self.records
        return state

    @property
    def solved(self) -> int:
        """Questions the judgement resolved (for ground truth: solved)."""
        return self._state.solved_count()

    @property
    def covered(self) -> int:
        """Questions with a ground-truth-correct response."""
        return self._state.covered_count()

    @property
    def coverage(self) -> float:
        """The share of questions covered."""
        return self.covered / self.n if self.n else 0.0

    @property
    def accurate(self) -> int:
        """Questions whose selected final answer is correct by ground truth."""
        return self._state.accurate_count()

    @property
    def accuracy(self) -> float:
        """The share of questions answered accurately."""
        return self.accurate / self.n if self.n else 0.0

    @property
    def usage(self) -> Usage:
        """The policy model's tokens over all rounds."""
        total = Usage()
        for stats in self.rounds:
            total = total + stats.usage
        return total

    def response(self, item_id: str) -> str | None:
        """ỹ of a question, if it has one (for ground truth: its first passing response)."""
        row = next(i for i, item in enumerate(self.items) if item.id == item_id)
        return self._state.response(row)
