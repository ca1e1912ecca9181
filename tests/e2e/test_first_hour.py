"""What a new user meets in the first hour, as real processes: the library page's example
without its `__main__` guard, and Ctrl-C at a terminal (SIGINT to the whole process group)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from fakes import library_example

from ttc.engine.journal import read_journal

ROOT = Path(__file__).resolve().parents[2]
TTC = str(Path(sys.executable).with_name("ttc"))


def _unguarded_example() -> str:
    """The library page's first example, its last line run at the top level, as a first script
    often is."""
    guarded = library_example((ROOT / "docs" / "library.md").read_text())
    guard = re.search(r'^if __name__ == "__main__":.*\n(\s+)(.*)\n', guarded, re.M)
    assert guard is not None, "docs/library.md: the example has no __main__ guard"
    return guarded[: guard.start()] + guard.group(2) + "\n"


@pytest.mark.slow
def test_a_script_without_the_main_guard_stops_with_one_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "demo.py"
    script.write_text(_unguarded_example())
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    # The run fails, loudly, once: not a run "complete" at coverage 0 after a flood of errors
    # from verifier processes re-running the script.
    assert proc.returncode != 0
    assert "complete True" not in proc.stdout
    assert proc.stderr.count("Traceback") == 1, proc.stderr[-3000:]
    assert len(proc.stderr.splitlines()) < 60
    assert "VerifierError" in proc.stderr
    assert 'if __name__ == "__main__":' in proc.stderr
    summary = orjson.loads((tmp_path / "runs" / "demo" / "summary.json").read_bytes())
    assert summary["complete"] is False
    assert summary["stopped"].startswith("failed: the verifier processes exited while starting")


def _ctrl_c(tmp_path: Path, presses: int, after: float) -> subprocess.CompletedProcess[str]:
    """`ttc run` in a session of its own; Ctrl-C as a terminal sends it: SIGINT to the whole
    process group, the verifier processes included."""
    env = {**os.environ, "TTC_CACHE_DIR": str(tmp_path / "cache")}
    args = ["run", "--limit", "60", "--embedder", "lexical", "--out", str(tmp_path / "run")]
    args += ["--no-live", "--sim-latency", "0.5", "--concurrency", "4", "--workers", "2"]
    proc = subprocess.Popen(
        [TTC, *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    journal = tmp_path / "run" / "journal.jsonl"
    deadline = time.monotonic() + 60
    while not journal.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(after)
    for _ in range(presses):
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
@pytest.mark.parametrize(("presses", "after"), [(1, 1.5), (2, 0.0)])
def test_ctrl_c_stops_quietly(tmp_path: Path, presses: int, after: float) -> None:
    proc = _ctrl_c(tmp_path, presses, after)
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "KeyboardInterrupt" not in proc.stderr
    assert "ttc resume" in proc.stderr + proc.stdout
    assert len(proc.stderr.splitlines()) < 15, proc.stderr


def test_workers_0_is_allowed_but_said(tmp_path: Path) -> None:
    env = {**os.environ, "TTC_CACHE_DIR": str(tmp_path / "cache")}
    args = ["run", "--limit", "4", "-R", "1", "--workers", "0", "--embedder", "lexical"]
    proc = subprocess.run(
        [TTC, *args, "--out", str(tmp_path / "run"), "--no-live"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--workers 0: responses are judged in this process" in proc.stderr


@pytest.mark.slow
def test_a_refused_compare_resume_leaves_its_command_line_alone(tmp_path: Path) -> None:
    env = {**os.environ, "TTC_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "cmp"
    args = ["--limit", "6", "-R", "2", "--workers", "1", "--embedder", "lexical", "--no-live"]

    def ttc(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TTC, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    assert ttc("compare", *args, "--out", str(out)).returncode == 0
    invocation = (out / "invocation.json").read_bytes()
    refused = ttc("resume", str(out), "--max-cost", "5")  # the sim model has no price
    assert refused.returncode == 2
    assert "--max-cost" in refused.stderr
    # The refused flag is not remembered: a plain resume still goes on.
    assert (out / "invocation.json").read_bytes() == invocation
    again = ttc("resume", str(out))
    assert again.returncode == 0, again.stderr


def _closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_run_against_nothing_listening_exits_non_zero_naming_why(tmp_path: Path) -> None:
    # The README's first command with a wrong --base-url: every attempt fails alike. It used to
    # exit 0 with a table of zeros after 120 attempts, run.log silent.
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    args = ["run", "--provider", "openai", "--model", "sim", "--base-url", url, "--limit", "5"]
    args += ["--no-live", "--embedder", "lexical", "--out", str(tmp_path / "run")]
    env = {**os.environ, "TTC_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-x"}
    proc = subprocess.run(
        [TTC, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("stopped:")]
    assert "the first 8 attempts all failed" in line
    assert "Cannot connect" in line
    assert line.endswith(f"resume {tmp_path / 'run'}")
    assert "Cannot connect" in (tmp_path / "run" / "run.log").read_text()
    events = list(read_journal(tmp_path / "run" / "journal.jsonl"))  # plain or compact
    attempts = [e for e in events if e["ev"] == "retry" or (e["ev"] == "sample" and not e["ok"])]
    assert len(attempts) <= 8 + 5  # not every retry of every sample of every round
