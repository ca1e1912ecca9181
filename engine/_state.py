"""Run state: one record per question, updated sample by sample, eliminated at the round barrier.

Each question keeps its own progress (samples, tokens, first passing response), so a barrier-free
scheduler can later be added without reshaping the state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ttc.engine._errors import DataError
from ttc.engine._types import Item, Usage


@dataclass(slots=True)
class QuestionRecord:
    """Everything the run knows about one question."""

    samples: int = 0
    errors: int = 0
    usage: Usage = field(default_factory=Usage)
    # ỹ(x): the first passing response in (round, k) order, whatever order the samples landed in.
    first_pass: tuple[int, int, str] | None = None

    @property
    def solved(self) -> bool:
        return self.first_pass is not None


@dataclass(slots=True)
class RoundStats:
    """Totals of one round, as the per-round table and summary.json report them."""

    round: int
    adaptive: bool
    active: int = 0
    planned: int = 0
    requests: int = 0
    samples: int = 0
    passed: int = 0
    newly_solved: int = 0
    solved: int = 0
    coverage: float = 0.0
    usage: Usage = field(default_factory=Usage)
    errors: int = 0
    retries: int = 0
    rate_limited: int = 0
    replayed: int = 0
    wall_s: float = 0.0
    # False while the round runs, and for a round the run was stopped in.
    complete: bool = False


class RunState:
    """The per-question records of a run, indexed by row (the item's position)."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = list(items)
        self.rows = {item.id: row for row, item in enumerate(self.items)}
        if len(self.rows) != len(self.items):
            counts = Counter(item.id for item in self.items)
            dup = next(item_id for item_id, c in counts.items() if c > 1)
            raise DataError(f"duplicate item id {dup!r}")
        self.records = [QuestionRecord() for _ in self.items]
        self.rounds: list[RoundStats] = []

    @property
    def n(self) -> int:
        return len(self.items)

    def is_solved(self, row: int) -> bool:
        return self.records[row].first_pass is not None

    def unsolved_rows(self) -> list[int]:
        return [row for row, rec in enumerate(self.records) if rec.first_pass is None]

    def solved_rows(self) -> list[int]:
        return [row for row, rec in enumerate(self.records) if rec.first_pass is not None]

    def solved_count(self) -> int:
        return sum(rec.first_pass is not None for rec in self.records)

    def response(self, row: int) -> str | None:
        """ỹ(x) of a question, if it has one."""
        fp = self.records[row].first_pass
        return None if fp is None else fp[2]

    def record_sample(
        self, row: int, round_no: int, k: int, text: str | None, usage: Usage, passed: bool
    ) -> bool:
        """Account one finished sample; True when it makes the question newly solved."""
        rec = self.records[row]
        rec.samples += 1
        rec.usage = rec.usage + usage
        if text is None:
            rec.errors += 1
            return False
        if not passed:
            return False
        was_solved = rec.first_pass is not None
        if rec.first_pass is None or (round_no, k) < rec.first_pass[:2]:
            rec.first_pass = (round_no, k, text)
        return not was_solved

    def total_usage(self) -> Usage:
        total = Usage()
        for stats in self.rounds:
            total = total + stats.usage
        return total
