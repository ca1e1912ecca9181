"""ttc: adaptive test-time compute with evolving in-context demonstrations."""

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    # Read on first use: importlib.metadata costs every command a tenth of a second to load.
    if name != "__version__":
        raise AttributeError(f"module 'ttc' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("ttc")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found
