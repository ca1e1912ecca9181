"""A Strategy is allocation × intervention × judgement; the paper's methods are its presets.

Role models (the reward judge, the difficulty rater) and the fixed few-shot prompts live here too.
"""

from ttc.engine.strategy._demos import DEFAULT_FOR, FewShot, load_fewshot
from ttc.engine.strategy._difficulty import Estimates
from ttc.engine.strategy._judges import (
    SCALE,
    Consensus,
    GroundTruth,
    Judgement,
    Noisy,
    RewardModel,
    RoleCaller,
    parse_score,
    rubric,
    split_rubric,
)
from ttc.engine.strategy._strategy import (
    Allocation,
    DifficultyAware,
    Elimination,
    FixedDemos,
    Intervention,
    RandomICL,
    SimilarICL,
    Strategy,
    TemperatureSchedule,
    Uniform,
    ZeroShot,
    judgement_of,
    preset,
)

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
