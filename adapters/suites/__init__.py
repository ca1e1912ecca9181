"""Task suites: Reasoning Gym, MATH-500, Minerva, GPQA-Diamond, LiveCodeBench and your own data."""

from ttc.adapters.suites._answers import extract_last_boxed
from ttc.adapters.suites._base import TemplatedSuite
from ttc.adapters.suites._datadir import (
    DATA_DIR_ENV,
    DATA_FILES,
    HUB_SUITES,
    data_dir,
    local_data,
    no_local_data,
)
from ttc.adapters.suites._generic import GenericSuite
from ttc.adapters.suites._generic_config import GenericConfig
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._hub import HUB, LCB_REPO, HubDataset, HubUnavailable
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._mixed import MIXED_SOURCES, MixedSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.adapters.suites._records import Table
from ttc.adapters.suites._suites import SUITES, SuiteOptions, data_source, make_suite

__all__ = [
    "DATA_DIR_ENV",
    "DATA_FILES",
    "HUB",
    "HUB_SUITES",
    "LCB_REPO",
    "MIXED_SOURCES",
    "SUITES",
    "GPQASuite",
    "GenericConfig",
    "GenericSuite",
    "HubDataset",
    "HubUnavailable",
    "LiveCodeBenchSuite",
    "MathSuite",
    "MixedSuite",
    "ReasoningGymSuite",
    "SuiteOptions",
    "Table",
    "TemplatedSuite",
    "data_dir",
    "data_source",
    "extract_last_boxed",
    "local_data",
    "make_suite",
    "no_local_data",
]
