"""Task suites: Reasoning Gym, MATH-500, Minerva, GPQA-Diamond, LiveCodeBench and your own data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.adapters.suites._answers import extract_last_boxed as extract_last_boxed
    from ttc.adapters.suites._base import TemplatedSuite as TemplatedSuite
    from ttc.adapters.suites._datadir import DATA_DIR_ENV as DATA_DIR_ENV
    from ttc.adapters.suites._datadir import DATA_FILES as DATA_FILES
    from ttc.adapters.suites._datadir import HUB_SUITES as HUB_SUITES
    from ttc.adapters.suites._datadir import data_dir as data_dir
    from ttc.adapters.suites._datadir import local_data as local_data
    from ttc.adapters.suites._datadir import no_local_data as no_local_data
    from ttc.adapters.suites._generic import GenericSuite as GenericSuite
    from ttc.adapters.suites._generic_config import GenericConfig as GenericConfig
    from ttc.adapters.suites._gpqa import GPQASuite as GPQASuite
    from ttc.adapters.suites._hub import HUB as HUB
    from ttc.adapters.suites._hub import LCB_REPO as LCB_REPO
    from ttc.adapters.suites._hub import HubDataset as HubDataset
    from ttc.adapters.suites._hub import HubUnavailable as HubUnavailable
    from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite as LiveCodeBenchSuite
    from ttc.adapters.suites._math import MathSuite as MathSuite
    from ttc.adapters.suites._mixed import MIXED_SOURCES as MIXED_SOURCES
    from ttc.adapters.suites._mixed import MixedSuite as MixedSuite
    from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite as ReasoningGymSuite
    from ttc.adapters.suites._records import Table as Table
    from ttc.adapters.suites._suites import SUITES as SUITES
    from ttc.adapters.suites._suites import SuiteOptions as SuiteOptions
    from ttc.adapters.suites._suites import data_source as data_source
    from ttc.adapters.suites._suites import make_suite as make_suite

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "data_dir": "ttc.adapters.suites._datadir",
    "DATA_DIR_ENV": "ttc.adapters.suites._datadir",
    "DATA_FILES": "ttc.adapters.suites._datadir",
    "data_source": "ttc.adapters.suites._suites",
    "extract_last_boxed": "ttc.adapters.suites._answers",
    "GenericConfig": "ttc.adapters.suites._generic_config",
    "GenericSuite": "ttc.adapters.suites._generic",
    "GPQASuite": "ttc.adapters.suites._gpqa",
    "HUB": "ttc.adapters.suites._hub",
    "HUB_SUITES": "ttc.adapters.suites._datadir",
    "HubDataset": "ttc.adapters.suites._hub",
    "HubUnavailable": "ttc.adapters.suites._hub",
    "LCB_REPO": "ttc.adapters.suites._hub",
    "LiveCodeBenchSuite": "ttc.adapters.suites._livecodebench",
    "local_data": "ttc.adapters.suites._datadir",
    "make_suite": "ttc.adapters.suites._suites",
    "MathSuite": "ttc.adapters.suites._math",
    "MIXED_SOURCES": "ttc.adapters.suites._mixed",
    "MixedSuite": "ttc.adapters.suites._mixed",
    "no_local_data": "ttc.adapters.suites._datadir",
    "ReasoningGymSuite": "ttc.adapters.suites._reasoning_gym",
    "SuiteOptions": "ttc.adapters.suites._suites",
    "SUITES": "ttc.adapters.suites._suites",
    "Table": "ttc.adapters.suites._records",
    "TemplatedSuite": "ttc.adapters.suites._base",
}

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

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
