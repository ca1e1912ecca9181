"""ttc's engine as a library: the Engine and its options, the observer and the stream's events,
what a run returns, the contract adapters implement (values, Provider, Suite, Embedder, BatchAPI,
Verifiers), the error tree and the paper's presets.

These names are the curated public API; each sub-package (`contract`, `send`, `journal`,
`strategy`, `run`, `report`) exports more for adapter authors and tools. The names are loaded on
first use, so importing `ttc.engine.contract` (as every adapter and `ttc.retrieval` do) does not
pull in the whole run loop, and `ttc.retrieval` can import the contract while `run` imports it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

# Each public name, and the sub-package it is loaded from.
_HOMES: dict[str, str] = {
    "BadRequest": "ttc.engine.contract",
    "BatchAPI": "ttc.engine.contract",
    "Completion": "ttc.engine.contract",
    "ConfigError": "ttc.engine.contract",
    "DataError": "ttc.engine.contract",
    "Demo": "ttc.engine.contract",
    "Embedder": "ttc.engine.contract",
    "Fatal": "ttc.engine.contract",
    "Item": "ttc.engine.contract",
    "METHODS": "ttc.engine.contract",
    "Message": "ttc.engine.contract",
    "PRESETS": "ttc.engine.contract",
    "Provider": "ttc.engine.contract",
    "ProviderError": "ttc.engine.contract",
    "QuestionRecord": "ttc.engine.contract",
    "RateInfo": "ttc.engine.contract",
    "RateLimited": "ttc.engine.contract",
    "Request": "ttc.engine.contract",
    "ResponseTooLarge": "ttc.engine.contract",
    "RoundStats": "ttc.engine.contract",
    "RunConfig": "ttc.engine.contract",
    "RunState": "ttc.engine.contract",
    "Sampling": "ttc.engine.contract",
    "Suite": "ttc.engine.contract",
    "Transient": "ttc.engine.contract",
    "TtcError": "ttc.engine.contract",
    "Usage": "ttc.engine.contract",
    "Verdict": "ttc.engine.contract",
    "VerifierError": "ttc.engine.contract",
    "WriteError": "ttc.engine.contract",
    "BatchCreated": "ttc.engine.journal",
    "BatchFileUploaded": "ttc.engine.journal",
    "BatchUpdated": "ttc.engine.journal",
    "DifficultyRated": "ttc.engine.journal",
    "Event": "ttc.engine.journal",
    "Judged": "ttc.engine.journal",
    "LimiterSampled": "ttc.engine.journal",
    "LimitsSteered": "ttc.engine.journal",
    "Rated": "ttc.engine.journal",
    "Retried": "ttc.engine.journal",
    "RoundEnded": "ttc.engine.journal",
    "RunStarted": "ttc.engine.journal",
    "SampleFailed": "ttc.engine.journal",
    "SampleLanded": "ttc.engine.journal",
    "Attempted": "ttc.engine.run",
    "Engine": "ttc.engine.run",
    "EngineOptions": "ttc.engine.run",
    "QuestionGaveUp": "ttc.engine.run",
    "QuestionSolved": "ttc.engine.run",
    "RunEnded": "ttc.engine.run",
    "RunObserver": "ttc.engine.run",
    "RunResult": "ttc.engine.run",
    "StopKind": "ttc.engine.run",
    "StopReason": "ttc.engine.run",
    "StreamEvent": "ttc.engine.run",
    "Verifiers": "ttc.engine.run",
    "Limiter": "ttc.engine.send",
    "Price": "ttc.engine.send",
    "ResponseCache": "ttc.engine.send",
    "RetryPolicy": "ttc.engine.send",
    "Strategy": "ttc.engine.strategy",
    "preset": "ttc.engine.strategy",
}

# The sub-packages, each loaded when first read as an attribute of `ttc.engine`.
_PACKAGES = frozenset({"contract", "send", "journal", "strategy", "run", "report", "cli"})

# The names ttc.engine exported before its API was curated, and where each lives now:
# still loaded, with a DeprecationWarning naming the import to write instead.
_MOVED: dict[str, tuple[str, str]] = {
    "BatchResult": ("ttc.engine.contract", "BatchResult"),
    "BatchStatus": ("ttc.engine.contract", "BatchStatus"),
    "INDEXES": ("ttc.engine.contract", "INDEXES"),
    "JUDGES": ("ttc.engine.contract", "JUDGES"),
    "NEIGHBOUR_MODES": ("ttc.engine.contract", "NEIGHBOUR_MODES"),
    "OPERATIONAL": ("ttc.engine.contract", "OPERATIONAL"),
    "sample_seed": ("ttc.engine.contract", "sample_seed"),
    "FloatArray": ("ttc.engine.contract", "FloatArray"),
    "FAILURE_STREAK": ("ttc.engine.run", "FAILURE_STREAK"),
    "PROVIDER_STOP": ("ttc.engine.run", "PROVIDER_STOP"),
    "SIM_NOTE": ("ttc.engine.run", "SIM_NOTE"),
    "run_begun": ("ttc.engine.run", "run_begun"),
    "JudgeRaised": ("ttc.engine.run", "JudgeRaised"),
    "VerifierPool": ("ttc.engine.run", "VerifierPool"),
    "judge_pairs": ("ttc.engine.run", "judge_pairs"),
    "CachingProvider": ("ttc.engine.send", "CachingProvider"),
    "ProviderCache": ("ttc.engine.send", "ProviderCache"),
    "MAX_RESPONSE_TOKENS": ("ttc.engine.send", "MAX_RESPONSE_TOKENS"),
    "TokenEstimator": ("ttc.engine.send", "TokenEstimator"),
    "text_tokens": ("ttc.engine.send", "text_tokens"),
    "token_count": ("ttc.engine.send", "token_count"),
    "Journal": ("ttc.engine.journal", "Journal"),
    "completed_samples": ("ttc.engine.journal", "completed_samples"),
    "decode": ("ttc.engine.journal", "decode"),
    "read_events": ("ttc.engine.journal", "read_events"),
    "read_journal": ("ttc.engine.journal", "read_journal"),
    "items_sha256": ("ttc.engine.journal", "items_sha256"),
    "matched_output_tokens": ("ttc.engine.journal", "matched_output_tokens"),
    "LexicalEmbedder": ("ttc.retrieval", "LexicalEmbedder"),
    "METHOD_STYLES": ("ttc.engine.report", "METHOD_STYLES"),
    "MethodStyle": ("ttc.engine.report", "MethodStyle"),
    "PlotLine": ("ttc.engine.report", "PlotLine"),
    "method_style": ("ttc.engine.report", "method_style"),
    "plot_lines": ("ttc.engine.report", "plot_lines"),
    "wrap_title": ("ttc.engine.report", "wrap_title"),
    "parse_json": ("ttc.engine._util", "parse_json"),
    "read_bytes": ("ttc.engine._util", "read_bytes"),
    "read_json": ("ttc.engine._util", "read_json"),
    "read_jsonl": ("ttc.engine._util", "read_jsonl"),
    "REDACTED": ("ttc.engine._util", "REDACTED"),
    "URL_REDACTED": ("ttc.engine._util", "URL_REDACTED"),
    "basic_token": ("ttc.engine._util", "basic_token"),
    "redact": ("ttc.engine._util", "redact"),
    "redact_argv": ("ttc.engine._util", "redact_argv"),
    "redact_json": ("ttc.engine._util", "redact_json"),
    "redact_url": ("ttc.engine._util", "redact_url"),
    "url_credentials": ("ttc.engine._util", "url_credentials"),
    "withheld": ("ttc.engine._util", "withheld"),
    "Consensus": ("ttc.engine.strategy", "Consensus"),
    "DifficultyAware": ("ttc.engine.strategy", "DifficultyAware"),
    "Elimination": ("ttc.engine.strategy", "Elimination"),
    "FixedDemos": ("ttc.engine.strategy", "FixedDemos"),
    "GroundTruth": ("ttc.engine.strategy", "GroundTruth"),
    "Noisy": ("ttc.engine.strategy", "Noisy"),
    "RandomICL": ("ttc.engine.strategy", "RandomICL"),
    "RewardModel": ("ttc.engine.strategy", "RewardModel"),
    "SimilarICL": ("ttc.engine.strategy", "SimilarICL"),
    "TemperatureSchedule": ("ttc.engine.strategy", "TemperatureSchedule"),
    "Uniform": ("ttc.engine.strategy", "Uniform"),
    "ZeroShot": ("ttc.engine.strategy", "ZeroShot"),
    "Landed": ("ttc.engine.journal", "Replay"),
}

if TYPE_CHECKING:
    from ttc.engine.contract import (
        METHODS,
        PRESETS,
        BadRequest,
        BatchAPI,
        Completion,
        ConfigError,
        DataError,
        Demo,
        Embedder,
        Fatal,
        Item,
        Message,
        Provider,
        ProviderError,
        QuestionRecord,
        RateInfo,
        RateLimited,
        Request,
        ResponseTooLarge,
        RoundStats,
        RunConfig,
        RunState,
        Sampling,
        Suite,
        Transient,
        TtcError,
        Usage,
        Verdict,
        VerifierError,
        WriteError,
    )
    from ttc.engine.journal import (
        BatchCreated,
        BatchFileUploaded,
        BatchUpdated,
        DifficultyRated,
        Event,
        Judged,
        LimiterSampled,
        LimitsSteered,
        Rated,
        Retried,
        RoundEnded,
        RunStarted,
        SampleFailed,
        SampleLanded,
    )
    from ttc.engine.run import (
        Attempted,
        Engine,
        EngineOptions,
        QuestionGaveUp,
        QuestionSolved,
        RunEnded,
        RunObserver,
        RunResult,
        StopKind,
        StopReason,
        StreamEvent,
        Verifiers,
    )
    from ttc.engine.send import Limiter, Price, ResponseCache, RetryPolicy
    from ttc.engine.strategy import Strategy, preset

__all__ = [
    "METHODS",
    "PRESETS",
    "Attempted",
    "BadRequest",
    "BatchAPI",
    "BatchCreated",
    "BatchFileUploaded",
    "BatchUpdated",
    "Completion",
    "ConfigError",
    "DataError",
    "Demo",
    "DifficultyRated",
    "Embedder",
    "Engine",
    "EngineOptions",
    "Event",
    "Fatal",
    "Item",
    "Judged",
    "Limiter",
    "LimiterSampled",
    "LimitsSteered",
    "Message",
    "Price",
    "Provider",
    "ProviderError",
    "QuestionGaveUp",
    "QuestionRecord",
    "QuestionSolved",
    "RateInfo",
    "RateLimited",
    "Rated",
    "Request",
    "ResponseCache",
    "ResponseTooLarge",
    "Retried",
    "RetryPolicy",
    "RoundEnded",
    "RoundStats",
    "RunConfig",
    "RunEnded",
    "RunObserver",
    "RunResult",
    "RunStarted",
    "RunState",
    "SampleFailed",
    "SampleLanded",
    "Sampling",
    "StopKind",
    "StopReason",
    "Strategy",
    "StreamEvent",
    "Suite",
    "Transient",
    "TtcError",
    "Usage",
    "Verdict",
    "VerifierError",
    "Verifiers",
    "WriteError",
    "preset",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # loaded once: later reads are plain attribute reads
        return value
    if name in _MOVED:
        return _moved(name)
    if name in _PACKAGES:  # `import ttc.engine; ttc.engine.strategy.Uniform` as before
        return importlib.import_module(f"ttc.engine.{name}")
    raise AttributeError(f"module 'ttc.engine' has no attribute {name!r}")


def _moved(name: str) -> Any:
    """A name from before the curation, with a warning that says what to import instead."""
    module, new = _MOVED[name]
    warnings.warn(
        f"ttc.engine.{name} moved: use `from {module} import {new}`",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(module), new)


def __dir__() -> list[str]:
    return sorted(__all__)
