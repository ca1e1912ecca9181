"""A run: the Engine, its rounds and their dispatch, the budget, the stream of events, the
observer, the verifier pool, the role models (and how they are called) and what a run
returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.engine.run._budget import FAILURE_STREAK as FAILURE_STREAK
    from ttc.engine.run._budget import PROVIDER_STOP as PROVIDER_STOP
    from ttc.engine.run._budget import StopKind as StopKind
    from ttc.engine.run._budget import StopReason as StopReason
    from ttc.engine.run._engine import Engine as Engine
    from ttc.engine.run._observer import Attempted as Attempted
    from ttc.engine.run._observer import RunObserver as RunObserver
    from ttc.engine.run._options import EngineOptions as EngineOptions
    from ttc.engine.run._otel import SpanObserver as SpanObserver
    from ttc.engine.run._result import RunResult as RunResult
    from ttc.engine.run._roles import Estimates as Estimates
    from ttc.engine.run._roles import RoleCaller as RoleCaller
    from ttc.engine.run._runinfo import SIM_NOTE as SIM_NOTE
    from ttc.engine.run._runinfo import run_begun as run_begun
    from ttc.engine.run._stream import QuestionGaveUp as QuestionGaveUp
    from ttc.engine.run._stream import QuestionSolved as QuestionSolved
    from ttc.engine.run._stream import RunEnded as RunEnded
    from ttc.engine.run._stream import StreamEvent as StreamEvent
    from ttc.engine.run._verify import JudgeRaised as JudgeRaised
    from ttc.engine.run._verify import VerifierPool as VerifierPool
    from ttc.engine.run._verify import Verifiers as Verifiers
    from ttc.engine.run._verify import judge_pairs as judge_pairs

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "Attempted": "ttc.engine.run._observer",
    "Engine": "ttc.engine.run._engine",
    "EngineOptions": "ttc.engine.run._options",
    "Estimates": "ttc.engine.run._roles",
    "FAILURE_STREAK": "ttc.engine.run._budget",
    "judge_pairs": "ttc.engine.run._verify",
    "JudgeRaised": "ttc.engine.run._verify",
    "PROVIDER_STOP": "ttc.engine.run._budget",
    "QuestionGaveUp": "ttc.engine.run._stream",
    "QuestionSolved": "ttc.engine.run._stream",
    "RoleCaller": "ttc.engine.run._roles",
    "run_begun": "ttc.engine.run._runinfo",
    "RunEnded": "ttc.engine.run._stream",
    "RunObserver": "ttc.engine.run._observer",
    "RunResult": "ttc.engine.run._result",
    "SIM_NOTE": "ttc.engine.run._runinfo",
    "SpanObserver": "ttc.engine.run._otel",
    "StopKind": "ttc.engine.run._budget",
    "StopReason": "ttc.engine.run._budget",
    "StreamEvent": "ttc.engine.run._stream",
    "VerifierPool": "ttc.engine.run._verify",
    "Verifiers": "ttc.engine.run._verify",
}

__all__ = [
    "FAILURE_STREAK",
    "PROVIDER_STOP",
    "SIM_NOTE",
    "Attempted",
    "Engine",
    "EngineOptions",
    "Estimates",
    "JudgeRaised",
    "QuestionGaveUp",
    "QuestionSolved",
    "RoleCaller",
    "RunEnded",
    "RunObserver",
    "RunResult",
    "SpanObserver",
    "StopKind",
    "StopReason",
    "StreamEvent",
    "VerifierPool",
    "Verifiers",
    "judge_pairs",
    "run_begun",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
