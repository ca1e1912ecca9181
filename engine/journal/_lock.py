"""One writer per run directory: an exclusive kernel lock held for as long as a process writes.

The lock is `flock` on a `.lock` file in the directory, so it cannot outlive its holder: the
kernel drops it when the process exits, however it ends (kill -9 included), and a resume right
after a crash finds the directory free. The file also names the holder (its pid and command
line), so a second writer is refused with who holds it. Readers (`ttc report`) take no lock.
A lock is held per open file, so two engines of one process on one directory exclude each other
as two processes do.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from types import TracebackType

from ttc.engine._util._nofollow import open_fd
from ttc.engine._util._secrets import redact_argv
from ttc.engine.contract._errors import ConfigError, WriteError

__all__ = ["LOCK_NAME", "RunLock"]

LOCK_NAME = ".lock"


class RunLock:
    """`with RunLock(path):` holds the exclusive lock of the file `path` (created if missing)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what  # what the lock guards, as the refusal names it
        self._fd: int | None = None

    @classmethod
    def of_dir(cls, directory: Path) -> RunLock:
        """The lock of a run directory (created if missing)."""
        return cls(directory / LOCK_NAME, str(directory))

    def acquire(self, *, announce: bool = True) -> RunLock:
        """Takes the lock at once, or raises ConfigError naming the process that holds it.
        `announce=False`: the file is not written yet (a resume that reads its journal first
        leaves a directory it refuses as it was); `announce()` does it later."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise WriteError(self.path, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"{self.what}: another process is writing it ({holder}); wait for it to end "
                "or stop it, then go on (two writers would buy samples twice)"
            ) from None
        self._fd = fd
        if announce:
            self.announce()
        return self

    def announce(self) -> None:
        """Names the holder in the file, for the refusal of a second writer; best effort (a full
        disk must not keep a run from starting: the lock is the flock, not this text)."""
        if self._fd is None:
            return
        # The command line without the credentials of its URLs: it is written, and printed.
        me = f"pid {os.getpid()}: {' '.join(redact_argv(sys.argv))[:300]}\n".encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, me, 0)
        except OSError:
            pass

    def release(self) -> None:
        """Gives the lock up (closing the file drops it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
