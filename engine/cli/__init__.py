"""The `ttc` command line: the composition root, the one place where adapters are wired in.

A run is described by a typed `RunSpec` (made from the flags by `RunSpec.from_args`, or directly
by `benchmarks/paper.py`) and wired by functions that take it: `suite_and_items`, `run_config`,
`provider_from`, `role_provider_from`, `wire` and `make_engine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.engine.cli._batchmode import BatchSpec as BatchSpec
    from ttc.engine.cli._batchmode import add_batch_flags as add_batch_flags
    from ttc.engine.cli._batchmode import batch_spec as batch_spec
    from ttc.engine.cli._commands import EXIT_BUDGET as EXIT_BUDGET
    from ttc.engine.cli._commands import EXIT_INTERRUPTED as EXIT_INTERRUPTED
    from ttc.engine.cli._commands import EXIT_PROVIDER as EXIT_PROVIDER
    from ttc.engine.cli._commands import share_warmup as share_warmup
    from ttc.engine.cli._main import console as console
    from ttc.engine.cli._main import main as main
    from ttc.engine.cli._main import tune_collector as tune_collector
    from ttc.engine.cli._parser import build_parser as build_parser
    from ttc.engine.cli._progress import Progress as Progress
    from ttc.engine.cli._spec import ProviderSpec as ProviderSpec
    from ttc.engine.cli._spec import RunSpec as RunSpec
    from ttc.engine.cli._spec import SuiteSpec as SuiteSpec
    from ttc.engine.cli._spec import paper_decoding as paper_decoding
    from ttc.engine.cli._usage import parse_limit as parse_limit
    from ttc.engine.cli._usage import ttc_command as ttc_command
    from ttc.engine.cli._wiring import Wired as Wired
    from ttc.engine.cli._wiring import api_provider as api_provider
    from ttc.engine.cli._wiring import make_engine as make_engine
    from ttc.engine.cli._wiring import make_suite as make_suite
    from ttc.engine.cli._wiring import provider_from as provider_from
    from ttc.engine.cli._wiring import role_provider_from as role_provider_from
    from ttc.engine.cli._wiring import run_config as run_config
    from ttc.engine.cli._wiring import suite_and_items as suite_and_items
    from ttc.engine.cli._wiring import wire as wire

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "add_batch_flags": "ttc.engine.cli._batchmode",
    "api_provider": "ttc.engine.cli._wiring",
    "batch_spec": "ttc.engine.cli._batchmode",
    "BatchSpec": "ttc.engine.cli._batchmode",
    "build_parser": "ttc.engine.cli._parser",
    "EXIT_BUDGET": "ttc.engine.cli._commands",
    "EXIT_INTERRUPTED": "ttc.engine.cli._commands",
    "EXIT_PROVIDER": "ttc.engine.cli._commands",
    "console": "ttc.engine.cli._main",
    "main": "ttc.engine.cli._main",
    "tune_collector": "ttc.engine.cli._main",
    "make_engine": "ttc.engine.cli._wiring",
    "make_suite": "ttc.engine.cli._wiring",
    "paper_decoding": "ttc.engine.cli._spec",
    "parse_limit": "ttc.engine.cli._usage",
    "Progress": "ttc.engine.cli._progress",
    "provider_from": "ttc.engine.cli._wiring",
    "ProviderSpec": "ttc.engine.cli._spec",
    "role_provider_from": "ttc.engine.cli._wiring",
    "run_config": "ttc.engine.cli._wiring",
    "RunSpec": "ttc.engine.cli._spec",
    "share_warmup": "ttc.engine.cli._commands",
    "suite_and_items": "ttc.engine.cli._wiring",
    "SuiteSpec": "ttc.engine.cli._spec",
    "ttc_command": "ttc.engine.cli._usage",
    "wire": "ttc.engine.cli._wiring",
    "Wired": "ttc.engine.cli._wiring",
}

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INTERRUPTED",
    "EXIT_PROVIDER",
    "BatchSpec",
    "Progress",
    "ProviderSpec",
    "RunSpec",
    "SuiteSpec",
    "Wired",
    "add_batch_flags",
    "api_provider",
    "batch_spec",
    "build_parser",
    "console",
    "main",
    "make_engine",
    "make_suite",
    "paper_decoding",
    "parse_limit",
    "provider_from",
    "role_provider_from",
    "run_config",
    "share_warmup",
    "suite_and_items",
    "ttc_command",
    "tune_collector",
    "wire",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
