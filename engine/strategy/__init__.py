"""A Strategy is allocation × intervention × judgement; the paper's methods are its presets.

Role models (the reward judge, the difficulty rater) and the fixed few-shot prompts live here too.
"""

from ttc.engine.contract._policy import Allocation, Intervention
from ttc.engine.strategy._allocation import DifficultyAware, Elimination, Uniform
from ttc.engine.strategy._demos import DEFAULT_FOR, FewShot, load_fewshot
from ttc.engine.strategy._difficulty import Estimates
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
    RoleCaller,
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
    "Estimates",
    "FewShot",
    "FixedDemos",
    "GroundTruth",
    "Intervention",
    "Judgement",
    "Noisy",
    "RandomICL",
    "RewardModel",
    "RoleCaller",
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
