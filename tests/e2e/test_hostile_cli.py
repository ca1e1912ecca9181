"""`ttc run` and `ttc batch` as real subprocesses against a hostile OpenAI-compatible server on
loopback (the shared `loopback` fixture, in the test's own event loop): usage that is no count,
an absurd Retry-After, a body over the cap, a server that echoes the key."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import orjson
from fakes import Reply, Seen, StartHuge, StartLoopback

from ttc.engine._journal import read_journal

TTC = str(Path(sys.executable).with_name("ttc"))
KEY_ENV = "TTC_HOSTILE_TEST_KEY"
KEY = "sk-hostile-SECRET-0123456789abcdef"
RUN = ["--limit", "3", "--rounds", "2", "--embedder", "lexical", "--workers", "0",
       "--concurrency", "1", "--no-cache", "-q"]  # fmt: skip


async def ttc(tmp: Path, *args: str) -> tuple[int, str, str]:
    """`ttc ARGS` in `tmp` with the key in KEY_ENV (no other key): exit code, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({KEY_ENV: KEY, "TTC_CACHE_DIR": str(tmp / ".ttc-cache")})
    proc = await asyncio.create_subprocess_exec(
        TTC, *args, cwd=tmp, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def openai(url: str) -> list[str]:
    return ["--provider", "openai", "--model", "m", "--base-url", url, "--api-key-env", KEY_ENV]


def chat(content: str, usage: Any = None) -> Reply:
    body: dict[str, Any] = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return Reply(body=body)


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


# ── usage that is no count ───────────────────────────────────────────────────────────────────


def lying_usage(seen: Seen) -> Reply:
    return chat("the answer is 4. " * 8, {"prompt_tokens": -1_000_000, "completion_tokens": "abc"})


async def test_negative_and_textual_usage_is_estimated_and_max_cost_still_stops(
    tmp_path: Path, loopback: StartLoopback
) -> None:
    server = await loopback(lying_usage, "/v1")
    code, _, err = await ttc(tmp_path, "run", *RUN, *openai(server.url), "--out", "plain")
    assert code == 0, err
    summary = load(tmp_path / "plain" / "summary.json")
    assert summary["input_tokens"] > 0  # estimated from the prompts, not -1,000,000 each
    samples = [e for e in read_journal(tmp_path / "plain" / "journal.jsonl") if e["ev"] == "sample"]
    assert all(e["ok"] for e in samples)  # every response kept
    assert all(e["usage"][0] > 0 for e in samples)
    assert all(e["usage"][1] == len(e["text"]) // 4 for e in samples)
    assert summary["output_tokens"] == sum(len(e["text"]) // 4 for e in samples)
    log = (tmp_path / "plain" / "run.log").read_text()
    assert log.count("usage prompt_tokens is -1000000, not a token count") == 1
    assert log.count("usage completion_tokens is 'abc', not a token count") == 1
    # A dollar a token: the first sample's estimated tokens pass the budget.
    priced = ["--price", "1000000,1000000", "--max-cost", "50", "--out", "priced"]
    code, _, err = await ttc(tmp_path, "run", *RUN, *openai(server.url), *priced)
    assert code == 3, err
    summary = load(tmp_path / "priced" / "summary.json")
    assert "--max-cost" in summary["stopped"]
    assert summary["total_cost_usd"] >= 50
    assert summary["input_tokens"] >= 0


# ── an absurd Retry-After ────────────────────────────────────────────────────────────────────


def refuse_for_years(seen: Seen) -> Reply:
    return Reply(429, {"error": {"message": "come back in 31 years"}},
                 headers={"Retry-After": "999999999"})  # fmt: skip


async def test_a_retry_after_of_years_fails_the_samples_after_their_attempts(
    tmp_path: Path, loopback: StartLoopback
) -> None:
    server = await loopback(refuse_for_years, "/v1")
    run = [*RUN, "--rounds", "1", "--max-attempts", "2", "--out", "r"]
    code, _, err = await ttc(tmp_path, "run", *run, *openai(server.url))
    assert code == 0, err
    events = list(read_journal(tmp_path / "r" / "journal.jsonl"))
    failed = [e for e in events if e["ev"] == "sample"]
    assert len(failed) == 3
    assert all(not e["ok"] and e["attempts"] == 2 for e in failed)
    assert all(e["error"] == "rate_limited" for e in failed)
    assert all(e["message"] == "openai: HTTP 429: come back in 31 years" for e in failed)
    retries = [e for e in events if e["ev"] == "retry"]
    assert len(retries) == 3
    assert all(e["delay"] <= 0.5 for e in retries)  # our own first backoff, not 999999999 s
    assert len(server.seen) == 3 * 2


# ── a body over the cap ──────────────────────────────────────────────────────────────────────

MiB = 2**20


async def test_a_huge_answer_fails_its_sample_and_nothing_of_it_is_written(
    tmp_path: Path, huge: StartHuge
) -> None:
    server = await huge(40 * MiB)
    run = [*RUN, "--rounds", "1", "--limit", "2", *openai(server.url)]
    code, _, err = await ttc(tmp_path, "run", *run, "--out", "default")
    assert code == 0, err
    code, _, err = await ttc(tmp_path, "run", *run, "--max-response-bytes", str(MiB), "--out", "r")
    assert code == 0, err
    for name, said in (("default", "32 MiB"), ("r", "1 MiB")):
        samples = [
            e for e in read_journal(tmp_path / name / "journal.jsonl") if e["ev"] == "sample"
        ]
        assert len(samples) == 2
        assert all(e["error"] == "too_large" and e["attempts"] == 1 for e in samples)
        assert {e["message"] for e in samples} == {
            f"openai: response body over {said} (--max-response-bytes)"
        }
        assert (tmp_path / name / "journal.jsonl").stat().st_size < 64 * 1024
    # The flag is kept for a resume: the failed samples are sent again, under the same cap.
    code, _, err = await ttc(tmp_path, "resume", str(tmp_path / "r"))
    assert code == 0, err
    again = [e for e in read_journal(tmp_path / "r" / "journal.jsonl") if e["ev"] == "sample"]
    assert len(again) == 4
    assert {e["message"] for e in again} == {
        "openai: response body over 1 MiB (--max-response-bytes)"
    }
    assert all(sent < 32 * MiB for sent in server.sent[2:])
    assert len(server.sent) == 2 + 2 + 2


async def test_ttc_batch_records_a_huge_answer_as_an_error(tmp_path: Path, huge: StartHuge) -> None:
    server = await huge(40 * MiB)
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    batch = ["batch", "in.jsonl", "--out", "out.jsonl", "--base-url", server.url,
             "--api-key-env", KEY_ENV, "--max-response-bytes", str(MiB), "-q"]  # fmt: skip
    code, out, err = await ttc(tmp_path, *batch)
    assert code == 0, err
    (result,) = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert result["response"] is None
    assert result["error"] == {
        "code": "too_large",
        "message": "openai: response body over 1 MiB (--max-response-bytes)",
    }
    assert "1 requests ended in an error" in out
    assert (tmp_path / "out.jsonl.journal").stat().st_size < 64 * 1024
    assert len(server.sent) == 1
