"""The `ttc` command line: the composition root, the one place where adapters are wired in.

A run is described by a typed `RunSpec` (made from the flags by `RunSpec.from_args`, or directly
by `benchmarks/paper.py`) and wired by functions that take it: `suite_and_items`, `run_config`,
`provider_from`, `role_provider_from`, `wire` and `make_engine`.
"""

from ttc.engine.cli._batchmode import BatchSpec, add_batch_flags, batch_spec
from ttc.engine.cli._commands import (
    EXIT_BUDGET,
    EXIT_INTERRUPTED,
    EXIT_PROVIDER,
    share_warmup,
)
from ttc.engine.cli._main import main
from ttc.engine.cli._parser import build_parser
from ttc.engine.cli._progress import Progress
from ttc.engine.cli._spec import ProviderSpec, RunSpec, SuiteSpec, paper_decoding
from ttc.engine.cli._usage import parse_limit, ttc_command
from ttc.engine.cli._wiring import (
    Wired,
    api_provider,
    make_engine,
    make_suite,
    provider_from,
    role_provider_from,
    run_config,
    suite_and_items,
    wire,
)

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
    "wire",
]
