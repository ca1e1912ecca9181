"""A Strategy is allocation × intervention × judgement; the paper's methods are presets of it.

- allocation: how many samples each question gets in an adaptive round (every question K, the
  unresolved ones K, or a difficulty-proportional share of a budget);
- intervention: what each prompt holds and how it is sampled (nothing, similar or random solved
  neighbours, fixed few-shot demonstrations, a temperature that rises by round);
- judgement: which responses count and what each question answers (`ttc.engine.strategy._judges`).

| preset      | allocation             | intervention            | judgement (default) |
| ----------- | ---------------------- | ----------------------- | ------------------- |
| `unif`      | uniform                | zero-shot               | ground truth        |
| `elim`      | elimination            | zero-shot               | ground truth        |
| `rand`      | elimination            | random solved ICL       | ground truth        |
| `adpt`      | elimination            | similar solved ICL      | ground truth        |
| `da`        | difficulty-aware       | zero-shot               | ground truth        |
| `temp`      | elimination            | temperature schedule    | ground truth        |
| `fixed-icl` | elimination            | fixed few-shot          | ground truth        |
| `sc`        | elimination            | similar solved ICL      | consensus           |

Any judgement composes with any preset (`--judge reward`, `--noise P`). Warm-up rounds sample
every question K times with the zero-shot prompt whatever the intervention (Algorithm 1, stage 1);
the intervention's sampling (the temperature schedule) applies from round one.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ttc.engine._config import RunConfig
from ttc.engine._errors import ConfigError
from ttc.engine._state import RoundStats
from ttc.engine._types import Demo, Sampling
from ttc.engine.strategy._difficulty import (
    NEUTRAL,
    adaptive_measure,
    apportion,
    round_budget,
    samples_for_tokens,
    warmup_measure,
)
from ttc.engine.strategy._judges import Consensus, GroundTruth, Judgement, Noisy, RewardModel

log = logging.getLogger("ttc")

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


@dataclass(frozen=True, slots=True)
class Uniform:
    """Every question, every round (Best-of-N); nothing is ever eliminated.

    With `match_tokens`, N is a number of rounds: as many as make the expected output tokens
    match (the warm-up's mean tokens per sample × questions × K per round, rounded, from 1 to R);
    the rounds after the N-th sample nothing, so the last coverage carries forward (section 5).
    """

    rounds: int = 0
    warmup: int = 1
    match_tokens: int | None = None
    name: str = "uniform"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "match_tokens": self.match_tokens}

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def rounds_matched(self, state: SolvedView, k: int) -> int:
        """N: the rounds whose expected output tokens come closest to `match_tokens`."""
        assert self.match_tokens is not None
        answered, tokens = warmup_measure(state.rounds, self.warmup)
        if answered == 0 or tokens == 0:
            return self.rounds
        per_round = tokens / answered * state.n * k
        return max(1, min(self.rounds, round(self.match_tokens / per_round)))

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        if self.match_tokens is not None:
            last = self.rounds_matched(state, k)
            if round_no == self.warmup + 1:
                log.info(
                    "unif matched to %s output tokens: %d round(s) of K=%d per question",
                    f"{self.match_tokens:,}",
                    last,
                    k,
                )
            if round_no > last:
                return {}
        return dict.fromkeys(range(state.n), k)


@dataclass(frozen=True, slots=True)
class Elimination:
    """Only questions not yet resolved, K samples each."""

    name: str = "elimination"
    needs_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return False

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        return dict.fromkeys(state.unsolved_rows(), k)


@dataclass(frozen=True, slots=True)
class DifficultyAware:
    """The adaptive rounds' budget, spread over unresolved questions in proportion to their
    estimated difficulty (Appendix B; the rules are in `ttc.engine.strategy._difficulty`).

    With `match_tokens` the budget is output tokens (the matched run's, less this run's warm-up),
    turned into samples before each round at the mean output tokens of the adaptive samples so
    far; without, it is (R - R_warm) x K x the questions the warm-up left unresolved, in samples.
    """

    rounds: int
    warmup: int
    match_tokens: int | None = None
    name: str = "difficulty-aware"
    needs_difficulty: bool = True

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "match_tokens": self.match_tokens,
            "budget": "output tokens" if self.match_tokens is not None else "samples",
            "rating": "1-10",
            "neutral": NEUTRAL,
        }

    def target_tokens(self, state: SolvedView) -> int:
        """The output tokens for the adaptive rounds: the matched run's less the warm-up's."""
        assert self.match_tokens is not None
        return self.match_tokens - warmup_measure(state.rounds, self.warmup)[1]

    def samples_left(self, round_no: int, state: SolvedView, k: int) -> int:
        """Samples for round `round_no` and the adaptive rounds after it."""
        planned, answered, spent = adaptive_measure(state.rounds, round_no)
        if self.match_tokens is None:
            unresolved = state.n - state.rounds[self.warmup - 1].solved if self.warmup else state.n
            return max(0, (self.rounds - self.warmup) * k * unresolved - planned)
        # Tokens per sample: the adaptive samples' so far, or before any, the warm-up's.
        measured = (answered, spent) if answered else warmup_measure(state.rounds, self.warmup)
        return samples_for_tokens(self.target_tokens(state) - spent, *measured)

    def needs_ratings(self, round_no: int, state: SolvedView, k: int) -> bool:
        return self.samples_left(round_no, state, k) > 0

    def allocate(self, round_no: int, state: SolvedView, k: int) -> Allotment:
        left = self.samples_left(round_no, state, k)
        if round_no == self.warmup + 1:
            self._announce(state, left)
        this_round = round_budget(left, self.rounds - round_no + 1)
        weights = {row: state.difficulty.get(row, NEUTRAL) for row in state.unsolved_rows()}
        return {row: c for row, c in apportion(this_round, weights).items() if c > 0}

    def _announce(self, state: SolvedView, samples: int) -> None:
        if self.match_tokens is None:
            log.info("da: %s samples for the adaptive rounds", f"{samples:,}")
            return
        target = self.target_tokens(state)
        warm = self.match_tokens - target
        if target <= 0:
            log.warning(
                "da: the matched run's %s output tokens are at or below this run's warm-up's "
                "%s: no adaptive samples and no difficulty ratings",
                f"{self.match_tokens:,}",
                f"{warm:,}",
            )
            return
        log.info(
            "da: matched to %s output tokens: %s for the adaptive rounds after the warm-up's "
            "%s, about %s samples (re-estimated each round from the tokens per sample so far)",
            f"{self.match_tokens:,}",
            f"{target:,}",
            f"{warm:,}",
            f"{samples:,}",
        )
        if samples == 0:
            log.warning("da: %s tokens buy no whole sample: no adaptive samples", f"{target:,}")


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

    def describe(self) -> dict[str, Any]:
        """The strategy in full, as config.json records it (a resumed run must match it)."""
        return {
            "allocation": self.allocation.describe(),
            "intervention": self.intervention.describe(),
            "judgement": self.judgement.describe(),
        }


def judgement_of(config: RunConfig) -> Judgement:
    """The judgement `config` asks for: --judge, wrapped by --noise."""
    kind = config.judgement
    if kind == "consensus":
        return Consensus(config.consensus)
    inner: GroundTruth | RewardModel
    inner = RewardModel(config.judge_threshold) if kind == "reward" else GroundTruth(config.gamma)
    return Noisy(inner, config.noise, config.seed) if config.noise > 0 else inner


def preset(config: RunConfig, suite: str = "") -> Strategy:
    """The paper's named method `config.method` as a Strategy (`suite` names the few-shot
    default of fixed-icl)."""
    judge = judgement_of(config)
    similar = SimilarICL(config.p, config.neighbours)
    match config.method:
        case "unif":
            unif = Uniform(config.rounds, config.warmup_rounds, config.match_tokens)
            return Strategy(unif, ZeroShot(), judge)
        case "elim":
            return Strategy(Elimination(), ZeroShot(), judge)
        case "rand":
            return Strategy(Elimination(), RandomICL(config.p, config.seed), judge)
        case "adpt" | "sc":
            return Strategy(Elimination(), similar, judge)
        case "da":
            da = DifficultyAware(config.rounds, config.warmup_rounds, config.match_tokens)
            return Strategy(da, ZeroShot(), judge)
        case "temp":
            start = config.sampling.temperature
            schedule = TemperatureSchedule(0.3 if start is None else start, config.temp_step)
            return Strategy(Elimination(), schedule, judge)
        case "fixed-icl":
            from ttc.engine.strategy._demos import load_fewshot

            shots = load_fewshot(config.fewshot, suite)
            fixed = FixedDemos(shots.demos, shots.source, shots.sha256)
            return Strategy(Elimination(), fixed, judge)
    raise ConfigError(f"--method: unknown method {config.method!r}")
