"""A run: the Engine, its rounds and their dispatch, the budget, the stream of events, the
observer, the verifier pool, the role models (and how they are called) and what a run
returns."""

from ttc.engine.run._budget import FAILURE_STREAK, PROVIDER_STOP, StopKind, StopReason
from ttc.engine.run._engine import Engine
from ttc.engine.run._observer import RunObserver
from ttc.engine.run._options import EngineOptions
from ttc.engine.run._result import RunResult
from ttc.engine.run._roles import Estimates, RoleCaller
from ttc.engine.run._runinfo import SIM_NOTE, run_begun
from ttc.engine.run._stream import QuestionGaveUp, QuestionSolved, RunEnded, StreamEvent
from ttc.engine.run._verify import JudgeRaised, VerifierPool, Verifiers, judge_pairs

__all__ = [
    "FAILURE_STREAK",
    "PROVIDER_STOP",
    "SIM_NOTE",
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
    "StopKind",
    "StopReason",
    "StreamEvent",
    "VerifierPool",
    "Verifiers",
    "judge_pairs",
    "run_begun",
]
