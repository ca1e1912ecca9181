"""A Strategy is allocation × intervention × judgement; the paper's methods are its presets.

What the role models are asked and how their replies are read (the reward judge's rubric, the
difficulty rating), and the fixed few-shot prompts, live here too; the calls are the run's
(`ttc.engine.run.RoleCaller`). Pure policy: nothing here sends a request.
"""

from ttc.engine.contract._policy import Allocation, Intervention
from ttc.engine.strategy._allocation import DifficultyAware, Elimination, Listed, Uniform
from ttc.engine.strategy._demos import DEFAULT_FOR, FewShot, load_fewshot
from ttc.engine.strategy._intervention import (
    FixedDemos,
    RandomICL,
    SimilarICL,
    TemperatureSchedule,
    ZeroShot,
)
from ttc.engine.strategy._judges import (
    Consensus,
    GroundTruth,
    Judgement,
    Noisy,
    RewardModel,
)
from ttc.engine.strategy._rubric import SCALE, parse_score, rubric, split_rubric
from ttc.engine.strategy._strategy import Strategy, judgement_of, preset

__all__ = [
    "DEFAULT_FOR",
    "SCALE",
    "Allocation",
    "Consensus",
    "DifficultyAware",
    "Elimination",
    "FewShot",
    "FixedDemos",
    "GroundTruth",
    "Intervention",
    "Judgement",
    "Listed",
    "Noisy",
    "RandomICL",
    "RewardModel",
    "SimilarICL",
    "Strategy",
    "TemperatureSchedule",
    "Uniform",
    "ZeroShot",
    "judgement_of",
    "load_fewshot",
    "parse_score",
    "preset",
    "rubric",
    "split_rubric",
]
