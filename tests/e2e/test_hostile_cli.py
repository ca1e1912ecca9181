"""`ttc run` and `ttc batch` as real subprocesses against a hostile OpenAI-compatible server on
loopback (the shared `loopback` fixture, in the test's own event loop): usage that is no count,
an absurd Retry-After, a body over the cap, a server that echoes the key."""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import sys
from pathlib import Path
from typing import Any

import orjson
from fakes import Reply, Seen, StartHuge, StartLoopback
from fakes import chat_reply as chat

from ttc.engine.journal._journal import read_journal

TTC = str(Path(sys.executable).with_name("ttc"))
KEY_ENV = "TTC_HOSTILE_TEST_KEY"
KEY = "sk-hostile-SECRET-0123456789abcdef"
RUN = ["--limit", "3", "--rounds", "2", "--embedder", "lexical", "--workers", "0",
       "--concurrency", "1", "--no-cache", "-q"]  # fmt: skip


async def ttc(tmp: Path, *args: str) -> tuple[int, str, str]:
    """`ttc ARGS` in `tmp` with the key in KEY_ENV (no other key): exit code, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({KEY_ENV: KEY, "TTC_CACHE_DIR": str(tmp / ".ttc-cache")})
    # `ttc` on PATH, as in an activated environment: the commands it prints say `ttc`.
    env["PATH"] = os.pathsep.join([str(Path(TTC).parent), env.get("PATH", "")])
    proc = await asyncio.create_subprocess_exec(
        TTC, *args, cwd=tmp, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def openai(url: str) -> list[str]:
    return ["--provider", "openai", "--model", "m", "--base-url", url, "--api-key-env", KEY_ENV]


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
    assert code == 4, err  # every sample failed: said, and resumable
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
    # Both samples fail for good: exit 4, with a line that names why.
    code, out, err = await ttc(tmp_path, "run", *run, "--out", "default")
    assert code == 4, err
    assert "2 samples failed for good (all of them: too_large: " in out
    code, _, err = await ttc(tmp_path, "run", *run, "--max-response-bytes", str(MiB), "--out", "r")
    assert code == 4, err
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
    assert code == 4, err  # they fail again
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
    code, _, err = await ttc(tmp_path, *batch)
    assert code == 4, err  # a request ended in an error: said, and not a success
    (result,) = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert result["response"] is None
    assert result["error"] == {
        "code": "too_large",
        "message": "openai: response body over 1 MiB (--max-response-bytes)",
    }
    assert "1 requests ended in an error (all of them: too_large: " in err
    assert (tmp_path / "out.jsonl.journal").stat().st_size < 64 * 1024
    assert len(server.sent) == 1


# ── a server that echoes the key ─────────────────────────────────────────────────────────────


def secrets_in(tmp: Path, secrets: list[str], *texts: str) -> list[str]:
    """Where any of `secrets` appears: files under `tmp` (run directories, the cache, batch
    output and journal) and the captured `texts`."""
    found = [f"printed: {s[:8]}..." for text in texts for s in secrets if s in text]
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(tmp)}: {s[:8]}..." for s in secrets if s.encode() in data]
    return found


CALLS = itertools.count(1)


def echo(seen: Seen) -> Reply:
    """Everything the server was sent that authenticates it, back in every string it answers;
    one request in three is a 500 whose message quotes it (a retry, journaled)."""
    said = f"auth={seen.headers.get('Authorization')} query={seen.query} key={KEY}"
    if next(CALLS) % 3 == 0:
        return Reply(500, {"error": {"message": f"internal error for {said}"}})
    body = {
        "model": said,
        "choices": [{"index": 0, "message": {"content": f"the answer is 4. {said}"},
                     "finish_reason": said}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        said: said,
    }  # fmt: skip
    return Reply(body=body)


async def test_ttc_run_writes_and_prints_no_key_a_server_echoes(
    tmp_path: Path, loopback: StartLoopback
) -> None:
    server = await loopback(echo, "/v1")
    # The cache on, the live line and the log lines on: everything that could be written.
    run = ["--limit", "3", "--rounds", "2", "--embedder", "lexical", "--workers", "0",
           "--max-attempts", "4", "--live", "--out", "r"]  # fmt: skip
    code, out, err = await ttc(tmp_path, "run", *run, *openai(server.url))
    assert code == 0, err
    assert {s.headers["Authorization"] for s in server.seen} == {f"Bearer {KEY}"}
    samples = [e for e in read_journal(tmp_path / "r" / "journal.jsonl") if e["ev"] == "sample"]
    assert samples
    assert all(e["ok"] and "auth=Bearer [redacted]" in e["text"] for e in samples)
    assert (tmp_path / ".ttc-cache" / "responses.sqlite3").exists()
    assert secrets_in(tmp_path, [KEY], out, err) == []


async def test_ttc_batch_writes_and_prints_no_key_a_server_echoes(
    tmp_path: Path, loopback: StartLoopback
) -> None:
    server = await loopback(echo, "/v1")
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}}
        for i in range(5)
    ]  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    batch = ["batch", "in.jsonl", "--out", "out.jsonl", "--base-url", server.url,
             "--api-key-env", KEY_ENV, "--max-attempts", "1"]  # fmt: skip
    code, out, err = await ttc(tmp_path, *batch)
    assert code == 4, err  # the 500s ended in an error: said, not a success
    results = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    answered = [r for r in results if r["response"]]
    failed = [r for r in results if r["error"]]
    assert answered
    assert failed  # the 500s, their messages journaled
    body = answered[0]["response"]["body"]
    assert body["model"] == "auth=Bearer [redacted] query= key=[redacted]"
    assert body[body["model"]] == body["model"]  # keys are redacted too
    assert all("[redacted]" in r["error"]["message"] for r in failed)
    assert secrets_in(tmp_path, [KEY], out, err) == []


async def test_a_credential_in_base_url_is_sent_and_stored_without_it(
    tmp_path: Path, loopback: StartLoopback
) -> None:
    server = await loopback(echo, "/v1")
    password, token = "PaSsWoRd-0123456789", "QuErYkEy-0123456789"
    basic = base64.b64encode(f"user:{password}".encode()).decode()
    host = server.url.removeprefix("http://")
    url = f"http://user:{password}@{host}?api-key={token}&x=1"
    # With a key too: the URL's user:password takes its place, as in httpx and the OpenAI SDK.
    run = [*RUN, "--out", "r", "--max-attempts", "1", *openai(url)]
    code, out, err = await ttc(tmp_path, "run", *run)
    assert code == 4, err  # the server's 500s failed samples for good: said
    # Sent as the server expects: user:password as Basic auth, the query on every request.
    assert {s.headers["Authorization"] for s in server.seen} == {f"Basic {basic}"}
    assert {s.query for s in server.seen} == {f"api-key={token}&x=1"}
    config = load(tmp_path / "r" / "config.json")
    shown = f"http://REDACTED@{host}?api-key=REDACTED&x=1"
    assert config["endpoint"] == shown
    assert shown in config["invocation"]["argv"]
    secrets = [password, token, basic, KEY]
    assert secrets_in(tmp_path, secrets, out, err) == []
    # A resume cannot send what was not stored: it asks for the URL again, in one line.
    code, out, err = await ttc(tmp_path, "resume", "r")
    assert code == 2
    assert err.strip() == (
        "ttc: error: --base-url: the run's URL held a credential, which is never stored; "
        "give it again: ttc resume r --base-url URL"
    )
    requests = len(server.seen)
    code, out, err = await ttc(tmp_path, "resume", "r", "--base-url", url, "--max-attempts", "9")
    assert code == 0, err
    assert len(server.seen) > requests  # the failed samples (the 500s) are sent again
    assert secrets_in(tmp_path, secrets, out, err) == []
