"""`ttc ctl` against a real `ttc batch` process, and `--shared-limits` with no Redis: what a user
types and reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ttc.engine.cli import main
from ttc.engine.cli._control import socket_path
from ttc.engine.journal import read_journal

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from _serving import ServeProcess
from quota_saturation import KEY_ENV, batch_input

pytestmark = pytest.mark.slow


def test_redis_unreachable_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = tmp_path / "in.jsonl"
    batch_input(inp, 2)
    os.environ.setdefault(KEY_ENV, "sk-sim")
    code = main(
        ["batch", str(inp), "--out", str(tmp_path / "out.jsonl"), "--api-key-env", KEY_ENV,
         "--base-url", "http://127.0.0.1:9/v1", "--shared-limits", "redis://127.0.0.1:9/0"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "Redis at redis://127.0.0.1:9/0 is unreachable" in err
    assert not (tmp_path / "out.jsonl").exists()  # nothing was sent


def _ctl(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ttc.engine.cli", "ctl", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


def test_a_running_batch_is_steered_and_its_resume_keeps_the_limits(tmp_path: Path) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    batch_input(inp, 40)
    with ServeProcess("--latency", "0.05", "--quiet") as server:
        command = [sys.executable, "-m", "ttc.engine.cli", "batch", str(inp), "--out", str(out)]
        command += ["--base-url", server.url + "/v1", "--api-key-env", KEY_ENV, "--rpm", "30"]
        env = {**os.environ, KEY_ENV: "sk-sim"}
        proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(600):  # until it serves its socket (a loaded machine starts slowly)
                if socket_path(out).exists() or proc.poll() is not None:
                    break
                time.sleep(0.1)
            status = _ctl(str(out), "status")
            assert status.returncode == 0, status.stderr
            assert "rpm 30" in status.stdout
            done = _ctl(str(out), "set", "--rpm", "6000", "--concurrency", "4")
            assert done.returncode == 0, done.stderr
            assert "rpm 6000" in done.stdout
            _, stderr = proc.communicate(timeout=300)  # 40 requests at 30 RPM would be 80 s
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 0, stderr
        assert "ttc ctl: set rpm 6000 concurrency 4" in stderr
        steered = [e for e in read_journal(Path(f"{out}.journal")) if e["ev"] == "control"]
        assert [(e["rpm"], e["concurrency"]) for e in steered] == [(6000.0, 4)]
        resumed = subprocess.run(
            [*command, "--resume"], env=env, capture_output=True, text=True, check=False
        )
    assert resumed.returncode == 0, resumed.stderr
    assert "limits as `ttc ctl set` left them: set rpm 6000 concurrency 4" in resumed.stderr
    assert _ctl(str(out), "status").returncode == 2  # nothing runs: refused in one line
