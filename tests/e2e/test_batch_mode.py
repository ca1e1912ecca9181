"""Batch mode end to end: `ttc run --batch` against `ttc serve`'s Batch API, in subprocesses.

A batch run buys no synchronous completion, lands the same samples and tokens as a synchronous
run of the same seed, at half its cost; killed with SIGKILL while a batch is in progress and
resumed, it creates no second batch for a round that had one and ends as an uninterrupted run;
with failures and expiries inside batches it completes, and `ttc report` counts the re-sent
requests. Everything here is simulated (the sim model behind `ttc serve`)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from e2e.test_e2e_serve import TTC, Server, env
from e2e.test_overnight import outcome

from ttc.engine.journal import read_journal

SUITE = ["--per-task", "6"]
RUN = [*SUITE, "--embedder", "lexical", "--workers", "1", "--no-cache", "-q", "--no-live",
       "--provider", "openai", "--model", "sim", "--price", "1,1"]  # fmt: skip
BATCH = ["--batch", "--batch-poll", "0.5"]


def ttc(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TTC, *args], cwd=tmp, env=env(tmp), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def batches(server: Server) -> list[dict[str, Any]]:
    """Every batch the server holds, via its own list route."""
    found: list[dict[str, Any]] = []
    after = ""
    while True:
        url = f"{server.url}/v1/batches?limit=100" + (f"&after={after}" if after else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            page = orjson.loads(response.read())
        found += page["data"]
        if not page["has_more"]:
            return found
        after = page["last_id"]


def journal(run: Path) -> list[dict[str, Any]]:
    return list(read_journal(run / "journal.jsonl"))


def bought_once(run: Path) -> None:
    keys = [(e["round"], e["item"], e["k"]) for e in journal(run)
            if e["ev"] == "sample" and e["ok"]]  # fmt: skip
    assert len(keys) == len(set(keys))


@pytest.mark.slow
def test_batch_run_is_half_price_and_sends_nothing_synchronously(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "3")
    try:
        url = ["--base-url", server.url + "/v1"]
        batched = ttc(tmp_path, "run", *RUN, *url, *BATCH, "--out", "batched")
        assert batched.returncode == 0, batched.stderr
        stats = server.stats()
        synced = ttc(tmp_path, "run", *RUN, *url, "--out", "synced")
        assert synced.returncode == 0, synced.stderr
    finally:
        server.stop()
    assert stats["by_route"].get("openai.generate", 0) == 0  # not one synchronous completion
    b, s = load(tmp_path / "batched" / "summary.json"), load(tmp_path / "synced" / "summary.json")
    assert outcome(tmp_path / "batched") == outcome(tmp_path / "synced")
    for key in ("input_tokens", "output_tokens", "thinking_tokens", "solved"):
        assert b[key] == s[key]
    assert b["cost_usd"] == pytest.approx(s["cost_usd"] / 2, rel=1e-9)
    assert b["simulated"] is True
    served = stats["batch"]["tokens"]
    assert (served["input"], served["output"]) == (b["input_tokens"], b["output_tokens"])
    assert stats["batch"]["batches"] == len(b["rounds"])  # one batch a round, no failures


@pytest.mark.slow
def test_sigkill_during_a_batch_then_resume_makes_no_second_batch(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "3")
    try:
        url = ["--base-url", server.url + "/v1"]
        reference = ttc(tmp_path, "run", *RUN, *url, "--out", "reference")
        assert reference.returncode == 0, reference.stderr
        killed = tmp_path / "killed"
        proc = subprocess.Popen([TTC, "run", *RUN, *url, *BATCH, "--out", str(killed)],
                                cwd=tmp_path, env=env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        # Killed while round 2's batch is in progress (its id journaled, its answers not in).
        while not any(e["ev"] == "batch" and e["round"] == 2 for e in _journal_so_far(killed)):
            assert proc.poll() is None, "the run ended before round 2's batch"
            assert time.monotonic() < deadline, "no round 2 batch in 120 s"
            time.sleep(0.05)
        time.sleep(0.5)
        proc.kill()
        proc.wait()
        before = batches(server)
        resumed = ttc(tmp_path, "resume", str(killed))
        assert resumed.returncode == 0, resumed.stderr
        after = batches(server)
    finally:
        server.stop()
    tags = Counter(b["metadata"]["ttc_tag"].split("-")[1] for b in after)
    assert tags == Counter({"t1": 1, "t2": 1, "t3": 1, "t4": 1})  # one batch per round
    assert {b["id"] for b in before} <= {b["id"] for b in after}
    assert outcome(killed) == outcome(tmp_path / "reference")
    bought_once(killed)
    summary = load(killed / "summary.json")
    assert summary["complete"] is True
    assert summary["cost_usd"] == pytest.approx(
        load(tmp_path / "reference" / "summary.json")["cost_usd"] / 2, rel=1e-9
    )


def _journal_so_far(run: Path) -> list[dict[str, Any]]:
    return list(read_journal(run / "journal.jsonl"))  # a torn last frame is left out


@pytest.mark.slow
def test_failures_and_expiries_inside_batches_are_sent_again_and_reported(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "1", "--batch-fail", "0.05",
                    "--batch-expire", "0.3", "--seed", "1")  # fmt: skip
    try:
        url = ["--base-url", server.url + "/v1"]
        batched = ttc(tmp_path, "run", *RUN, *url, *BATCH, "--out", "batched")
        assert batched.returncode == 0, batched.stderr
        synced = ttc(tmp_path, "run", *RUN, *url, "--out", "synced")
        assert synced.returncode == 0, synced.stderr
        stats = server.stats()
    finally:
        server.stop()
    run = tmp_path / "batched"
    assert outcome(run) == outcome(tmp_path / "synced")
    bought_once(run)
    resent: Counter[str] = Counter()
    for e in journal(run):
        if e["ev"] == "batch_state":
            resent.update(e.get("resent", {}))
    served = stats["batch"]
    assert resent["failed"] == served["requests_failed"] > 0
    assert resent["expired"] == served["requests_undone"] > 0
    report = ttc(tmp_path, "report", str(run))
    assert report.returncode == 0, report.stderr
    total = resent["failed"] + resent["expired"]
    assert f"re-sent {total} (expired {resent['expired']}, failed {resent['failed']})" in (
        report.stdout
    )


@pytest.mark.slow
def test_ttc_batch_via_batch_api_resumes_without_a_second_batch(tmp_path: Path) -> None:
    lines = [
        {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "sim", "messages": [{"role": "user", "content": f"Add {i} and {i}."}],
                  "seed": i}}
        for i in range(12)
    ]  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    server = Server(tmp_path, *SUITE, "--batch-delay", "3")
    try:
        url = ["--base-url", server.url + "/v1"]
        command = [TTC, "batch", "in.jsonl", "--out", "out.jsonl", *url, "--via-batch-api",
                   "--batch-poll", "0.5"]  # fmt: skip
        proc = subprocess.Popen(command, cwd=tmp_path, env=env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        journal = tmp_path / "out.jsonl.batchapi"
        deadline = time.monotonic() + 60
        while b'"ev":"batch"' not in (journal.read_bytes() if journal.exists() else b""):
            assert proc.poll() is None, "ttc batch ended before its batch was created"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.kill()  # while the batch is in progress
        proc.wait()
        assert not (tmp_path / "out.jsonl").exists()
        again = subprocess.run(command, cwd=tmp_path, env=env(tmp_path), capture_output=True,
                               text=True, timeout=120, check=False)  # fmt: skip
        assert again.returncode == 0, again.stderr
        sync = ttc(tmp_path, "batch", "in.jsonl", "--out", "sync.jsonl", *url)
        assert sync.returncode == 0, sync.stderr
        held = batches(server)
    finally:
        server.stop()
    assert len(held) == 1  # the resumed command polled the batch it had made
    out = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    ref = [orjson.loads(x) for x in (tmp_path / "sync.jsonl").read_bytes().splitlines()]
    assert [x["custom_id"] for x in out] == [x["custom_id"] for x in lines]

    def answer(x: dict[str, Any]) -> tuple[int, str, Any]:
        body = x["response"]["body"]
        return x["response"]["status_code"], body["choices"][0]["message"]["content"], body["usage"]

    assert [answer(x) for x in out] == [answer(x) for x in ref]


@pytest.mark.slow
def test_ttc_batch_via_batch_api_refuses_what_the_server_will_not_take_before_buying(
    tmp_path: Path,
) -> None:
    # 30 chat lines and one /v1/embeddings line, which `ttc serve`'s Batch API (chat only)
    # refuses: it used to create the chat batch, then crash on every run with a traceback and no
    # output. Now the embeddings batch is asked for first, refused in one line, nothing bought.
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "sim", "messages": [{"role": "user", "content": f"Add {i} and 1."}]}}
        for i in range(30)
    ]  # fmt: skip
    lines.append({"custom_id": "e0", "method": "POST", "url": "/v1/embeddings",
                  "body": {"model": "sim", "input": "hello"}})  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    server = Server(tmp_path, *SUITE, "--batch-delay", "1")
    try:
        url = ["--base-url", server.url + "/v1"]
        proc = ttc(tmp_path, "batch", "in.jsonl", "--out", "out.jsonl", *url, "--via-batch-api",
                   "--batch-poll", "0.5")  # fmt: skip
        held = batches(server)
    finally:
        server.stop()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (said,) = [x for x in proc.stderr.splitlines() if "--via-batch-api" in x]
    assert "refuses the /v1/embeddings requests" in said
    assert "nothing was bought" in said
    assert held == []  # no chat batch was created, so none is lost
