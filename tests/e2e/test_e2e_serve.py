"""`ttc run --provider openai` and `anthropic` against `ttc serve` with faults and a rate limit:
real processes, real HTTP on loopback. Every planned sample ends with a verdict or a recorded
final error, no response is counted twice, and the run's token totals equal what the server says
it served."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.engine.journal._journal import read_journal

TTC = str(Path(sys.executable).with_name("ttc"))


def env(tmp: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**clean, "TTC_CACHE_DIR": str(tmp / ".ttc-cache")}


class Server:
    """`ttc serve` in a subprocess; `url` once it says it listens."""

    def __init__(self, tmp: Path, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [TTC, "serve", "--port", "0", *flags],
            cwd=tmp,
            env=env(tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        lines = []
        for line in self.proc.stdout:
            lines.append(line)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if found:
                self.url = found.group(1)
                return
        raise AssertionError("ttc serve did not start:\n" + "".join(lines))

    def stats(self) -> Any:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return orjson.loads(response.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            assert self.proc.wait(timeout=10) == 0  # SIGTERM ends `ttc serve` cleanly
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdout is not None
            self.proc.stdout.close()


@pytest.fixture
def faulty_server(tmp_path: Path) -> Iterator[Server]:
    server = Server(
        tmp_path,
        "--per-task", "15",
        "--rpm", "1200", "--window", "2",  # 40 requests per 2 s window: the run meets 429s
        "--latency", "0.01",
        "--fault-500", "0.04",
        "--fault-503", "0.04",
        "--fault-reset", "0.03",
        "--fault-truncated", "0.03",
        "--fault-empty", "0.03",
        "--fault-hang", "0.02",
        "--seed", "7",
        "--sim-thinking", "0.25",
    )  # fmt: skip
    yield server
    server.stop()


# Anthropic's base URL is the API's root, as its client takes it; thinking is asked for there.
WIRES = {"openai": ("/v1",), "anthropic": ("", "--thinking-budget", "2048")}


@pytest.mark.slow
@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_run_against_a_faulty_rate_limited_server_accounts_for_everything(
    tmp_path: Path, faulty_server: Server, wire: str
) -> None:
    out = tmp_path / "run"
    path, *flags = WIRES[wire]
    proc = subprocess.run(
        [
            TTC, "run",
            "--provider", wire,
            "--model", "sim",
            "--base-url", faulty_server.url + path,
            *flags,
            "--per-task", "15",
            "--rounds", "3",
            "--embedder", "lexical",
            "--concurrency", "16",
            "--timeout", "2",  # hung requests become timeouts, then retries
            "--max-attempts", "4",
            "--no-cache",
            "--out", str(out),
        ],
        cwd=tmp_path,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    summary = orjson.loads((out / "summary.json").read_bytes())
    events = list(read_journal(out / "journal.jsonl"))
    samples = [e for e in events if e["ev"] == "sample"]
    # A sample whose 4 attempts all met a fault failed for good: the run says so (exit 4, one
    # line), else it exits 0.
    failed = sum(not e["ok"] for e in samples)
    assert proc.returncode == (4 if failed else 0), proc.stderr
    if failed:
        assert f"ttc: {failed} samples failed for good (" in proc.stdout
    verdicts = {(e["round"], e["item"], e["k"]) for e in events if e["ev"] == "verdict"}

    # Every planned sample has exactly one outcome: a response with a verdict, or a final error.
    keys = Counter((e["round"], e["item"], e["k"]) for e in samples)
    assert max(keys.values()) == 1, "a sample was recorded twice"
    for r in summary["rounds"]:
        assert sum(e["round"] == r["round"] for e in samples) == r["active"]
    for e in samples:
        key = (e["round"], e["item"], e["k"])
        if e["ok"]:
            assert key in verdicts
        else:
            assert e["error"] in ("rate_limited", "transient", "bad_request", "fatal")
    assert summary["complete"] is True
    assert summary["simulated"] is True  # the server's answers come from the simulator
    assert "simulated" in proc.stdout

    # The faults and the limit really happened, and the engine retried through them.
    stats = faulty_server.stats()
    retries = [e for e in events if e["ev"] == "retry"]
    kinds = Counter(e["error"] for e in retries)
    assert kinds["transient"] > 0
    assert sum(stats["by_fault"].values()) > 0
    if wire == "anthropic":  # its overloaded fault is a 529, retried as transient
        assert stats["by_status"].get("529", 0) > 0
    assert stats["rate_limited"] > 0
    assert stats["rate_limited"] == kinds["rate_limited"] + sum(
        e["error"] == "rate_limited" for e in samples if not e["ok"]
    )

    # Tokens: what the run counted equals what the server delivered whole, field by field.
    served = stats["tokens"]
    assert summary["input_tokens"] == served["input"]
    assert summary["output_tokens"] == served["output"]
    assert summary["thinking_tokens"] == served["thinking"] > 0
    answered = sum(e["ok"] for e in samples)
    assert stats["ok"] == answered
