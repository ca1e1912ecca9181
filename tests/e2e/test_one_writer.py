"""One writer per run directory, and a full disk that loses nothing (as a user running overnight
meets them: a second terminal resuming a run that is still going, a disk that fills up)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from e2e.test_overnight import COMMON, TTC, env, outcome, sample_lines, ttc

from ttc.engine import ConfigError
from ttc.engine.cli import main
from ttc.engine.journal import journal_text
from ttc.engine.journal._appender import Appender
from ttc.engine.journal._frames import Deflater, whole_size
from ttc.engine.journal._lock import RunLock


def samples_bought(run: Path) -> Counter[tuple[int, str, int]]:
    """How often each (round, question, k) was journaled as answered."""
    bought: Counter[tuple[int, str, int]] = Counter()
    for raw in journal_text(run / "journal.jsonl"):
        event = orjson.loads(raw)
        if event["ev"] == "sample" and event.get("ok"):
            bought[(event["round"], event["item"], event["k"])] += 1
    return bought


@pytest.mark.slow
def test_a_resume_of_a_run_still_going_is_refused_and_nothing_is_bought_twice(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    first = subprocess.Popen(
        [TTC, "run", *COMMON, "--out", str(run)],
        cwd=tmp_path, env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while sample_lines(run) < 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        # Paused, the first run is still going (it holds its lock) however long the second takes
        # to start on a loaded machine; it goes on, unharmed, once the second has been refused.
        os.kill(first.pid, signal.SIGSTOP)
        assert sample_lines(run) >= 3, "the first run never started sampling"
        assert first.poll() is None, "the first run ended before the second was tried"
        try:
            second = ttc(tmp_path, "resume", str(run))
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert str(run) in lines[0]
        assert f"pid {first.pid}" in lines[0]
        _, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for pipe in (first.stdout, first.stderr):
            if pipe is not None:
                pipe.close()  # also when an assertion failed: no ResourceWarning in a later test
    assert first.returncode == 0, stderr
    bought = samples_bought(run)
    assert bought
    assert max(bought.values()) == 1
    # Readers need no lock, and the finished run resumes at once (nothing to do).
    assert ttc(tmp_path, "report", str(run)).returncode == 0
    assert ttc(tmp_path, "resume", str(run)).returncode == 0


def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    """A kernel lock: kill -9 of the process that holds it frees the directory at once."""
    run = tmp_path / "run"
    code = (
        "import sys, time; from pathlib import Path; from ttc.engine.journal._lock import RunLock; "
        f"RunLock.of_dir(Path({str(run)!r})).acquire(); print('held', flush=True); time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(ConfigError, match=rf"{run}: another process is writing it \(pid"):
                RunLock.of_dir(run).acquire()
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=10)
        finally:
            if holder.poll() is None:
                holder.kill()
    with RunLock.of_dir(run):  # free at once, no stale file to delete
        pass


def test_a_full_disk_stops_the_run_with_one_line_and_resume_equals_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    common = ["run", "--per-task", "4", "--embedder", "lexical", "--workers", "0", "-q"]
    assert main([*common, "--out", str(tmp_path / "whole"), "--no-cache"]) == 0

    real_write, real_frame = Appender._write, Deflater.frame
    written = 0

    def counted(deflater: Deflater, data: bytes) -> bytes:  # the lines of the frame to write
        nonlocal written
        written += data.count(b"\n")
        return real_frame(deflater, data)

    def fills_up(fd: int, data: bytes) -> None:
        # The disk fills up halfway through the write that holds the 40th line (the journal's
        # writer thread writes the lines appended meanwhile at once, in one frame): part of it
        # reaches the file.
        if written >= 40:
            os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fd, data)

    run = tmp_path / "run"
    monkeypatch.setattr(Deflater, "frame", counted)
    monkeypatch.setattr(Appender, "_write", staticmethod(fills_up))
    capsys.readouterr()
    assert main([*common, "--out", str(run), "--no-cache"]) == 75
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"cannot write {run / 'journal.jsonl'}: No space left on device" in err[0]
    assert f"ttc resume {run}" in err[0]
    # What was journaled before the failure is whole: no torn frame is left at its end.
    assert whole_size(run / "journal.jsonl") == (run / "journal.jsonl").stat().st_size
    journal = b"".join(journal_text(run / "journal.jsonl"))
    assert all(orjson.loads(line) for line in journal.splitlines())

    monkeypatch.setattr(Appender, "_write", staticmethod(real_write))
    assert main(["resume", str(run), "--no-cache"]) == 0
    assert outcome(run) == outcome(tmp_path / "whole")
    assert max(samples_bought(run).values()) == 1


async def test_the_library_and_ttc_batch_take_the_lock_too(tmp_path: Path) -> None:
    """An Engine with an out_dir, and `ttc batch`'s journal, are refused while another writer
    holds them, before they write anything."""
    from fakes import FakeSuite, ScriptedProvider, items

    from ttc.engine import Engine, Limiter, RetryPolicy, RunConfig
    from ttc.engine.cli._batchio import journal_path
    from ttc.engine.cli._batchsend import SendPolicy, run_batch

    run = tmp_path / "run"
    config = RunConfig(method="elim", rounds=1, verifier_workers=0)
    with RunLock.of_dir(run):
        with pytest.raises(ConfigError, match=f"{run}: another process is writing it"):
            await Engine(ScriptedProvider(), FakeSuite(pool=items(3)), config, out_dir=run).run()
        assert not (run / "journal.jsonl").exists()
    result = await Engine(ScriptedProvider(), FakeSuite(pool=items(3)), config, out_dir=run).run()
    assert result.complete

    out = tmp_path / "out.jsonl"
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    jpath = journal_path(out)
    policy = SendPolicy(Limiter(), RetryPolicy(), 10.0)
    with RunLock(jpath.with_name(f"{jpath.name}.lock"), f"--out {out}"):
        with pytest.raises(ConfigError, match=f"--out {out}: another process is writing it"):
            await run_batch(tmp_path / "in.jsonl", out, ScriptedProvider(), policy)  # type: ignore[arg-type]
        assert not jpath.exists()
