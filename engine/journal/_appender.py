"""An append-only file of lines written by a thread of its own: whoever appends never waits for
the disk (the event loop, above all).

What it guarantees (the journal's crash guarantees rest on these):
- Order: lines reach the file in the order they were appended, and none after one that failed.
- Promptness: the writer thread wakes when a line is appended to an empty queue, lets the
  lines of the next `_GATHER_S` (20 ms) gather, and hands the OS, in one write, every line
  appended meanwhile. Each write costs the appending thread the GIL handed to the writer and
  back, whatever its size: writing every 20 ms instead of every millisecond cut `ttc batch`'s
  CPU at zero latency by 6.5% (and one write per line cost a fifth). A line reaches the OS within
  about 25 ms (under load, the writer also waits up to the interpreter's switch interval, 5 ms,
  to run), after which it survives the process being killed (SIGKILL included): a killed
  process loses the lines of its last few tens of milliseconds at most. `flush`, `sync` and
  `close` cut the gathering short.
- Durability on demand: `sync` returns once every line appended before it has been written and
  fsynced (it survives a machine crash); `close` writes every line, fsyncs and closes. Both block
  their caller: async code calls them in a thread (`_offloop.in_thread`).
- Errors: a write that fails (a full disk) cuts the file back to its last whole line and stops
  the writer; the lines appended since are dropped, and the next `append`, `flush`, `sync` or
  `close` raises the failure as a WriteError (`close` only if nothing raised it before).
- A torn last line (a process killed in the middle of a write) is cut off when the file is
  opened again.
- Compact (`compact=True`, a run's journal): a new file is written in zlib frames, one per write
  (`_frames`), compressed by the writer thread, so appending costs what it did; each guarantee
  above holds frame for line (a torn last frame is cut when the file is opened again). A file
  already holding plain lines (a journal from before) goes on plain.
- A process that exits without closing (an interpreter exit, not a kill) still writes what was
  appended: an `atexit` hook flushes every open file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from pathlib import Path

from ttc.engine._util._nofollow import open_fd
from ttc.engine.contract._errors import DataError, WriteError
from ttc.engine.journal._frames import MAGIC, Deflater, is_compact, whole_size

__all__ = ["Appender"]

# How long the writer lets lines gather once woken, before it writes them in one go (unless a
# `flush`, `sync` or `close` waits for them).
_GATHER_S = 0.02

_TAIL_CHUNK = 1 << 16


def _whole_lines_size(fd: int) -> int:
    """The size of the file up to its last newline, read backwards from its end."""
    pos = os.fstat(fd).st_size
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        chunk = os.pread(fd, pos - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        pos = start
    return 0


class Appender:
    """Appends lines (bytes ending in a newline) to `path` through a writer thread; `compact`:
    a new file is written in frames."""

    def __init__(self, path: Path, *, compact: bool = False) -> None:
        self.path = path
        self.compact = compact  # once open: whether the file is written in frames
        self._fd: int | None = None
        # The condition's own lock, taken directly where no wait is needed (`append`, on the
        # event loop's thread for every line): a `with` on the lock costs no Python frame.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: list[bytes] = []
        self._waiting = False  # the writer waits for a line: the next append wakes it
        self._hurry = False  # a `flush` waits: the writer stops gathering and writes
        # The bytes of the lines appended, and written (plain: the file's size then).
        self._appended = 0
        self._written = 0
        self._size = 0  # the file's size as the OS has it
        self._deflater: Deflater | None = None  # compact: this session's frames
        self._magic = False  # compact: MAGIC is still to be written (with the first frame)
        self._failure: OSError | str | None = None
        self._raised = False
        self._closing = False
        self._thread: threading.Thread | None = None

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def open(self) -> None:
        """Opens (creating) the file, cuts a torn last line or frame, and starts the writer."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = open_fd(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise WriteError(self.path, exc) from exc
        try:
            size, compact = self._whole_size(fd)
            if size != os.fstat(fd).st_size:
                os.ftruncate(fd, size)
        except OSError as exc:
            os.close(fd)
            raise WriteError(self.path, exc) from exc
        except DataError:
            os.close(fd)
            raise
        self._fd = fd
        self.compact = compact
        self._deflater = Deflater() if compact else None
        self._magic = compact and size == 0
        # Plain: a line's offset is its place in the file; compact: in the text of this session.
        self._appended = self._written = 0 if compact else size
        self._size = size
        self._failure, self._raised, self._closing, self._hurry = None, False, False, False
        self._thread = threading.Thread(
            target=self._run, args=(fd,), name=f"ttc-writer:{self.path.name}", daemon=True
        )
        self._thread.start()
        atexit.register(self._at_exit)

    def _whole_size(self, fd: int) -> tuple[int, bool]:
        """Where the file goes on (its size without a torn tail), and whether it is compact."""
        if is_compact(os.pread(fd, len(MAGIC), 0)):
            return whole_size(self.path), True
        if os.fstat(fd).st_size == 0:
            return 0, self.compact
        return _whole_lines_size(fd), False

    def append(self, line: bytes) -> int:
        """Hands one line to the writer and returns at once; returns the line's byte offset
        (in a compact file, in the text this session appends)."""
        with self._lock:
            if self._fd is None:
                raise RuntimeError(f"{self.path} is not open")
            self._raise_failure()
            offset = self._appended
            self._queue.append(line)
            self._appended += len(line)
            if self._waiting:  # else the writer is writing, or gathering: it will look again
                self._cond.notify_all()  # all: a `flush` may wait on the same condition
        return offset

    def extend(self, lines: list[bytes]) -> None:
        """Hands several lines to the writer at once, in order (one taking of the lock)."""
        with self._lock:
            if self._fd is None:
                raise RuntimeError(f"{self.path} is not open")
            self._raise_failure()
            self._queue.extend(lines)
            self._appended += sum(map(len, lines))
            if self._waiting:
                self._cond.notify_all()

    def flush(self) -> None:
        """Blocks until every line appended so far has reached the OS."""
        with self._cond:
            target = self._appended
            if self._written < target:
                self._hurry = True
                self._cond.notify_all()
            while self._written < target and self._failure is None:
                self._cond.wait()
            self._raise_failure()

    def sync(self) -> None:
        """Blocks until every line appended so far is written and fsynced."""
        self.flush()
        fd = self._fd
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:
                raise WriteError(self.path, exc) from exc

    def close(self) -> None:
        """Writes every line appended, fsyncs and closes (blocking); a failure not yet raised
        is raised here."""
        if self._fd is None:
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        atexit.unregister(self._at_exit)
        fd, self._fd = self._fd, None
        try:
            if self._failure is not None:
                if not self._raised:
                    self._raise_failure()
                return
            os.fsync(fd)
        except OSError as exc:
            raise WriteError(self.path, exc) from exc
        finally:
            os.close(fd)

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is None:
            return
        self._raised = True
        if isinstance(failure, OSError):
            raise WriteError(self.path, failure) from failure
        raise WriteError(self.path, failure)

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.flush()

    @staticmethod
    def _write(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:  # os.write may write less than asked (a full disk, a signal)
            view = view[os.write(fd, view) :]

    def _run(self, fd: int) -> None:
        try:
            self._drain(fd)
        except BaseException as exc:  # a bug, not the disk: said, never a silent hang
            with self._cond:
                self._failure = f"the writer thread failed ({exc!r})"
                self._cond.notify_all()

    def _drain(self, fd: int) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._waiting = True
                    self._cond.wait()
                    self._waiting = False
                if not self._queue:
                    return
                if not (self._hurry or self._closing):
                    self._cond.wait(_GATHER_S)  # `append` does not notify meanwhile
                self._hurry = False
                lines, self._queue = self._queue, []
                start = self._written
            data = lines[0] if len(lines) == 1 else b"".join(lines)
            out = data
            if self._deflater is not None:  # compressed here, off the appending thread
                out = self._deflater.frame(data)
                if self._magic:
                    out, self._magic = MAGIC + out, False
            try:
                self._write(fd, out)
            except OSError as exc:
                self._fail(fd, start, lines, exc)
                return
            with self._cond:
                self._written = start + len(data)
                self._size += len(out)
                self._cond.notify_all()

    def _fail(self, fd: int, start: int, lines: list[bytes], exc: OSError) -> None:
        """Keeps the lines of the failed write that reached the file whole, cuts the rest (a
        frame is whole or cut)."""
        kept, written = self._size, start
        with contextlib.suppress(OSError):
            size = os.fstat(fd).st_size
            for line in lines if self._deflater is None else ():
                if kept + len(line) > size:
                    break
                kept += len(line)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, kept)
        with self._cond:
            self._failure = exc
            self._written = written if self._deflater is not None else kept
            self._size = kept
            self._queue.clear()
            self._cond.notify_all()
