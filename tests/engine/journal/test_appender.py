"""The journal's writer thread keeps the crash guarantees: lines in order, each at the OS within
moments of its append (a SIGKILL loses nothing older), a full disk surfaces as WriteError with
whole lines left, close drains; and an append never makes the event loop wait for the disk."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from ttc.engine import RoundEnded, RunStarted, WriteError
from ttc.engine.journal import _appender, read_journal
from ttc.engine.journal._appender import Appender
from ttc.engine.journal._frames import MAGIC, whole_size
from ttc.engine.journal._journal import Journal


def started(i: int) -> RunStarted:
    return RunStarted(resumed=False, t=float(i))


def test_lines_land_in_order_at_the_offsets_append_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Appender._write
    writes: list[int] = []

    def slowly(fd: int, data: bytes) -> None:  # a slow disk: lines pile up between writes
        writes.append(data.count(b"\n"))
        time.sleep(0.002)
        real(fd, data)

    monkeypatch.setattr(Appender, "_write", staticmethod(slowly))
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        offsets = [journal.append(started(i)) for i in range(500)]
    data = path.read_bytes()
    assert [e["t"] for e in read_journal(path)] == [float(i) for i in range(500)]
    for i, offset in enumerate(offsets):
        assert orjson.loads(data[offset : data.index(b"\n", offset)])["t"] == float(i)
    assert sum(writes) == 500
    assert len(writes) < 500  # the writer took what piled up in one write


@pytest.mark.parametrize("compact", [False, True])
def test_events_extended_together_land_in_order_among_those_appended(
    tmp_path: Path, compact: bool
) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path, compact=compact) as journal:
        journal.append(started(0))
        journal.extend([started(i) for i in range(1, 40)])
        journal.extend([])
        journal.append(started(40))
    lines = list(read_journal(path))
    assert [e["t"] for e in lines] == [float(i) for i in range(41)]
    assert all(isinstance(e["at"], float) for e in lines)  # each with its time stamp


def test_an_event_that_cannot_be_written_leaves_the_others_written(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        with pytest.raises(KeyError):  # no event kind: a bug in the caller
            journal.extend([started(0), started(1), object(), started(3)])  # type: ignore[list-item]
        journal.append(started(4))
    assert [e["t"] for e in read_journal(path)] == [0.0, 1.0, 3.0, 4.0]


def test_extending_after_a_failed_write_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "journal.jsonl").open()
    monkeypatch.setattr(Appender, "_write", staticmethod(fills_up_halfway))
    journal.append(started(0))
    with pytest.raises(WriteError, match="No space left on device"):
        journal.flush()
    with pytest.raises(WriteError, match="No space left on device"):
        journal.extend([started(1), started(2)])
    journal.close()
    assert list(read_journal(tmp_path / "journal.jsonl")) == []


@pytest.mark.parametrize("form", ["plain", "compact"])
def test_flush_and_close_do_not_wait_for_the_writer_to_gather(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """The writer gathers lines for a while before each write (fewer GIL hand-overs); a caller
    that needs them written (`flush`, `sync`, `close`, the exit hook) does not wait that out."""
    monkeypatch.setattr(_appender, "_GATHER_S", 600.0)
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, compact=form == "compact")
    journal.open()
    took: list[float] = []
    for batch in range(3):
        for i in range(10):
            journal.append(started(10 * batch + i))
        began = time.monotonic()
        journal.flush() if batch != 1 else journal.sync()
        took.append(time.monotonic() - began)
        assert [e["t"] for e in read_journal(path)] == [float(i) for i in range(10 * batch + 10)]
    journal.append(started(30))
    began = time.monotonic()
    journal.close()
    took.append(time.monotonic() - began)
    assert len(list(read_journal(path))) == 31
    assert max(took) < 60, took  # not the 600 s gathering (a loaded machine is slow, not that)


def test_reopening_appends_after_the_last_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.append(started(0))
    whole = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"ev":"start","res')  # a kill in the middle of a write
    with Journal(path) as journal:
        assert journal.append(started(1)) == len(whole)
    assert [e["t"] for e in read_journal(path)] == [0.0, 1.0]


def test_flush_waits_for_every_line_appended(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path).open()
    try:
        for i in range(100):
            journal.append(started(i))
        journal.flush()  # read back while the journal is open, as `ttc batch` does
        assert len(path.read_bytes().splitlines()) == 100
    finally:
        journal.close()


KILLED = """
import sys, time
from pathlib import Path
from ttc.engine import RunStarted
from ttc.engine.journal._journal import Journal
journal = Journal(Path(sys.argv[1]), compact=sys.argv[2] == "compact").open()
for i in range(200):
    journal.append(RunStarted(resumed=False, t=float(i)))
print("appended", flush=True)
while True:  # a busy loop thread: the writer must still get its turn
    sum(range(1000))
"""


@pytest.mark.parametrize("form", ["plain", "compact"])
def test_a_line_appended_survives_a_sigkill_moments_later(tmp_path: Path, form: str) -> None:
    path = tmp_path / "journal.jsonl"
    with subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path), form],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "appended"
            time.sleep(0.2)  # the guarantee is a few milliseconds
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
    assert [e["t"] for e in read_journal(path)] == [float(i) for i in range(200)]
    assert path.read_bytes().startswith(MAGIC) == (form == "compact")


def fills_up_halfway(fd: int, data: bytes) -> None:
    """A disk that fills up halfway through this write: part of it reaches the file."""
    os.write(fd, data[: len(data) // 2])
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("compact", [False, True])
def test_a_full_disk_leaves_whole_lines_and_raises_at_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool
) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, compact=compact).open()
    journal.append(started(0))
    journal.flush()
    monkeypatch.setattr(Appender, "_write", staticmethod(fills_up_halfway))
    for i in range(1, 6):
        journal.append(started(i))
    with pytest.raises(WriteError, match="No space left on device"):
        journal.flush()
    with pytest.raises(WriteError, match="No space left on device"):
        journal.append(started(6))  # nothing is written after a line that failed
    journal.close()  # raised already: closing says it no more
    data = path.read_bytes()
    assert data.endswith(b"\n") != compact
    times = [e["t"] for e in read_journal(path)]
    assert times == [float(i) for i in range(len(times))]  # a prefix, in order
    assert 1 <= len(times) < 6
    if compact:  # a frame is whole or cut: the file is its whole frames, and goes on
        assert whole_size(path) == len(data)
        monkeypatch.undo()
        with Journal(path, compact=True) as again:
            again.append(started(9))
        assert [e["t"] for e in read_journal(path)] == [*times, 9.0]


@pytest.mark.parametrize("compact", [False, True])
def test_a_failure_nothing_raised_yet_is_raised_by_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool
) -> None:
    monkeypatch.setattr(Appender, "_write", staticmethod(fills_up_halfway))
    journal = Journal(tmp_path / "journal.jsonl", compact=compact).open()
    journal.append(started(0))
    with pytest.raises(WriteError, match="No space left on device"):
        journal.close()
    assert (tmp_path / "journal.jsonl").read_bytes() == b""  # the torn half is cut off


@pytest.mark.parametrize("compact", [False, True])
def test_close_writes_everything_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compact: bool
) -> None:
    real = Appender._write

    def slowly(fd: int, data: bytes) -> None:
        time.sleep(0.05)
        real(fd, data)

    monkeypatch.setattr(Appender, "_write", staticmethod(slowly))
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, compact=compact).open()
    for i in range(50):
        journal.append(RoundEnded(i, 1, 1, 0, 0.0, 0, 0, 0.0))
    journal.close()
    assert [e["round"] for e in read_journal(path)] == list(range(50))
    with pytest.raises(RuntimeError, match="not open"):
        journal.append(started(0))


async def ticking(gaps: list[float], stop: asyncio.Event) -> None:
    """The host: a coroutine that wakes every millisecond, recording how long each wait took."""
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.001)
        gaps.append(time.perf_counter() - before)


async def test_an_append_never_makes_the_loop_wait_for_a_slow_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def busy_disk(fd: int, data: bytes) -> int:  # every write to the file takes 300 ms
        time.sleep(0.3)
        return real_write(fd, data)

    journal = Journal(tmp_path / "journal.jsonl").open()
    gaps: list[float] = []
    stop = asyncio.Event()
    host = asyncio.create_task(ticking(gaps, stop))
    await asyncio.sleep(0.01)
    monkeypatch.setattr(os, "write", busy_disk)
    try:
        for i in range(3):
            journal.append(started(i))
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)
    finally:
        monkeypatch.setattr(os, "write", real_write)
        stop.set()
        await host
        await asyncio.to_thread(journal.close)
    assert max(gaps) < 0.25, "the loop waited for the disk"
    assert len(gaps) > 20
    assert [e["t"] for e in read_journal(tmp_path / "journal.jsonl")] == [0.0, 1.0, 2.0]
