"""The `ttc` command line: the composition root, the one place where adapters are wired in."""

from ttc.engine.cli._commands import (
    EXIT_BUDGET,
    EXIT_INTERRUPTED,
    EXIT_PROVIDER,
    api_provider,
    role_provider_from,
    share_warmup,
)
from ttc.engine.cli._main import build_parser, main

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INTERRUPTED",
    "EXIT_PROVIDER",
    "api_provider",
    "build_parser",
    "main",
    "role_provider_from",
    "share_warmup",
]
