"""The compact journal: the lines written read back as they were, a torn last frame is left out
and cut on reopening (never a frame before it), a corrupt frame is refused, a plain journal from
before stays plain, and `python -m ttc.engine.journal` prints either as plain lines."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from ttc.engine import DataError, RoundEnded, RunStarted
from ttc.engine.journal import completed_samples, journal_text, read_journal
from ttc.engine.journal.__main__ import main as print_journal
from ttc.engine.journal._frames import MAGIC, compact, lines, whole_size
from ttc.engine.journal._journal import Journal

DATA = Path(__file__).parents[2] / "data"
GOLDEN = DATA / "journal_c798ef4_writes.jsonl"  # lines a journal from before holds


def rounds(i: int) -> RoundEnded:
    return RoundEnded(i, 10, 10, i, i / 10, 0, 0, 1.5)


def sessions(path: Path, *counts: int) -> list[int]:
    """A compact journal written by one session per count (each a fresh stream); the rounds."""
    written: list[int] = []
    for n in counts:
        with Journal(path, compact=True) as journal:
            for _ in range(n):
                journal.append(rounds(len(written)))
                written.append(len(written))
                journal.flush()  # a frame each: a torn tail is one of many
    return written


def frame_ends(path: Path) -> list[int]:
    """Where each frame of a compact journal ends (its header read as the format says)."""
    data, at, ends = path.read_bytes(), len(MAGIC), []
    while at < len(data):
        at += 9 + int.from_bytes(data[at + 1 : at + 5], "big")
        ends.append(at)
    return ends


def test_a_compact_journal_reads_back_the_lines_a_plain_one_holds(tmp_path: Path) -> None:
    plain, packed = tmp_path / "plain.jsonl", tmp_path / "journal.jsonl"
    for path, form in ((plain, False), (packed, True)):
        with Journal(path, compact=form) as journal:
            journal.append(RunStarted(resumed=False, t=1.0))
            for i in range(300):
                journal.append(rounds(i))
    assert packed.read_bytes().startswith(MAGIC)
    assert not plain.read_bytes().startswith(MAGIC)
    events = [{k: v for k, v in e.items() if k != "at"} for e in read_journal(plain)]
    assert [{k: v for k, v in e.items() if k != "at"} for e in read_journal(packed)] == events
    assert [x.count(b"\n") for x in journal_text(packed)] == [1] * 301
    assert packed.stat().st_size < plain.stat().st_size / 5


def test_each_session_is_a_stream_of_its_own_and_the_lines_are_numbered_across(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    written = sessions(path, 3, 4, 2)
    assert [e["round"] for e in read_journal(path)] == written
    assert [n for n, _ in lines(path)] == list(range(1, 10))
    assert path.read_bytes().count(MAGIC) == 1


def test_a_torn_last_frame_is_left_out_then_cut_and_no_frame_before_it_is_touched(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole.jsonl"
    written = sessions(whole, 5, 5)
    ends = frame_ends(whole)
    assert len(ends) == 10
    assert ends[-1] == whole.stat().st_size
    data = whole.read_bytes()
    # A kill at every byte of the last frame's write (its header, then its payload).
    for cut in range(ends[-2], ends[-1]):
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(data[:cut])
        assert [e["round"] for e in read_journal(path)] == written[:-1]
        assert whole_size(path) == ends[-2]
        with Journal(path, compact=True) as journal:  # reopened: the torn frame is cut
            journal.append(rounds(99))
        assert [e["round"] for e in read_journal(path)] == [*written[:-1], 99]
        assert path.read_bytes()[: ends[-2]] == data[: ends[-2]]


def test_a_last_frame_whose_bytes_never_reached_the_disk_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    written = sessions(path, 4)
    data = bytearray(path.read_bytes())
    data[-3:] = b"\0\0\0"  # the size grew, the last block's bytes did not land (a machine crash)
    path.write_bytes(bytes(data))
    assert [e["round"] for e in read_journal(path)] == written[:-1]
    assert whole_size(path) == frame_ends(path)[-2]


def test_a_torn_start_of_the_file_is_no_journal_yet(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(MAGIC[:3])
    assert list(read_journal(path)) == []
    with Journal(path, compact=True) as journal:
        journal.append(rounds(0))
    assert [e["round"] for e in read_journal(path)] == [0]


@pytest.mark.parametrize("spoil", ["crc", "flags"])
def test_a_corrupt_frame_before_the_last_is_refused_never_cut(tmp_path: Path, spoil: str) -> None:
    path = tmp_path / "journal.jsonl"
    sessions(path, 4)
    first = frame_ends(path)[0]
    data = bytearray(path.read_bytes())
    if spoil == "crc":
        data[first - 1] ^= 0xFF  # a payload byte of the first frame
    else:
        data[first] = 0x80  # the second frame's flags
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"journal.jsonl: corrupt journal frame at byte"):
        list(read_journal(path))
    if spoil == "flags":  # a header that is no header: where to go on is unknown
        with pytest.raises(DataError, match="corrupt journal frame"):
            Journal(path, compact=True).open()
    assert path.read_bytes() == bytes(data)


def test_a_plain_journal_from_before_is_read_and_resumed_plain(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    shutil.copy(GOLDEN, path)
    before = path.read_bytes()
    assert list(read_journal(path)) == [orjson.loads(x) for x in before.splitlines()]
    assert completed_samples(path)  # its samples replay
    with Journal(path, compact=True) as journal:  # a run resumed: it goes on as it was
        journal.append(rounds(7))
    data = path.read_bytes()
    assert data.startswith(before)
    assert data[len(before) :].startswith(b'{"ev":"round"')
    assert list(read_journal(path))[-1]["round"] == 7


def test_a_journal_written_at_once_is_a_compact_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(compact(b'{"ev":"start","resumed":false,"t":1.0}\n'))
    with Journal(path, compact=True) as journal:
        journal.append(rounds(1))
    assert [e["ev"] for e in read_journal(path)] == ["start", "round"]


def test_python_m_prints_either_journal_as_plain_lines(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    shutil.copy(GOLDEN, tmp_path / "plain.jsonl")
    sessions(tmp_path / "journal.jsonl", 2, 1)
    assert print_journal([str(tmp_path / "plain.jsonl")]) == 0
    assert capsysbinary.readouterr().out == GOLDEN.read_bytes()
    assert print_journal([str(tmp_path)]) == 0  # a run directory: its journal.jsonl
    out = capsysbinary.readouterr().out
    assert [orjson.loads(x)["round"] for x in out.splitlines()] == [0, 1, 2]
    assert print_journal([str(tmp_path / "none")]) == 2
    assert b"no such file" in capsysbinary.readouterr().err
