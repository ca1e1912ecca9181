"""A run directory someone else prepared: no file ttc writes there follows a symbolic link planted
in it (the lock, run.log, the journal, the temporary files of summary.json and results.jsonl,
the batch journals and OUT files, plots), and a non-empty --out that ttc did not make is refused.
Each link points at a victim file that must come out as it went in."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest

from ttc.engine.cli._batchapi import _Journal
from ttc.engine.cli._batchio import BatchJournal, scan_input, tally
from ttc.engine.contract._errors import ConfigError, WriteError
from ttc.engine.journal._journal import Journal
from ttc.engine.journal._lock import RunLock
from ttc.engine.journal._rundir import RunDir, write_atomic
from ttc.engine.report._plots import pyplot, save
from ttc.engine.run._runinfo import check_rundir

SECRET = b"root's file: must stay as it is\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def plant(link: Path, victim: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    return link


def test_the_lock_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    run = tmp_path / "run"
    plant(run / ".lock", victim)
    with pytest.raises(WriteError, match="symbolic link"):
        RunLock.of_dir(run).acquire()
    assert victim.read_bytes() == SECRET


def test_the_journal_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    path = plant(tmp_path / "run" / "journal.jsonl", victim)
    with pytest.raises(WriteError, match="symbolic link"):
        Journal(path).open()
    assert victim.read_bytes() == SECRET


def test_run_log_refuses_a_link(tmp_path: Path, victim: Path) -> None:
    run = tmp_path / "run"
    plant(run / "run.log", victim)
    with pytest.raises(WriteError, match="symbolic link"):
        RunDir(run).attach_log()
    assert victim.read_bytes() == SECRET
    assert not logging.getLogger("ttc").handlers or all(
        not isinstance(h, logging.FileHandler) for h in logging.getLogger("ttc").handlers
    )


@pytest.mark.parametrize("name", ["summary.json", "results.jsonl", "config.json"])
def test_a_planted_temporary_file_is_replaced_not_written_through(
    tmp_path: Path, victim: Path, name: str
) -> None:
    run = tmp_path / "run"
    plant(run / f".{name}.tmp", victim)
    write_atomic(run / name, b"{}\n")
    assert victim.read_bytes() == SECRET
    assert (run / name).read_bytes() == b"{}\n"
    assert not (run / name).is_symlink()
    assert not (run / f".{name}.tmp").exists()


def test_a_link_as_the_target_of_an_atomic_write_is_replaced(tmp_path: Path, victim: Path) -> None:
    target = plant(tmp_path / "run" / "summary.json", victim)
    write_atomic(target, b"{}")
    assert victim.read_bytes() == SECRET
    assert not target.is_symlink()


def test_plots_refuse_a_link(tmp_path: Path, victim: Path) -> None:
    path = plant(tmp_path / "run" / "coverage_vs_tokens.png", victim)
    fig = pyplot().figure()
    with pytest.raises(OSError, match="symbolic link"):
        save(fig, path)
    pyplot().close(fig)
    assert victim.read_bytes() == SECRET


def test_the_helpers_refuse_links_in_every_mode(tmp_path: Path, victim: Path) -> None:
    from ttc.engine._util import open_file, temp_file

    link = plant(tmp_path / "link", victim)
    for mode in ("wb", "ab", "r+b"):
        with pytest.raises(OSError, match="symbolic link"):
            open_file(link, mode)
    with temp_file(link) as fh:  # a temporary file: the link is removed, a new file made
        fh.write(b"new")
    assert link.read_bytes() == b"new"
    assert not link.is_symlink()
    assert victim.read_bytes() == SECRET


def _batch_input(tmp_path: Path) -> Path:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
    path = tmp_path / "in.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n")
    return path


def test_ttc_batch_files_refuse_links(tmp_path: Path, victim: Path) -> None:
    scan = scan_input(_batch_input(tmp_path), need_model=False)
    out = tmp_path / "out" / "OUT.jsonl"
    empty = tmp_path / "empty-victim"  # read as a journal with no line: then written to
    empty.write_bytes(b"")
    plant(out.with_name(out.name + ".batchapi"), empty)
    with pytest.raises(OSError, match="symbolic link"):
        _Journal(out.with_name(out.name + ".batchapi"), scan)
    assert empty.read_bytes() == b""
    plant(out.with_name(out.name + ".journal"), empty)
    with pytest.raises(WriteError, match="symbolic link"):
        BatchJournal(out.with_name(out.name + ".journal"), scan).open(resume=False)
    assert empty.read_bytes() == b""


def test_ttc_batch_output_is_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    scan = scan_input(_batch_input(tmp_path), need_model=False)
    out = tmp_path / "out.jsonl"
    journal = BatchJournal(tmp_path / "out.jsonl.journal", scan).open(resume=False)
    journal.record(
        0, {"custom_id": "a", "response": None, "error": {"code": "x"}}, final=True, attempts=1
    )
    plant(out.with_name(f".{out.name}.{os.getpid()}.tmp"), victim)
    counts, _ = tally(journal, out)
    journal.close()
    assert sum(counts.values()) == 1
    assert victim.read_bytes() == SECRET
    assert orjson.loads(out.read_bytes())["custom_id"] == "a"


def test_a_non_empty_out_that_ttc_did_not_make_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "prepared"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"not empty \(notes\.txt\).*no config\.json"):
        check_rundir(RunDir(run), {}, resume=False)
    # New, empty, only ttc's lock or a temporary file a kill left: a run starts there.
    for ok in ("new", "empty", "locked"):
        (tmp_path / ok).mkdir(exist_ok=ok == "new")
    (tmp_path / "locked" / ".lock").write_text("")
    (tmp_path / "locked" / ".config.json.tmp").write_text("")
    for ok in ("new", "empty", "locked"):
        check_rundir(RunDir(tmp_path / ok), {}, resume=False)
    # One ttc made (its config.json): as before (resumed, or refused for its journal later).
    (run / "config.json").write_text("{}")
    check_rundir(RunDir(run), {}, resume=False)


def test_ttc_run_refuses_a_prepared_out_in_one_line(tmp_path: Path, victim: Path) -> None:
    from ttc.engine.cli._main import main

    run = tmp_path / "prepared"
    plant(run / "run.log", victim)
    plant(run / "journal.jsonl.x", victim)
    code = main(
        [
            "run",
            "--limit",
            "2",
            "--rounds",
            "1",
            "--workers",
            "0",
            "--embedder",
            "lexical",
            "--no-cache",
            "-q",
            "--out",
            str(run),
        ]
    )
    assert code == 2
    assert victim.read_bytes() == SECRET
    assert sorted(p.name for p in run.iterdir()) == ["journal.jsonl.x", "run.log"]
