"""The limits of a sandboxed process: its rlimits (set by `_boot` before the program's first line),
and an environment with nothing inherited.

Soft = hard for every rlimit, so the program cannot raise them; RLIMIT_NPROC counts every task of
the program's uid, so it is what the uid has now plus `NPROC`.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal
from typing import Any

from ._proc import stat_fields
from ._result import RunOptions

__all__ = ["NOBODY", "NPROC", "PRCTL", "cpu_limit", "environment", "pdeathsig", "rlimits"]

NOBODY = 65534
"""The uid and gid a program runs as when the sandbox runs as root."""
_NOFILE = 64
NPROC = 64
"""Processes (threads) a program may add to those its uid already has (and its cgroup's limit)."""
_PR_SET_PDEATHSIG = 1

try:  # Linux only: prctl for the parent-death signal
    PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    PRCTL = None


def rlimits(uid: int, options: RunOptions, nproc: bool = True) -> tuple[tuple[int, int], ...]:
    """The (rlimit, value) pairs of a run: CPU (the CPU budget, at least 1 s), AS, NPROC (unless
    `nproc` is False: a pids cgroup of the run's own limits it, where RLIMIT_NPROC would count
    every other process of the uid), FSIZE (the output cap + 1 byte, per file), NOFILE and CORE
    (0)."""
    pairs = [
        (resource.RLIMIT_CPU, cpu_limit(options.timeout_s, options.cpu_s)),
        (resource.RLIMIT_AS, options.memory_mb << 20),
        (resource.RLIMIT_FSIZE, options.max_output_bytes + 1),
        (resource.RLIMIT_NOFILE, _NOFILE),
        (resource.RLIMIT_CORE, 0),
    ]
    if nproc:
        pairs.insert(2, (resource.RLIMIT_NPROC, _nproc_limit(uid)))
    return tuple(pairs)


def cpu_limit(timeout_s: float, cpu_s: float | None) -> int:
    """RLIMIT_CPU in whole seconds: `cpu_s`, else the wall-clock limit rounded up plus one.

    Without a CPU limit of its own, the wall clock is the limit and RLIMIT_CPU only a backstop
    (for a program whose threads burn CPU faster than the clock runs): set equal to the wall
    limit, a single-threaded loop would race the wall-clock timer on a loaded machine, and be
    reported as out of CPU time one run in a few.
    """
    if cpu_s is not None:
        return max(1, math.ceil(cpu_s))
    return math.ceil(timeout_s) + 1


def pdeathsig() -> None:
    """Between fork and exec: SIGKILL when the parent dies (for a wrapper that cannot set it)."""
    if PRCTL is not None:
        PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def environment(scratch: str) -> dict[str, str]:
    """The program's whole environment: nothing of the parent's (no API key) is visible."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


def _nproc_limit(uid: int) -> int:
    """RLIMIT_NPROC for a program run as `uid`: the tasks the uid has now, plus NPROC.

    The kernel counts every process and thread of the real uid against the limit, not only
    the program's.
    """
    if uid == 0:
        return NPROC  # not enforced for root
    count = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return NPROC
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                fields = stat_fields(int(entry.name))
                count += int(fields[17]) if fields is not None else 0  # num_threads
            except (OSError, ValueError, IndexError):
                continue
    return count + NPROC
