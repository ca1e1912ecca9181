"""A Strategy is allocation × intervention × judgement; the paper's methods are presets of it.

- allocation: which questions get samples this round (all of them, or the still-active ones);
- intervention: what each prompt holds in adaptive rounds (nothing, similar solved neighbours,
  random solved questions);
- judgement: when a verdict counts as solving the question (ground truth at threshold γ).

Warm-up rounds are zero-shot whatever the intervention (Algorithm 1, stage 1).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ttc.engine._config import RunConfig
from ttc.engine._errors import ConfigError
from ttc.engine._types import Verdict

# For each question row, its demonstrations as (row, cosine similarity or None), best first.
DemoPlan = dict[int, list[tuple[int, float | None]]]


class SolvedView(Protocol):
    """What allocation and intervention may read of the run state."""

    @property
    def n(self) -> int: ...

    def unsolved_rows(self) -> list[int]: ...

    def solved_rows(self) -> list[int]: ...

    def is_solved(self, row: int) -> bool: ...


class Neighbourhood(Protocol):
    """Retrieval as interventions see it: neighbours of questions among those with a ỹ."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan: ...

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan: ...


class Allocation(Protocol):
    """Chooses the questions that get K samples in a round."""

    @property
    def name(self) -> str: ...

    def active(self, round_no: int, state: SolvedView) -> list[int]: ...


class Intervention(Protocol):
    """Chooses each active question's demonstrations for an adaptive round."""

    @property
    def name(self) -> str: ...

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan: ...


class Judgement(Protocol):
    """Decides whether a verdict solves its question."""

    @property
    def name(self) -> str: ...

    def passed(self, verdict: Verdict) -> bool: ...


@dataclass(frozen=True, slots=True)
class Uniform:
    """Every question, every round (Best-of-N); nothing is ever eliminated."""

    name: str = "uniform"

    def active(self, round_no: int, state: SolvedView) -> list[int]:
        return list(range(state.n))


@dataclass(frozen=True, slots=True)
class Elimination:
    """Only questions with no passing response yet."""

    name: str = "elimination"

    def active(self, round_no: int, state: SolvedView) -> list[int]:
        return state.unsolved_rows()


@dataclass(frozen=True, slots=True)
class ZeroShot:
    """No demonstrations: the warm-up prompt every round."""

    name: str = "zero-shot"

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        return {}


@dataclass(frozen=True, slots=True)
class SimilarICL:
    """The top-P most similar questions that have a ỹ (`solved` or `fixed` neighbour sets)."""

    p: int
    mode: str = "solved"
    name: str = "similar-icl"

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        if self.mode == "fixed":
            return hood.fixed(rows, self.p)
        return hood.similar_solved(rows, self.p)


@dataclass(frozen=True, slots=True)
class RandomICL:
    """P solved questions drawn at random, seeded per (run seed, round, question)."""

    p: int
    seed: int
    name: str = "random-icl"

    def plan(
        self, round_no: int, rows: Sequence[int], state: SolvedView, hood: Neighbourhood
    ) -> DemoPlan:
        solved = state.solved_rows()
        plan: DemoPlan = {}
        for row in rows:
            rng = random.Random(f"{self.seed}/{round_no}/{row}")
            pool = [r for r in solved if r != row]
            picked = rng.sample(pool, min(self.p, len(pool)))
            plan[row] = [(r, None) for r in picked]
        return plan


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """The suite's verifier against the reference; solved when the score reaches γ."""

    gamma: float = 1.0
    name: str = "ground-truth"

    def passed(self, verdict: Verdict) -> bool:
        return verdict.score >= self.gamma


@dataclass(frozen=True, slots=True)
class Strategy:
    """One method: how compute is allocated, how prompts are shaped, how responses are judged."""

    allocation: Allocation
    intervention: Intervention
    judgement: Judgement

    @property
    def needs_embeddings(self) -> bool:
        """Whether the intervention retrieves by similarity (so questions must be embedded)."""
        return isinstance(self.intervention, SimilarICL)


def preset(config: RunConfig) -> Strategy:
    """The paper's named method `config.method` as a Strategy."""
    judge = GroundTruth(config.gamma)
    match config.method:
        case "unif":
            return Strategy(Uniform(), ZeroShot(), judge)
        case "elim":
            return Strategy(Elimination(), ZeroShot(), judge)
        case "rand":
            return Strategy(Elimination(), RandomICL(config.p, config.seed), judge)
        case "adpt":
            return Strategy(Elimination(), SimilarICL(config.p, config.neighbours), judge)
    raise ConfigError(f"--method: unknown method {config.method!r}")
