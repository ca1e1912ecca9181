"""`benchmarks/client_overhead.py --before CHECKOUT`: another checkout's `ttc batch` measured
beside this one's in every sitting, named by its commit, whichever layout its command has; a
folder that holds no ttc, or a line with no `ttc batch` of this checkout to compare with, is
refused before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "client_overhead.py"
sys.path.insert(0, str(SCRIPT.parent))

import client_overhead  # noqa: E402

pytestmark = pytest.mark.slow

# An old checkout's command, as 7e034f4 laid it out (`ttc/engine/_cli.py`), that answers every
# request of its input without a server and leaves a mark that it ran.
_OLD_CLI = """
import pathlib, sys
import orjson
args = sys.argv[1:]
assert args[0] == "batch", args
out = pathlib.Path(args[args.index("--out") + 1])
with open(args[1], "rb") as src, out.open("wb") as dst:
    for raw in src:
        line = orjson.loads(raw)
        body = {"choices": [{"message": {"content": "42"}}]}
        dst.write(orjson.dumps({"custom_id": line["custom_id"],
                                "response": {"status_code": 200, "body": body}}) + b"\\n")
(pathlib.Path(__file__).parent / "ran").write_text("yes")
"""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )


def _git(where: Path, *argv: str) -> str:
    done = subprocess.run(["git", *argv], cwd=where, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _old_checkout(where: Path) -> Path:
    engine = where / "ttc" / "engine"
    engine.mkdir(parents=True)
    (where / "ttc" / "__init__.py").write_text("")
    (engine / "__init__.py").write_text("")
    (engine / "_cli.py").write_text(_OLD_CLI)
    _git(where, "init", "-q")
    _git(where, "add", ".")
    _git(where, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "old")
    return where


def test_before_runs_an_old_layouts_command_from_its_own_checkout(tmp_path: Path) -> None:
    old = _old_checkout(tmp_path / "old")
    done = _run("--count", "300", "--clients", "bare,batch", "--before", str(old))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (old / "ttc" / "engine" / "ran").read_text() == "yes"  # its command, not ours
    line = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert line["before_checkout"]["git"] == _git(old, "rev-parse", "--short", "HEAD")
    assert line["git"] == _git(ROOT, "rev-parse", "--short", "HEAD")
    for client in ("bare", "batch", "before"):
        assert line[client]["req_per_s"] > 0
        assert line[client]["cpu_s_per_1000"] > 0
    ratios = line["ratios"]
    expected = line["batch"]["req_per_s"] / line["before"]["req_per_s"]
    assert ratios["batch_req_per_s_vs_before"] == pytest.approx(expected, rel=0.01)
    expected = line["batch"]["cpu_s_per_1000"] / line["before"]["cpu_s_per_1000"]
    assert ratios["batch_cpu_per_request_vs_before"] == pytest.approx(expected, rel=0.01)
    assert ratios["before_req_per_s"] > 0


def test_before_runs_this_layouts_command() -> None:
    # This checkout as its own "before": the command's package (ttc.engine.cli) answers all.
    done = _run("--count", "300", "--clients", "bare,batch", "--before", str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    line = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert line["before_checkout"]["path"] == str(ROOT)
    assert line["before_checkout"]["ttc_bytecode"]["failed"] == 0
    assert line["before"]["peak_rss_mb"] > 0


def test_the_command_is_found_in_either_layout(tmp_path: Path) -> None:
    assert client_overhead._cli_module(ROOT) == "ttc.engine.cli"
    assert client_overhead._cli_module(_old_checkout(tmp_path / "old")) == "ttc.engine._cli"
    assert client_overhead._cli_module(tmp_path) is None


def test_before_goes_right_after_batch_and_its_traced_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def compare(args: Any, clients: list[str]) -> int:
        seen.append(clients)
        return 0

    monkeypatch.setattr(client_overhead, "_compare", compare)
    assert client_overhead.main(["--before", str(ROOT)]) == 0
    assert client_overhead.main(["--before", str(ROOT), "--otel"]) == 0
    assert seen == [
        ["bare", "batch", "before", "engine"],
        ["bare", "batch", "batch_otel", "before", "engine", "engine_otel"],
    ]


def test_before_refuses_a_folder_that_holds_no_ttc(tmp_path: Path) -> None:
    done = _run("--count", "10", "--before", str(tmp_path))
    assert done.returncode == 2
    assert f"--before: {tmp_path} is not a checkout of ttc" in done.stderr


def test_before_refuses_a_line_with_no_batch_to_compare(tmp_path: Path) -> None:
    done = _run("--count", "10", "--clients", "bare,engine", "--before", str(ROOT))
    assert done.returncode == 2
    assert "add batch to --clients" in done.stderr
