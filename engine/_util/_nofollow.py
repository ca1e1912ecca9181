"""Files ttc writes, opened so that no write follows a symbolic link.

A run directory (`--out`), the output of `ttc batch` and their neighbours may have been made by
someone else: a link planted as `.lock`, `run.log` or `.summary.json.tmp` would otherwise have
ttc (run by root, say) truncate and overwrite whatever file it points to. Every file ttc writes
is opened here: `O_NOFOLLOW` (a link as the last component is refused, ELOOP, said plainly) and
`O_CLOEXEC`, relative to its directory's descriptor (`openat`); a temporary file is created
afresh (`O_EXCL`) after any file of its name is removed, and then renamed over its target (a
rename replaces a link, never writes through it).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

__all__ = ["LINK_REFUSED", "open_fd", "open_file", "temp_file"]

LINK_REFUSED = "a symbolic link, which ttc never writes through (someone may have planted it)"

_MODES = {
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "r+b": os.O_RDWR,
}


@contextlib.contextmanager
def _directory(path: Path) -> Iterator[int]:
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def open_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    """`os.open(path, flags)` that refuses a symbolic link (OSError ELOOP, saying so)."""
    with _directory(path) as dir_fd:
        try:
            return os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OSError(errno.ELOOP, LINK_REFUSED, str(path)) from None
            raise


def open_file(path: Path, mode: str) -> BinaryIO:
    """`path.open(mode)` for "wb", "ab" or "r+b", refusing a symbolic link."""
    return cast(BinaryIO, os.fdopen(open_fd(path, _MODES[mode]), mode))


def temp_file(path: Path) -> BinaryIO:
    """A new file at `path` for writing (a temporary one, to be renamed): whatever was there
    (a stale one, or a link) is removed first, and the new one is created exclusively."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return cast(BinaryIO, os.fdopen(open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb"))
