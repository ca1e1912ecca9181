"""The engine: run loop, state, strategies, limiter, retries, verifier pool, journal, CLI."""

from ttc.engine._config import METHODS, NEIGHBOUR_MODES, RunConfig
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
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._round import sample_seed
from ttc.engine._state import QuestionRecord, RoundStats, RunState
from ttc.engine._strategy import (
    Elimination,
    GroundTruth,
    RandomICL,
    SimilarICL,
    Strategy,
    Uniform,
    ZeroShot,
    preset,
)
from ttc.engine._types import (
    Completion,
    Demo,
    Embedder,
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

__all__ = [
    "METHODS",
    "NEIGHBOUR_MODES",
    "SIM_NOTE",
    "BadRequest",
    "Completion",
    "ConfigError",
    "DataError",
    "Demo",
    "Elimination",
    "Embedder",
    "Engine",
    "Fatal",
    "GroundTruth",
    "Item",
    "Limiter",
    "Message",
    "Provider",
    "ProviderError",
    "QuestionRecord",
    "RandomICL",
    "RateInfo",
    "RateLimited",
    "Request",
    "RetryPolicy",
    "RoundStats",
    "RunConfig",
    "RunResult",
    "RunState",
    "Sampling",
    "SimilarICL",
    "Strategy",
    "Suite",
    "Transient",
    "TtcError",
    "Uniform",
    "Usage",
    "Verdict",
    "ZeroShot",
    "preset",
    "sample_seed",
]
