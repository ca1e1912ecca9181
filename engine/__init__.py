"""The engine: the contract (types, errors), the run loop, state, limiter, retries, verifier pool,
journal and cache. It imports nothing from `ttc.adapters`; the CLI (`ttc.engine.cli`) wires them in.
"""

from ttc.engine._budget import FAILURE_STREAK, PROVIDER_STOP, StopKind, StopReason
from ttc.engine._cache import CachingProvider, ProviderCache, ResponseCache
from ttc.engine._config import JUDGES, METHODS, NEIGHBOUR_MODES, OPERATIONAL, PRESETS, RunConfig
from ttc.engine._engine import Engine
from ttc.engine._errors import (
    BadRequest,
    ConfigError,
    DataError,
    Fatal,
    ProviderError,
    RateLimited,
    Transient,
    TtcError,
    WriteError,
)
from ttc.engine._events import (
    DifficultyRated,
    Event,
    Judged,
    Rated,
    Retried,
    RoundEnded,
    RunStarted,
    SampleFailed,
    SampleLanded,
)
from ttc.engine._journal import (
    Journal,
    Landed,
    completed_samples,
    decode,
    read_events,
    read_journal,
)
from ttc.engine._lexical import LexicalEmbedder
from ttc.engine._limiter import Limiter
from ttc.engine._observer import RunObserver
from ttc.engine._options import EngineOptions
from ttc.engine._records import parse_json, read_bytes, read_json, read_jsonl
from ttc.engine._result import RunResult
from ttc.engine._retry import RetryPolicy
from ttc.engine._round import sample_seed
from ttc.engine._rundir import items_sha256, matched_output_tokens
from ttc.engine._runinfo import SIM_NOTE
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
    "FAILURE_STREAK",
    "JUDGES",
    "METHODS",
    "NEIGHBOUR_MODES",
    "OPERATIONAL",
    "PRESETS",
    "PROVIDER_STOP",
    "SIM_NOTE",
    "BadRequest",
    "CachingProvider",
    "Completion",
    "ConfigError",
    "Consensus",
    "DataError",
    "Demo",
    "DifficultyAware",
    "DifficultyRated",
    "Elimination",
    "Embedder",
    "Engine",
    "EngineOptions",
    "Event",
    "Fatal",
    "FixedDemos",
    "FloatArray",
    "GroundTruth",
    "Item",
    "Journal",
    "Judged",
    "Landed",
    "LexicalEmbedder",
    "Limiter",
    "Message",
    "Noisy",
    "Provider",
    "ProviderCache",
    "ProviderError",
    "QuestionRecord",
    "RandomICL",
    "RateInfo",
    "RateLimited",
    "Rated",
    "Request",
    "ResponseCache",
    "Retried",
    "RetryPolicy",
    "RewardModel",
    "RoundEnded",
    "RoundStats",
    "RunConfig",
    "RunObserver",
    "RunResult",
    "RunStarted",
    "RunState",
    "SampleFailed",
    "SampleLanded",
    "Sampling",
    "SimilarICL",
    "StopKind",
    "StopReason",
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
    "WriteError",
    "ZeroShot",
    "completed_samples",
    "decode",
    "items_sha256",
    "matched_output_tokens",
    "parse_json",
    "preset",
    "read_bytes",
    "read_events",
    "read_journal",
    "read_json",
    "read_jsonl",
    "sample_seed",
]
