"""What allocation and intervention are: their protocols, and the plan values they exchange.

Allocation and intervention are read through these protocols by the round (`ttc.engine.run._round`)
and made by the presets (`_strategy`); what a strategy may read of the run state is `SolvedView`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ttc.engine.contract._state import RoundStats
from ttc.engine.contract._types import Demo, Sampling

# A demonstration of a question row: a test question (row, cosine similarity or None) whose ỹ is
# shown, or a fixed `Demo` from outside the test set.
DemoRef = tuple[int, float | None] | Demo
# For each question row, its demonstrations, best first.
DemoPlan = dict[int, Sequence[DemoRef]]
# Question row -> samples this round (rows with none are left out).
Allotment = dict[int, int]


class SolvedView(Protocol):
    """What allocation and intervention may read of the run state."""

    @property
    def n(self) -> int: ...

    @property
    def rounds(self) -> list[RoundStats]: ...

    @property
    def difficulty(self) -> dict[int, float]: ...

    def unsolved_rows(self) -> list[int]: ...

    def solved_rows(self) -> list[int]: ...

    def is_solved(self, row: int) -> bool: ...

    def demo_rows(self) -> list[int]: ...

    def responses(self, row: int) -> int:
        """The responses (not errors) a question has had."""
        ...

    def answer_counts(self, row: int) -> list[int]:
        """How many of its responses gave each answer (one each without an extracted answer);
        kept only when the judgement tallies answers, else one per response."""
        ...


class Neighbourhood(Protocol):
    """Retrieval as interventions see it: neighbours of questions among those with a ỹ."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan: ...

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan: ...


class Allocation(Protocol):
    """Chooses how many samples each question gets in an adaptive round."""

    @property
    def name(self) -> str: ...

    @property
    def needs_difficulty(self) -> bool: ...

    def describe(self) -> dict[str, Any]: ...

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        """Whether this adaptive round's allotment reads the difficulty ratings."""
        ...

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment: ...


class Intervention(Protocol):
    """Chooses each active question's demonstrations for an adaptive round, and the sampling."""

    @property
    def name(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def sampling(self, round_no: int, base: Sampling) -> Sampling: ...

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan: ...
