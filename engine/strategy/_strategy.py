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
| `esc`       | elimination            | zero-shot               | a window agrees     |
| `asc`       | elimination            | zero-shot               | Beta stopping rule  |
| `bandit`    | entropy or UCB scores  | zero-shot               | ground truth        |

Any judgement composes with any preset (`--judge reward`, `--noise P`). Warm-up rounds sample
every question K times with the zero-shot prompt whatever the intervention (Algorithm 1, stage 1);
the intervention's sampling (the temperature schedule) applies from round one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._policy import Allocation, Intervention
from ttc.engine.strategy._allocation import DifficultyAware, Elimination, Uniform
from ttc.engine.strategy._bandit import Bandit
from ttc.engine.strategy._intervention import (
    FixedDemos,
    RandomICL,
    SimilarICL,
    TemperatureSchedule,
    ZeroShot,
)
from ttc.engine.strategy._judges import Consensus, GroundTruth, Judgement, Noisy, RewardModel
from ttc.engine.strategy._stopping import BetaStop, WindowAgreement

__all__ = ["Strategy", "judgement_of", "preset"]


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
    if kind == "esc":
        return WindowAgreement()
    if kind == "asc":
        return BetaStop(threshold=config.asc_threshold)
    inner: GroundTruth | RewardModel
    inner = RewardModel(config.judge_threshold) if kind == "reward" else GroundTruth(config.gamma)
    return Noisy(inner, config.noise, config.seed, config.pool) if config.noise > 0 else inner


def _bandit(config: RunConfig, judge: Judgement) -> Strategy:
    """bandit: Zuo & Zhu's allocation, zero-shot (`_bandit`)."""
    bandit = Bandit(config.bandit_rule, config.bandit_budget, config.bandit_c, config.bandit_floor)
    # Its entropy rule reads each question's answers: the judgement tallies them.
    if isinstance(judge, GroundTruth | RewardModel):
        judge = dataclasses.replace(judge, tallies=True)
    return Strategy(bandit, ZeroShot(), judge)


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
        case "bandit":
            return _bandit(config, judge)
        case "esc" | "asc":  # judged by their own stopping rules (`judgement_of`)
            return Strategy(Elimination(), ZeroShot(), judge)
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
