"""`ttc run --executor ray` as a user runs it: the same rounds as `--executor process` with the
same seed; Ctrl-C stops it cleanly, with no Ray process left, and `ttc resume` goes on with
either executor (the sim provider: simulated numbers, measuring the machinery)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.engine.journal import journal_text

TTC = str(Path(sys.executable).with_name("ttc"))
RUN = ["run", "--limit", "30", "--rounds", "3", "--seed", "5", "--embedder", "lexical", "--no-live"]
# What a run's rounds and questions must agree on, whatever verified them.
ROUND = ("round", "active", "samples", "solved", "coverage", "input_tokens", "output_tokens")
QUESTION = ("id", "solved", "response", "input_tokens", "output_tokens")


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TTC_CACHE_DIR": str(tmp_path / "cache")}


def ttc(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TTC, *args], cwd=tmp_path, env=env(tmp_path), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def outcome(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per round and per question, what the run found."""
    summary = orjson.loads((run / "summary.json").read_bytes())
    results = [orjson.loads(line) for line in (run / "results.jsonl").read_bytes().splitlines()]
    rounds = [{k: r[k] for k in ROUND} for r in summary["rounds"]]
    return rounds, [{k: q[k] for k in QUESTION} for q in results]


def session_left(sid: int) -> list[str]:
    """The processes still in session `sid` (ttc's, and what it started: Ray's included)."""
    left = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and int(fields[3]) == sid and fields[0] != "Z":
            left.append(stat[: stat.rfind(")") + 1])
    return left


@pytest.fixture(scope="module")
def process_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("process")
    done = ttc(tmp, *RUN, "--executor", "process", "--out", str(tmp / "run"))
    assert done.returncode == 0, done.stderr
    return tmp / "run"


def test_ray_gives_the_rounds_of_the_process_pool(tmp_path: Path, process_run: Path) -> None:
    done = ttc(tmp_path, *RUN, "--executor", "ray", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert outcome(tmp_path / "run") == outcome(process_run)
    assert outcome(process_run)[0][-1]["coverage"] > outcome(process_run)[0][0]["coverage"]
    config = orjson.loads((tmp_path / "run" / "config.json").read_bytes())
    assert config["invocation"]["executor"] == "ray"
    # Ray keeps its own chatter off the terminal: ttc's lines only.
    assert "Ray" not in done.stderr.replace("verifying on a local Ray", ""), done.stderr


def interrupt(tmp_path: Path, args: list[str], journal: Path, presses: int = 1) -> None:
    """Runs ttc in a session of its own and presses Ctrl-C (SIGINT to its process group) a
    second after the journal grows, and again at once if `presses` is 2 (with Ray, while it is
    still starting): exit 130, no traceback, and nothing of it left."""
    lines = len(list(journal_text(journal)))
    proc = subprocess.Popen(
        [TTC, *args], cwd=tmp_path, env=env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while len(list(journal_text(journal))) <= lines:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the journal did not grow in 300 s"
        time.sleep(0.05)
    time.sleep(1.0)
    for _ in range(presses):
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    # Ray's processes are gone with ttc, or within a moment (a minute on a loaded machine).
    deadline = time.monotonic() + 60
    while session_left(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_left(proc.pid) == []


def test_ctrl_c_stops_a_ray_run_which_resumes_on_either_executor(
    tmp_path: Path, process_run: Path
) -> None:
    run, journal = tmp_path / "run", tmp_path / "run" / "journal.jsonl"
    slow = ["--sim-latency", "0.3", "--concurrency", "4"]
    # Started on processes; resumed on Ray (a resume takes the run's own flags with those
    # given on top), stopped once, then twice while Ray starts; finished on processes.
    interrupt(tmp_path, [*RUN, *slow, "--out", str(run)], journal)
    interrupt(tmp_path, ["resume", str(run), "--executor", "ray"], journal)
    interrupt(tmp_path, ["resume", str(run), "--executor", "ray"], journal, presses=2)
    done = ttc(tmp_path, "resume", str(run), "--sim-latency", "0", "--concurrency", "64")
    assert done.returncode == 0, done.stderr
    assert outcome(run) == outcome(process_run)
