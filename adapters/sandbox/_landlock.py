"""Whether the kernel offers Landlock to this process, and which version of it.

Landlock is what an unprivileged process may still do where namespaces are refused (Docker's
default seccomp profile, a user without user namespaces): a process restricts itself, for good, to
a list of paths (`_confine` builds the list and applies it in the child, after the privileges are
gone and before seccomp). Each ABI version adds what the kernel can refuse: 1 (Linux 5.13) the
file accesses, 2 links and renames across directories, 3 truncation, 4 TCP bind and connect,
5 device ioctls, 6 signals to and abstract unix sockets of processes outside the domain.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["LANDLOCK_SYSCALLS", "abi"]

LANDLOCK_SYSCALLS = (444, 445, 446)
"""landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: one number on every
architecture (they came after the numbers were unified)."""
_CREATE_RULESET_VERSION = 1  # the flag that asks for the ABI version instead of a ruleset


def abi() -> tuple[int, str]:
    """(The Landlock ABI version this kernel offers, 0 for none; why there is none, in words)."""
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return 0, "no syscall() in this C library"
    syscall.restype = ctypes.c_long
    version = int(syscall(LANDLOCK_SYSCALLS[0], None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION))
    if version > 0:
        return version, f"Landlock ABI {version}"
    err = ctypes.get_errno()
    if err == 38:  # ENOSYS
        return 0, "the kernel has no Landlock (older than 5.13, or built without it)"
    if err == 95:  # EOPNOTSUPP
        return 0, "Landlock is built in but not enabled (boot with lsm=...,landlock)"
    return 0, f"Landlock refused: {os.strerror(err)}"
