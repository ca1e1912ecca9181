"""Packages whose public names load on first use: importing a package for one name (the CLI
for `ttc batch`, an adapter for its contract) does not import every module the package holds.

A package lists each name's home module in `_HOMES`, imports the names under `TYPE_CHECKING`
(`from home import Name as Name`) for the type checker, and takes its `__getattr__` and
`__dir__` from `lazy_names`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose public names live in `homes`."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # loaded once: later reads are plain
        return value

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__
