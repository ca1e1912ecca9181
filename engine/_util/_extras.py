"""Optional dependencies of the exports, imported only when asked for, with a one-line error
naming the extra that installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ttc.engine.contract._errors import ConfigError

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """`module`, imported; a ConfigError naming `pip install 'ttc[extra]'` if it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{module} is not installed: install the {extra!r} extra (pip install 'ttc[{extra}]')"
        ) from exc
