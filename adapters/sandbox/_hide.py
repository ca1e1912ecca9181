"""The directories a sandboxed program does not see: each is covered by an empty read-only tmpfs
in its mount namespace (by `_boot`), all but the system the interpreter needs.

Hidden, when they exist: the usual places of other users' and processes' files, the directory
holding this project, the caller's working directory, and any directory the caller names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

__all__ = ["PROJECT", "hidden"]

# Hidden from the program (each covered by an empty read-only tmpfs), with the directory holding
# this project, the caller's working directory and any the caller names, when they exist.
_HIDDEN = (
    "/home",
    "/root",
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/dev/mqueue",
    "/run/user",
    "/run/lock",
)
# Never hidden, nor any directory above them: the system the interpreter needs.
_ESSENTIAL = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var",
    "/boot",
)
# The project's root (this file is adapters/sandbox/_hide.py).
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _maskable(path: str) -> bool:
    return path != "/" and not any(e == path or e.startswith(path + "/") for e in _ESSENTIAL)


def hidden(extra: Iterable[str] = ()) -> list[str]:
    """The directories a program with a mount namespace does not see (those that exist)."""
    found: list[str] = []
    candidates = [*_HIDDEN, PROJECT, *extra]
    with contextlib.suppress(OSError):
        candidates.append(os.getcwd())
    for path in candidates:
        real = os.path.realpath(path)
        if real not in found and _maskable(real) and os.path.isdir(real):
            found.append(real)
    return found
