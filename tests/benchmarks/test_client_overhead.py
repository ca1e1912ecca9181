"""`benchmarks/client_overhead.py --before CHECKOUT`: another checkout's `ttc batch` measured
beside this one's in the same sitting, named by its commit; a folder that holds no ttc is
refused before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "client_overhead.py"

pytestmark = pytest.mark.slow


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )


def test_before_runs_the_other_checkouts_batch_beside_this_ones() -> None:
    # This checkout as its own "before": both batches must answer every request.
    done = _run("--count", "300", "--clients", "bare,batch", "--before", str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    line = orjson.loads(done.stdout.strip().splitlines()[-1])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert line["before_checkout"]["path"] == str(ROOT)
    assert line["before_checkout"]["git"] == (commit or "unknown")
    assert line["before_checkout"]["ttc_bytecode"]["failed"] == 0
    for client in ("bare", "batch", "before"):
        assert line[client]["req_per_s"] > 0
        assert line[client]["cpu_s_per_1000"] > 0
    ratios = line["ratios"]
    for key in ("before_req_per_s", "before_cpu_per_request", "batch_req_per_s_vs_before"):
        assert ratios[key] > 0
    expected = line["batch"]["req_per_s"] / line["before"]["req_per_s"]
    assert ratios["batch_req_per_s_vs_before"] == pytest.approx(expected, rel=0.01)


def test_before_refuses_a_folder_that_holds_no_ttc(tmp_path: Path) -> None:
    done = _run("--count", "10", "--before", str(tmp_path))
    assert done.returncode == 2
    assert f"--before: {tmp_path} is not a checkout of ttc" in done.stderr
