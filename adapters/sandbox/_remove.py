"""Removing a scratch directory on the host (when the sandbox has no private root) without ever
following a link, and sweeping those that a killed ttc left behind.

Removal goes through file descriptors only: each directory is opened relative to its parent's
descriptor with O_NOFOLLOW, its entries are unlinked relative to it, and a directory swapped for a
symbolic link meanwhile is unlinked as the link it has become; it never recurses in Python (any
depth). It runs only once no process of the run is left (see `_launch`). Permissions are restored
only when ttc is not root, that is, when the program ran as ttc's own uid and could have changed
any file that a followed link might reach anyway; root needs no permission to remove.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile

from ._proc import owner_gone, owner_tag

__all__ = ["owned_name", "remove_tree", "sweep"]

_log = logging.getLogger("ttc")

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def owned_name() -> str:
    """The prefix of this process's scratch directories: its tag (`_proc`) and a dash."""
    return owner_tag() + "-"


def _open_child(parent: int, name: str) -> int | None:
    """A descriptor of the directory `name` in `parent`, never through a link; None if it is not
    a directory (any more)."""
    try:
        return os.open(name, _OPEN_DIR, dir_fd=parent)
    except PermissionError:
        if os.geteuid() == 0:
            return None
        with contextlib.suppress(OSError):
            os.chmod(name, 0o700, dir_fd=parent)  # our own uid's tree: see the docstring
        with contextlib.suppress(OSError):
            return os.open(name, _OPEN_DIR, dir_fd=parent)
        return None
    except OSError:
        return None


def _clear(fd: int, skip: set[str]) -> str | None:
    """Unlinks the files of the directory `fd`; the name of a subdirectory left (not in `skip`),
    or None."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name in skip:
                continue
            try:
                mode = os.stat(entry.name, dir_fd=fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                return entry.name
            with contextlib.suppress(OSError):
                os.unlink(entry.name, dir_fd=fd)
    return None


def remove_tree(path: str) -> None:
    """Removes the directory `path`, however deep or odd, through descriptors; never raises (what
    remains is logged)."""
    head, name = os.path.split(os.path.abspath(path))
    try:
        top = os.open(head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    stack: list[tuple[int, str, int, set[str]]] = []
    try:
        fd = _open_child(top, name)
        if fd is None:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=top)
            return
        stack.append((top, name, fd, set()))
        while stack:
            parent, name, fd, skip = stack[-1]
            child = _clear(fd, skip)
            opened = None if child is None else _open_child(fd, child)
            if opened is not None and child is not None:
                stack.append((fd, child, opened, set()))
                continue
            if child is not None:  # a link now, or unreadable: unlink what it has become
                skip.add(child)
                with contextlib.suppress(OSError):
                    os.unlink(child, dir_fd=fd)
                with contextlib.suppress(OSError):
                    os.rmdir(child, dir_fd=fd)
                continue
            stack.pop()
            os.close(fd)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=parent)
    except OSError as exc:
        _log.warning("sandbox: could not remove the scratch directory %s: %s", path, exc)
    finally:
        for _, _, fd, _ in stack:
            os.close(fd)
        os.close(top)
    if os.path.lexists(path):
        _log.warning("sandbox: could not remove the scratch directory %s", path)


def sweep(directory: str | None = None) -> int:
    """Removes the scratch directories of ttc processes that are gone; how many."""
    where = directory or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(where) if owner_gone(n)]
    except OSError:
        return 0
    removed = 0
    for name in names:
        remove_tree(os.path.join(where, name))
        removed += 1
    return removed
