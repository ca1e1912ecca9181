"""The engine: the contract (types, errors), the run loop, state, limiter, retries, verifier pool,
journal and cache. It imports nothing from `ttc.adapters`; the CLI (`ttc.engine.cli`) wires them in.
"""

from ttc.engine._cache import CachingProvider, ProviderCache, ResponseCache
from ttc.engine._config import JUDGES, METHODS, NEIGHBOUR_MODES, OPERATIONAL, PRESETS, RunConfig
from ttc.engine._engine import SIM_NOTE, Engine, RunResult
from ttc.engine._errors import (
    BadRequest,
    ConfigError,
    DataError,
    Fatal,
    ProviderError,
    RateLimited,
    Transient,
    TtcError,
)
from ttc.engine._lexical import LexicalEmbedder
from ttc.engine._limiter import Limiter
from ttc.engine._progress import Progress
from ttc.engine._records import read_jsonl
from ttc.engine._retry import RetryPolicy
from ttc.engine._round import sample_seed
from ttc.engine._rundir import items_sha256, matched_output_tokens
from ttc.engine._state import QuestionRecord, RoundStats, RunState
from ttc.engine._tokens import TokenEstimator
from ttc.engine._types import (
    Completion,
    Demo,
    Embedder,
    FloatArray,
    Item,
    Message,
    Provider,
    RateInfo,
    Request,
    Sampling,
    Suite,
    Usage,
    Verdict,
)
from ttc.engine._verify import VerifierPool
from ttc.engine.strategy import (
    Consensus,
    DifficultyAware,
    Elimination,
    FixedDemos,
    GroundTruth,
    Noisy,
    RandomICL,
    RewardModel,
    SimilarICL,
    Strategy,
    TemperatureSchedule,
    Uniform,
    ZeroShot,
    preset,
)

__all__ = [
    "JUDGES",
    "METHODS",
    "NEIGHBOUR_MODES",
    "OPERATIONAL",
    "PRESETS",
    "SIM_NOTE",
    "BadRequest",
    "CachingProvider",
    "Completion",
    "ConfigError",
    "Consensus",
    "DataError",
    "Demo",
    "DifficultyAware",
    "Elimination",
    "Embedder",
    "Engine",
    "Fatal",
    "FixedDemos",
    "FloatArray",
    "GroundTruth",
    "Item",
    "LexicalEmbedder",
    "Limiter",
    "Message",
    "Noisy",
    "Progress",
    "Provider",
    "ProviderCache",
    "ProviderError",
    "QuestionRecord",
    "RandomICL",
    "RateInfo",
    "RateLimited",
    "Request",
    "ResponseCache",
    "RetryPolicy",
    "RewardModel",
    "RoundStats",
    "RunConfig",
    "RunResult",
    "RunState",
    "Sampling",
    "SimilarICL",
    "Strategy",
    "Suite",
    "TemperatureSchedule",
    "TokenEstimator",
    "Transient",
    "TtcError",
    "Uniform",
    "Usage",
    "Verdict",
    "VerifierPool",
    "ZeroShot",
    "items_sha256",
    "matched_output_tokens",
    "preset",
    "read_jsonl",
    "sample_seed",
]
