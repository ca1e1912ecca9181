"""Task suites: Reasoning Gym, MATH-500, Minerva, GPQA-Diamond, LiveCodeBench and your own data."""

from ttc.adapters.suites._answers import extract_last_boxed
from ttc.adapters.suites._base import TemplatedSuite
from ttc.adapters.suites._generic import GenericSuite
from ttc.adapters.suites._generic_config import GenericConfig
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
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
    "TemplatedSuite",
    "extract_last_boxed",
    "make_suite",
]
