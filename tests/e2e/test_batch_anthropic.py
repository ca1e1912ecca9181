"""Batch mode through Anthropic's Message Batches, end to end: `ttc run --provider anthropic
--batch` against `ttc serve`, in subprocesses.

A batch run buys no synchronous message, lands the same samples and tokens as a synchronous
run, at half its cost; killed with SIGKILL while a batch is in progress and resumed, it creates
no second batch for a round that had one; with failures and expiries inside batches it
completes, and the journal and `ttc report` count the re-sent requests. Everything here is
simulated (the sim model behind `ttc serve`).

The Messages API takes no seed: `ttc serve` draws each message by its arrival, so the runs
compared here each have their own server, and the synchronous one sends one request at a time
(the order a batch's requests are answered in).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from e2e.test_batch_mode import _journal_so_far, bought_once, journal, load, ttc
from e2e.test_e2e_serve import TTC, Server, env
from e2e.test_overnight import outcome

SUITE = ["--per-task", "6"]
RUN = [*SUITE, "--embedder", "lexical", "--workers", "1", "--no-cache", "-q", "--no-live",
       "--provider", "anthropic", "--model", "sim", "--price", "1,1"]  # fmt: skip
BATCH = ["--batch", "--batch-poll", "0.5"]


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def rounds_of_batches(server: Server) -> Counter[str]:
    """How many batches the server holds for each round: its list, newest first, then each
    batch's first result (`t<round>-r<row>-k<k>_<mark>`: the only place a batch says whose it
    is)."""
    found: list[dict[str, Any]] = []
    after = ""
    while True:
        page = orjson.loads(_get(f"{server.url}/v1/messages/batches?limit=2"
                                 + (f"&after_id={after}" if after else "")))  # fmt: skip
        found += page["data"]
        if not page["has_more"]:
            break
        after = page["last_id"]
    rounds: Counter[str] = Counter()
    for batch in found:
        assert batch["processing_status"] == "ended"
        first = orjson.loads(_get(batch["results_url"]).splitlines()[0])
        rounds[first["custom_id"].split("-")[0]] += 1
    return rounds


@pytest.mark.slow
def test_anthropic_batch_run_is_half_price_and_sends_no_message(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "2")
    try:
        batched = ttc(tmp_path, "run", *RUN, "--base-url", server.url, *BATCH, "--out", "batched")
        assert batched.returncode == 0, batched.stderr
        stats = server.stats()
    finally:
        server.stop()
    server = Server(tmp_path, *SUITE)
    try:
        synced = ttc(tmp_path, "run", *RUN, "--base-url", server.url, "--concurrency", "1",
                     "--out", "synced")  # fmt: skip
        assert synced.returncode == 0, synced.stderr
    finally:
        server.stop()
    assert stats["by_route"].get("anthropic.generate", 0) == 0  # not one synchronous message
    assert stats["requests"] == 0
    b, s = load(tmp_path / "batched" / "summary.json"), load(tmp_path / "synced" / "summary.json")
    assert outcome(tmp_path / "batched") == outcome(tmp_path / "synced")
    for key in ("input_tokens", "output_tokens", "thinking_tokens", "solved"):
        assert b[key] == s[key]
    assert b["cost_usd"] == pytest.approx(s["cost_usd"] / 2, rel=1e-9)
    assert b["simulated"] is True
    served = stats["batch"]
    assert (served["tokens"]["input"], served["tokens"]["output"]) == (
        b["input_tokens"], b["output_tokens"])  # fmt: skip
    assert served["batches"] == served["by_route"]["anthropic.batches.create"] == len(b["rounds"])


@pytest.mark.slow
def test_anthropic_sigkill_during_a_batch_then_resume_makes_no_second_batch(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "3")
    try:
        killed = tmp_path / "killed"
        proc = subprocess.Popen([TTC, "run", *RUN, "--base-url", server.url, *BATCH,
                                 "--out", str(killed)], cwd=tmp_path, env=env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        # Killed while round 2's batch is in progress (its id journaled, its answers not in).
        while not any(e["ev"] == "batch" and e["round"] == 2 for e in _journal_so_far(killed)):
            assert proc.poll() is None, "the run ended before round 2's batch"
            assert time.monotonic() < deadline, "no round 2 batch in 120 s"
            time.sleep(0.05)
        time.sleep(0.5)
        proc.kill()
        proc.wait()
        resumed = ttc(tmp_path, "resume", str(killed))
        assert resumed.returncode == 0, resumed.stderr
        per_round = rounds_of_batches(server)
        stats = server.stats()
    finally:
        server.stop()
    assert per_round == Counter({"t1": 1, "t2": 1, "t3": 1, "t4": 1})  # one batch per round
    assert stats["by_route"].get("anthropic.generate", 0) == 0
    bought_once(killed)
    summary = load(killed / "summary.json")
    assert summary["complete"] is True
    assert (summary["input_tokens"], summary["output_tokens"]) == (
        stats["batch"]["tokens"]["input"], stats["batch"]["tokens"]["output"])  # fmt: skip
    assert summary["cost_usd"] == pytest.approx(
        (summary["input_tokens"] + summary["output_tokens"]) / 2 / 1e6, rel=1e-9
    )


@pytest.mark.slow
def test_anthropic_failures_and_expiries_are_sent_again_and_reported(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "1", "--batch-fail", "0.05",
                    "--batch-expire", "0.3", "--seed", "1")  # fmt: skip
    try:
        batched = ttc(tmp_path, "run", *RUN, "--base-url", server.url, *BATCH, "--out", "batched")
        assert batched.returncode == 0, batched.stderr
        stats = server.stats()
    finally:
        server.stop()
    run = tmp_path / "batched"
    assert load(run / "summary.json")["complete"] is True
    bought_once(run)
    resent: Counter[str] = Counter()
    for e in journal(run):
        if e["ev"] == "batch_state":
            resent.update(e.get("resent", {}))
    served = stats["batch"]
    assert resent["failed"] == served["requests_failed"] > 0
    assert resent["expired"] == served["requests_undone"] > 0
    assert served["batches"] > len(load(run / "summary.json")["rounds"])  # the re-sends' batches
    report = ttc(tmp_path, "report", str(run))
    assert report.returncode == 0, report.stderr
    total = resent["failed"] + resent["expired"]
    assert f"re-sent {total} (expired {resent['expired']}, failed {resent['failed']})" in (
        report.stdout
    )
