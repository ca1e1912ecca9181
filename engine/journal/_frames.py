"""The compact journal: the same JSON lines, in zlib frames, one frame per write of the writer.

A run's journal at a million questions is mostly response texts (5.4 GB as plain lines); in
frames it is a small fraction of that. The lines themselves do not change: `lines` reads them
back from either form, and `python -m ttc.engine.journal RUN_DIR` prints them as plain JSON
lines (for `jq`, `grep`).

The file is `MAGIC` (its last byte the format's version), then frames. A frame is a header
(flags, the payload's length, the payload's CRC-32; big-endian) and its payload: raw deflate
bytes ended by a sync flush, so that a frame decodes to whole lines given the frames before it
in its stream. Each session that opens the file (a run, each resume) starts a stream of its own
(`NEW` in its first frame's flags), so a frame never depends on anything written before the
journal was last opened; within a session, the frames share the deflate window, and a write of
a single line compresses about as well as a large one.

The crash guarantees are those of a plain journal, frame for line:
- a frame is written in one write, after every frame before it; what the OS has is read back;
- a torn last frame (a kill in the middle of a write: its header or payload cut short, or a
  payload whose CRC does not match) is left out when read, and cut off when the file is opened
  again (`whole_size`); the frames before it are untouched;
- a bad frame that is not the last one is a DataError naming it, never skipped.

A plain journal (every journal before this format; its first byte `{`) is read as it always
was, and a resumed run goes on writing it plain: one file is never both.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ttc.engine._util._records import read_lines, unreadable
from ttc.engine.contract._errors import DataError

__all__ = ["MAGIC", "Deflater", "compact", "is_compact", "lines", "whole_size"]

# Not JSON and not text (as PNG's signature), so that a plain journal is never taken for one;
# the last byte is the format's version.
MAGIC = b"\x89ttcj\r\n\x01"
_HEADER = struct.Struct(">BII")  # flags, payload length, payload CRC-32
NEW = 1  # the first frame of a session: a fresh deflate stream
# The deflate level: 1, the fastest, is within a few percent of the best ratio zlib gives on
# journal lines written a few at a time, at a third of the CPU of the default level 6.
LEVEL = 1
_CHUNK = 1 << 20
# A claimed payload longer than this is a corrupt header, not a torn write: never cut.
_MAX_PAYLOAD = 1 << 30


class Deflater:
    """One session's frames: `frame(data)` is whole lines as one frame, ready to write."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
        self._flags = NEW

    def frame(self, data: bytes) -> bytes:
        """One frame of `data` (whole lines); zlib lets other threads run as it compresses."""
        payload = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        flags, self._flags = self._flags, 0
        return _HEADER.pack(flags, len(payload), zlib.crc32(payload)) + payload


def is_compact(head: bytes) -> bool:
    """Whether a file opening with `head` (its first bytes) is a compact journal, or a torn
    start of one; an empty file is neither."""
    n = min(len(head), len(MAGIC))
    return n > 0 and head[:n] == MAGIC[:n]


def lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) of a journal, plain or compact; a torn last line
    or frame is left out. A journal that does not exist has no lines."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise unreadable(path, exc) from None
    with fh:
        if not is_compact(fh.read(len(MAGIC))):
            fh.close()
            yield from read_lines(path, torn_tail=True)
            return
        lineno = 0
        for text in _texts(path, fh):
            for line in text.splitlines():
                lineno += 1
                yield lineno, line


def _texts(path: Path, fh: IO[bytes]) -> Iterator[bytes]:
    """The text of each whole frame of an open compact journal, read past its `MAGIC`."""
    size = path.stat().st_size
    at = len(MAGIC)
    inflate = None
    try:
        while (frame := _frame(path, fh, at, size, inflate is None)) is not None:
            flags, payload = frame
            if flags & NEW:
                inflate = zlib.decompressobj(-15)
            assert inflate is not None
            text = inflate.decompress(payload)
            if text and not text.endswith(b"\n"):
                raise DataError(f"{path}: corrupt journal frame at byte {at} (a cut line)")
            yield text
            at += _HEADER.size + len(payload)
    except zlib.error:
        raise DataError(f"{path}: corrupt journal frame at byte {at} (not deflate)") from None
    except OSError as exc:
        raise unreadable(path, exc) from None


def _frame(path: Path, fh: IO[bytes], at: int, size: int, first: bool) -> tuple[int, bytes] | None:
    """The frame at byte `at` (flags, payload); None at the end, or for a torn last frame."""
    header = fh.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None  # the end, or a torn header
    flags, length, crc = _HEADER.unpack(header)
    end = at + _HEADER.size + length
    if flags & ~NEW or length > _MAX_PAYLOAD or (first and not flags & NEW):
        raise DataError(f"{path}: corrupt journal frame at byte {at}")
    if end > size:
        return None  # a torn payload
    payload = fh.read(length)
    if zlib.crc32(payload) != crc:
        if end == size:
            return None  # the last frame, torn (its bytes never all reached the disk)
        raise DataError(f"{path}: corrupt journal frame at byte {at} (its CRC)")
    return flags, payload


def whole_size(path: Path) -> int:
    """The size of a compact journal up to its last whole frame (its `MAGIC` alone: none; 0
    for a torn `MAGIC`): where a reopened journal goes on. Only headers are read, and the last
    frame's payload; a corrupt header is a DataError (never a cut)."""
    size = path.stat().st_size
    if size < len(MAGIC):
        return 0
    with path.open("rb", buffering=_CHUNK) as fh:
        fh.seek(len(MAGIC))
        at = len(MAGIC)
        last: tuple[int, int, int] | None = None  # the last whole frame: start, length, CRC
        while at + _HEADER.size <= size:
            flags, length, crc = _HEADER.unpack(fh.read(_HEADER.size))
            if flags & ~NEW or length > _MAX_PAYLOAD:
                raise DataError(f"{path}: corrupt journal frame at byte {at}")
            end = at + _HEADER.size + length
            if end > size:
                break
            last = (at, length, crc)
            fh.seek(length, 1)  # within the buffer: no system call
            at = end
        if last is not None and last[0] + _HEADER.size + last[1] == size:
            fh.seek(last[0] + _HEADER.size)
            if zlib.crc32(fh.read(last[1])) != last[2]:
                return last[0]  # the last frame, torn
        return at


def compact(data: bytes) -> bytes:
    """A whole compact journal of `data` (whole lines): a file written at once."""
    return MAGIC + Deflater().frame(data)
