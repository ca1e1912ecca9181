"""The response cache's file when it is corrupt: how to tell, and moving it aside.

SQLite says a file is not a database (SQLITE_NOTADB) or is damaged (SQLITE_CORRUPT, "database
disk image is malformed"), at open or at any later query. The cache is an optimisation, so such a
file is renamed to `<name>.corrupt-<time>`, its WAL files with it (a stale WAL must not meet the
fresh file that takes its place), with a one-line warning; `_cache` then opens a fresh one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path

from ttc.engine.contract._errors import ConfigError

log = logging.getLogger("ttc")

# SQLite's names for a file that is not a database, or a damaged one.
_CORRUPTION = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class CorruptCache(Exception):
    """The cache file is not a database, or a damaged one."""


def is_corrupt(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is not a database, or a damaged one."""
    name = (exc.sqlite_errorname or "") if isinstance(exc, sqlite3.Error) else ""
    return name.startswith(_CORRUPTION)


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None: which file a name holds now."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def move_aside(path: Path, why: str) -> Path:
    """Renames the corrupt cache `path` (and its WAL files) to `<name>.corrupt-<time>`, warns in
    one line; ConfigError if it cannot be renamed."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{suffix}", f"{target}{suffix}")
    except OSError as exc:
        raise ConfigError(
            f"response cache {path} is corrupt ({why}) and cannot be moved aside "
            f"({exc.strerror or exc}); delete it, or run with --no-cache"
        ) from None
    log.warning(
        "response cache %s is corrupt (%s): moved aside to %s; going on with a fresh cache",
        path,
        why,
        target.name,
    )
    return target
