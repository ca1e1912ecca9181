"""A suite of generated sums for the overhead benchmarks: its judge is a string test, so the
verdicts cost next to nothing and the engine's own work is what is measured."""

from __future__ import annotations

from collections.abc import Sequence

from client_overhead import question

from ttc.engine import Item, Suite, Verdict
from ttc.engine.contract import Demo


class Sums(Suite):
    """`count` questions; a response is right when it ends in the reference server's answer."""

    name = "sums"

    def __init__(self, count: int) -> None:
        self.count = count

    def items(self) -> list[Item]:
        return [Item(id=f"q{i}", question=question(i), reference="42") for i in range(self.count)]

    def warmup_prompt(self, item: Item) -> str:
        return item.question

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        return item.question

    def judge(self, item: Item, response: str) -> Verdict:
        right = response.endswith("\\boxed{42}.")
        return Verdict(1.0 if right else 0.0, "42" if right else None)
