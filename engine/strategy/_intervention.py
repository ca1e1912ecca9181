"""Intervention: what each prompt holds and how it is sampled.

Nothing (zero-shot), similar or random solved neighbours (adpt, rand), fixed few-shot
demonstrations (the fixed-ICL ablation), or a temperature that rises by round.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ttc.engine.contract._policy import DemoPlan, Neighbourhood, SolvedView
from ttc.engine.contract._types import Demo, Sampling


class _Base:
    """The defaults of an intervention: the configured sampling, no demonstrations."""

    __slots__ = ()

    def sampling(self, round_no: int, base: Sampling) -> Sampling:
        return base


@dataclass(frozen=True, slots=True)
class ZeroShot(_Base):
    """No demonstrations: the warm-up prompt every round."""

    name: str = "zero-shot"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        return {}


@dataclass(frozen=True, slots=True)
class SimilarICL(_Base):
    """The top-P most similar questions that have a ỹ (`solved` or `fixed` neighbour sets)."""

    p: int
    mode: str = "solved"
    name: str = "similar-icl"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p, "neighbours": self.mode}

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        if self.mode == "fixed":
            return hood.fixed(rows, self.p)
        return hood.similar_solved(rows, self.p)


@dataclass(frozen=True, slots=True)
class RandomICL(_Base):
    """P questions with a ỹ drawn at random, seeded per (run seed, round, question)."""

    p: int
    seed: int
    name: str = "random-icl"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p}

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        pool = state.demo_rows()
        plan: DemoPlan = {}
        for row in rows:
            rng = random.Random(f"{self.seed}/{round_no}/{row}")
            others = [r for r in pool if r != row]
            picked = rng.sample(others, min(self.p, len(others)))
            plan[row] = [(r, None) for r in picked]
        return plan


@dataclass(frozen=True, slots=True)
class FixedDemos(_Base):
    """The same few-shot demonstrations for every question in every adaptive round."""

    demos: tuple[Demo, ...]
    source: str = ""
    sha256: str = ""
    name: str = "fixed-icl"

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shots": len(self.demos),
            "source": self.source,
            "sha256": self.sha256,
        }

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        return dict.fromkeys(rows, self.demos)


# The largest temperature the providers accept (OpenAI and Gemini: 2).
MAX_TEMPERATURE = 2.0


@dataclass(frozen=True, slots=True)
class TemperatureSchedule:
    """No demonstrations; temperature `start` in round one, `step` higher each round after."""

    start: float = 0.3
    step: float = 0.4
    name: str = "temperature-schedule"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "step": self.step}

    def temperature(self, round_no: int) -> float:
        return round(min(MAX_TEMPERATURE, self.start + self.step * (round_no - 1)), 6)

    def sampling(self, round_no: int, base: Sampling) -> Sampling:
        return replace(base, temperature=self.temperature(round_no))

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        return {}
