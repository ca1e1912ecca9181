"""ttc: adaptive test-time compute with evolving in-context demonstrations."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ttc")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
