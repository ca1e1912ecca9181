"""Task suites: Reasoning Gym, MATH-500, Minerva, GPQA-Diamond, LiveCodeBench and your own data."""

from ttc.adapters.suites._generic import GenericConfig, GenericSuite
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite, extract_last_boxed
from ttc.adapters.suites._suites import SUITES, SuiteOptions, make_suite

__all__ = [
    "SUITES",
    "GPQASuite",
    "GenericConfig",
    "GenericSuite",
    "LiveCodeBenchSuite",
    "MathSuite",
    "ReasoningGymSuite",
    "SuiteOptions",
    "extract_last_boxed",
    "make_suite",
]
