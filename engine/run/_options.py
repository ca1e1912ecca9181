"""What a host may hand the engine instead of the parts it builds from the config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttc.engine.run._observer import RunObserver
from ttc.engine.run._verify import Verifiers
from ttc.engine.send._cache import ResponseCache
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._prices import Price
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.strategy._strategy import Strategy


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The parts a host may hand the engine instead of those it builds from the config.

    strategy: the method (default: the config's preset); limiter, retry: the send path's;
    price: the policy model's (default: the price table's); verifiers: a verifier pool (local
    processes, or Ray's) to share between engines (the engine then neither starts nor closes it,
    unless `run` must start it); observer: watches the run (e.g. the command line's progress
    line); invocation: how the run was asked for, recorded in config.json; cache: a response
    cache that answers what the policy and role models were asked before, ahead of any
    rate-limit slot, and keeps what they answer (the host opens and closes it).
    """

    strategy: Strategy | None = None
    limiter: Limiter | None = None
    retry: RetryPolicy | None = None
    price: Price | None = None
    verifiers: Verifiers | None = None
    observer: RunObserver | None = None
    invocation: dict[str, Any] | None = None
    cache: ResponseCache | None = None
