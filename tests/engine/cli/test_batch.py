"""`ttc batch`: the Batch input validated, one output line per input line in order, the journal
and resume, interruption; a scripted fake endpoint, and one real loopback HTTP server."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from ttc.engine.cli._batch import add_batch_arguments, batch_main, cmd_batch
from ttc.engine.cli._batchio import LAYOUT, journal_path, output_bytes
from ttc.engine.cli._batchsend import (
    BatchProgress,
    BatchSummary,
    RawProvider,
    SendPolicy,
    run_batch,
)
from ttc.engine.contract._errors import (
    BadRequest,
    ConfigError,
    DataError,
    Fatal,
    ProviderError,
    RateLimited,
    Transient,
)
from ttc.engine.contract._types import RateInfo
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy

CHAT = "/v1/chat/completions"
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
CHOICES = [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]

# A scripted step: a status to answer with, an error to raise, or "hang" (wait until cancelled).
Step = int | ProviderError | str


def name_of(body: dict[str, Any]) -> str:
    """Requests are named by their text: the first message's content, or the input."""
    if "messages" in body:
        return str(body["messages"][0]["content"])
    return str(body["input"])


class FakeEndpoint:
    """Answers 200 unless scripted; records every call; `hold_after` calls, later ones wait."""

    def __init__(self, script: dict[str, list[Step]] | None = None, hold_after: int | None = None):
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.hold_after = hold_after
        self.release = asyncio.Event()

    def names(self) -> list[str]:
        return [name_of(body) for _, body in self.calls]

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any, RateInfo | None]:
        self.calls.append((path, body))
        if self.hold_after is not None and len(self.calls) > self.hold_after:
            await self.release.wait()
        steps = self.script.get(name_of(body))
        step = steps.pop(0) if steps else 200
        if isinstance(step, ProviderError):
            raise step
        if step == "hang":
            await asyncio.Event().wait()
        if step == 200:
            reply = {
                "id": f"chatcmpl-{name_of(body)}",
                "model": body.get("model"),
                "choices": CHOICES,
                "usage": USAGE,
            }
            return 200, reply, None
        return int(step), {"error": {"message": f"bad {name_of(body)}"}}, None


def request(cid: str, url: str = CHAT, **body: Any) -> dict[str, Any]:
    if url == "/v1/embeddings":
        payload: dict[str, Any] = {"model": "emb", "input": cid}
    else:
        payload = {"model": "gpt-x", "messages": [{"role": "user", "content": cid}]}
    return {"custom_id": cid, "method": "POST", "url": url, "body": {**payload, **body}}


def write_input(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def batch(
    tmp_path: Path,
    endpoint: RawProvider,
    *,
    concurrency: int = 4,
    max_attempts: int = 3,
    timeout_s: float = 5.0,
    **kwargs: Any,
) -> BatchSummary:
    return await run_batch(
        tmp_path / "in.jsonl",
        tmp_path / "out.jsonl",
        endpoint,
        SendPolicy(
            Limiter(max_concurrency=concurrency),
            RetryPolicy(max_attempts=max_attempts, base_delay=0),
            timeout_s,
        ),
        **kwargs,
    )


async def until(condition: Any, limit: int = 10_000, step: float = 0.0) -> None:
    """Lets the loop run until `condition()` holds, waiting `step` seconds between looks."""
    for _ in range(limit):
        if condition():
            return
        await asyncio.sleep(step)
    raise AssertionError("condition never held")


async def test_every_line_gets_one_output_line_in_input_order(tmp_path: Path) -> None:
    names = ["ok1", "bad", "limited", "down", "fatal", "emb", "ok2"]
    lines = [request(n) for n in names]
    lines[5] = request("emb", url="/v1/embeddings")
    write_input(tmp_path / "in.jsonl", lines)
    endpoint = FakeEndpoint(
        {
            "bad": [400],
            "limited": [RateLimited("429 slow down"), 200],
            "down": [Transient("503 unavailable")] * 3,
            "fatal": [Fatal("401 no key")],
        }
    )
    summary = await batch(tmp_path, endpoint)
    out = read_lines(tmp_path / "out.jsonl")
    assert [o["custom_id"] for o in out] == names
    by_id = {o["custom_id"]: o for o in out}
    assert by_id["ok1"]["response"]["status_code"] == 200
    assert by_id["ok1"]["response"]["body"]["usage"] == USAGE
    # Refused as bad: recorded as a response, as OpenAI does, and sent once.
    assert by_id["bad"]["response"]["status_code"] == 400
    assert by_id["bad"]["response"]["body"] == {"error": {"message": "bad bad"}}
    assert by_id["bad"]["error"] is None
    assert by_id["limited"]["response"]["status_code"] == 200
    assert by_id["down"]["response"] is None
    assert by_id["down"]["error"] == {"code": "transient", "message": "503 unavailable"}
    assert by_id["fatal"]["error"] == {"code": "fatal", "message": "401 no key"}
    assert endpoint.names().count("limited") == 2
    assert endpoint.names().count("down") == 3
    assert endpoint.names().count("fatal") == 1
    assert endpoint.names().count("bad") == 1
    # The leading /v1 is the provider's base URL's: the path is relative to it.
    assert {p for p, _ in endpoint.calls} == {"/chat/completions", "/embeddings"}
    assert summary.counts == {"200": 4, "400": 1, "error:transient": 1, "error:fatal": 1}
    assert (summary.answered, summary.refused, summary.errors) == (4, 1, 2)
    assert (summary.total, summary.sent, summary.replayed) == (7, 7, 0)
    assert (summary.retries, summary.rate_limited) == (3, 1)
    assert summary.tokens == 4 * 12
    assert summary.output == tmp_path / "out.jsonl"


async def test_batch_output_format_fields(tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", [request("a"), request("b")])
    await batch(tmp_path, FakeEndpoint({"b": [Transient("reset")]}), max_attempts=1)
    ok, failed = read_lines(tmp_path / "out.jsonl")
    assert set(ok) == {"id", "custom_id", "response", "error"}
    assert re.fullmatch(r"batch_req_[0-9a-f]{32}", ok["id"])
    assert ok["custom_id"] == "a"
    assert set(ok["response"]) == {"status_code", "request_id", "body"}
    assert ok["response"]["status_code"] == 200
    assert isinstance(ok["response"]["request_id"], str)
    assert ok["response"]["request_id"]
    assert ok["response"]["body"] == {
        "id": "chatcmpl-a",
        "model": "gpt-x",
        "choices": CHOICES,
        "usage": USAGE,
    }
    assert ok["error"] is None
    assert failed["id"] != ok["id"]
    assert failed["response"] is None
    assert failed["error"] == {"code": "transient", "message": "reset"}


async def test_per_attempt_timeout_is_a_retryable_error(tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", [request("slow")])
    endpoint = FakeEndpoint({"slow": ["hang", "hang"]})
    await batch(tmp_path, endpoint, max_attempts=2, timeout_s=0.005)
    [line] = read_lines(tmp_path / "out.jsonl")
    assert line["error"]["code"] == "transient"
    assert "timed out" in line["error"]["message"]
    assert len(endpoint.calls) == 2


async def test_model_overrides_and_fills_the_body(tmp_path: Path) -> None:
    lines = [request("a"), request("b")]
    del lines[1]["body"]["model"]
    write_input(tmp_path / "in.jsonl", lines)
    endpoint = FakeEndpoint()
    await batch(tmp_path, endpoint, model="gpt-y")
    assert sorted((name_of(b), b["model"]) for _, b in endpoint.calls) == [
        ("a", "gpt-y"),
        ("b", "gpt-y"),
    ]
    # Without --model, a body without one is bad input.
    with pytest.raises(DataError, match=r"in\.jsonl:2: field 'body\.model' is missing"):
        await batch(tmp_path, FakeEndpoint())


async def test_resume_after_cancel_sends_only_the_rest(tmp_path: Path) -> None:
    names = [f"r{i}" for i in range(12)]
    write_input(tmp_path / "in.jsonl", [request(n) for n in names])
    first = FakeEndpoint(hold_after=5)
    task = asyncio.create_task(batch(tmp_path, first, concurrency=1))
    await until(lambda: len(first.calls) == 6)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not (tmp_path / "out.jsonl").exists()
    results = [e for e in read_lines(journal_path(tmp_path / "out.jsonl")) if e["ev"] == "result"]
    assert [e["out"]["custom_id"] for e in results] == names[:5]

    second = FakeEndpoint()
    summary = await batch(tmp_path, second, resume=True)
    landed_before = set(names[:5])
    assert sorted(second.names()) == sorted(set(names) - landed_before)  # none twice
    assert (summary.sent, summary.replayed) == (7, 5)
    assert [o["custom_id"] for o in read_lines(tmp_path / "out.jsonl")] == names
    # The tallies count the results read back from the journal as well as the new ones.
    assert summary.counts == {"200": 12}
    assert summary.tokens == 12 * 12


async def test_stop_writes_the_journal_only_and_a_rerun_resumes_by_itself(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(10)]
    write_input(tmp_path / "in.jsonl", [request(n) for n in names])
    stop = asyncio.Event()
    first = FakeEndpoint(hold_after=3)
    task = asyncio.create_task(batch(tmp_path, first, concurrency=1, stop=stop))
    await until(lambda: len(first.calls) == 4)
    stop.set()
    first.release.set()  # the request in flight lands; nothing new is sent
    summary = await task
    assert summary.interrupted
    assert summary.output is None
    assert summary.sent == 4
    assert sum(summary.counts.values()) == 4
    assert not (tmp_path / "out.jsonl").exists()
    assert len(first.calls) == 4

    second = FakeEndpoint()
    summary = await batch(tmp_path, second)  # no --resume: the journal of the same input is used
    assert second.names() == names[4:]
    assert not summary.interrupted
    assert [o["custom_id"] for o in read_lines(tmp_path / "out.jsonl")] == names


async def test_errors_are_sent_again_final_results_are_not(tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", [request(n) for n in ("ok", "bad", "down", "fatal")])
    script: dict[str, list[Step]] = {
        "bad": [400],
        "down": [Transient("503")] * 2,
        "fatal": [Fatal("401")],
    }
    first = await batch(tmp_path, FakeEndpoint(script), max_attempts=2)
    assert first.errors == 2
    again = FakeEndpoint()
    summary = await batch(tmp_path, again)
    assert sorted(again.names()) == ["down", "fatal"]
    assert summary.counts == {"200": 3, "400": 1}
    out = read_lines(tmp_path / "out.jsonl")
    assert [o["custom_id"] for o in out] == ["ok", "bad", "down", "fatal"]
    assert out[2]["response"]["status_code"] == 200
    assert out[2]["error"] is None


async def test_a_refused_account_stops_the_batch_resumably(tmp_path: Path) -> None:
    names = [f"k{i}" for i in range(50)]
    write_input(tmp_path / "in.jsonl", [request(n) for n in names])
    revoked = Fatal("HTTP 401: invalid_api_key", stops_run=True)
    first = FakeEndpoint({n: [revoked] for n in names})
    summary = await batch(tmp_path, first, concurrency=2)
    assert summary.refusal is not None
    assert "invalid_api_key" in summary.refusal
    assert summary.interrupted  # no output file: the rest was never sent
    assert len(first.calls) <= 3  # the first refusal and what was already in flight
    again = FakeEndpoint()  # the key is fixed: everything is sent, once
    summary = await batch(tmp_path, again)
    assert sorted(again.names()) == sorted(names)
    assert summary.counts == {"200": 50}


async def test_a_torn_journal_tail_is_cut_and_its_request_sent_again(tmp_path: Path) -> None:
    names = ["t0", "t1", "t2", "t3"]
    write_input(tmp_path / "in.jsonl", [request(n) for n in names])
    await batch(tmp_path, FakeEndpoint(), concurrency=1)
    journal = journal_path(tmp_path / "out.jsonl")
    data = journal.read_bytes()
    journal.write_bytes(data[:-25])  # a write cut off in the middle of the last result
    again = FakeEndpoint()
    summary = await batch(tmp_path, again)
    assert again.names() == ["t3"]
    assert summary.replayed == 3
    events = read_lines(journal)  # every line parses: the torn one is gone
    assert [e["ev"] for e in events].count("start") == 2
    assert [o["custom_id"] for o in read_lines(tmp_path / "out.jsonl")] == names


async def test_a_different_input_is_refused(tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", [request("a"), request("b")])
    await batch(tmp_path, FakeEndpoint())
    write_input(tmp_path / "in.jsonl", [request("a"), request("c")])
    endpoint = FakeEndpoint()
    for resume in (False, True):
        with pytest.raises(ConfigError, match="journal of a different input"):
            await batch(tmp_path, endpoint, resume=resume)
    assert endpoint.calls == []


async def test_resume_without_a_journal_is_refused(tmp_path: Path) -> None:
    write_input(tmp_path / "in.jsonl", [request("a")])
    with pytest.raises(ConfigError, match="--resume: no journal"):
        await batch(tmp_path, FakeEndpoint(), resume=True)


async def test_progress_logs_a_line_while_requests_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_input(tmp_path / "in.jsonl", [request(f"p{i}") for i in range(4)])
    script: dict[str, list[Step]] = {"p0": [RateLimited("429")], "p1": [Transient("reset")] * 3}
    endpoint = FakeEndpoint(script, hold_after=5)
    caplog.set_level(logging.INFO, logger="ttc")
    task = asyncio.create_task(
        batch(tmp_path, endpoint, concurrency=1, progress=BatchProgress(every_s=0.001))
    )
    await until(lambda: len(endpoint.calls) == 6)  # p0 twice, p1 three times, p2 waits
    await until(lambda: any(r.message.startswith("batch 2/4") for r in caplog.records), step=1e-3)
    endpoint.release.set()
    await task
    line = next(r.message for r in caplog.records if r.message.startswith("batch 2/4"))
    assert "req/min | 429s 1 retries 3 | errors 1 | tokens 12" in line


def test_token_estimate_is_text_over_four_plus_the_output_cap_or_mean() -> None:
    from ttc.engine.cli._batchio import BatchJob
    from ttc.engine.cli._batchsend import _Estimator

    messages = [{"role": "user", "content": "x" * 400}]
    text = len(orjson.dumps(messages)) // 4
    est = _Estimator()
    capped = BatchJob(0, "a", CHAT, {"messages": messages, "max_completion_tokens": 100, "n": 2})
    assert est.estimate(capped) == text + 200
    embed = BatchJob(1, "b", "/v1/embeddings", {"input": "y" * 40})
    assert est.estimate(embed) == len(b'"' + b"y" * 40 + b'"') // 4
    uncapped = BatchJob(2, "c", CHAT, {"messages": messages})
    assert est.estimate(uncapped) == text + 512
    for out in (10, 30):  # the running mean of completion tokens replaces the default
        body = {"usage": {"prompt_tokens": 1, "completion_tokens": out, "total_tokens": out + 1}}
        assert est.account((200, body, None)) == (out + 1, None)
    assert est.estimate(uncapped) == text + 20


GOOD = orjson.dumps(request("a")).decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "\nnot json\n", r":2: malformed JSON \(.*column 1\)"),
        (GOOD + "\n" + "[" * 200_000 + "]" * 200_000 + "\n", r":2: nested too deep$"),
        ('{"custom_id": ' + "9" * 5000 + "}\n", r":1: malformed JSON \(number is infinity"),
        ("[1, 2]\n", r":1: expected a JSON object, got list"),
        ('{"method": "POST", "url": "/v1/embeddings", "body": {}}\n', r":1: .*'custom_id'"),
        ('{"custom_id": "x", "url": "/v1/embeddings", "body": {}}\n', r":1: .*'method'"),
        ('{"custom_id": "x", "method": "POST", "body": {}}\n', r":1: .*'url'"),
        ('{"custom_id": "x", "method": "POST", "url": "/v1/embeddings"}\n', r":1: .*'body'"),
        ('{"custom_id": 7, "method": "POST", "url": "/v1/embeddings", "body": {}}\n', "custom_id"),
        (GOOD.replace('"POST"', '"GET"'), r":1: field 'method' must be \"POST\", got 'GET'"),
        (GOOD.replace(CHAT, "/v1/images/generations"), r":1: field 'url' '/v1/images/gen"),
        (GOOD.replace('"body":{', '"body":["x"],"b":{'), r":1: field 'body' must be an object"),
        (f"{GOOD}\n\n{GOOD}\n", r":3: duplicate custom_id 'a' \(first on line 1\)"),
        ("\n  \n", r"in\.jsonl: no requests: the file is empty"),
    ],
)
async def test_bad_input_is_named_by_line_before_any_request(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "in.jsonl").write_text(text)
    endpoint = FakeEndpoint()
    with pytest.raises(DataError, match=message) as info:
        await batch(tmp_path, endpoint)
    assert str(info.value).startswith(str(tmp_path / "in.jsonl"))
    assert endpoint.calls == []
    assert not journal_path(tmp_path / "out.jsonl").exists()


async def test_a_missing_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"in\.jsonl: no such file"):
        await batch(tmp_path, FakeEndpoint())


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b"{garbage", "malformed JSON ("),
        (b"[" * 5000, "nested too deep"),
        (b"[1]", "got list"),
        (b'{"ev":"result","i":-1,"final":true,"attempts":1,"out":{}}', "corrupt journal line"),
        (b'{"ev":"result","i":3,"final":true,"attempts":1,"out":{}}', "corrupt journal line"),
    ],
)
async def test_a_corrupt_journal_line_is_named_and_nothing_is_sent(
    tmp_path: Path, line: bytes, what: str
) -> None:
    write_input(tmp_path / "in.jsonl", [request(n) for n in ("a", "b", "c")])
    await batch(tmp_path, FakeEndpoint())
    journal = journal_path(tmp_path / "out.jsonl")
    lines = journal.read_bytes().split(b"\n")
    lines[2] = line
    journal.write_bytes(b"\n".join(lines))
    endpoint = FakeEndpoint()
    with pytest.raises(DataError) as caught:
        await batch(tmp_path, endpoint, resume=True)
    assert str(caught.value).startswith(f"{journal}:3: ")
    assert what in str(caught.value)
    assert endpoint.calls == []


async def test_an_input_that_is_a_directory_or_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").mkdir()
    with pytest.raises(DataError, match=r"in\.jsonl: is a directory, not a file$"):
        await batch(tmp_path, FakeEndpoint())
    (tmp_path / "in.jsonl").rmdir()
    (tmp_path / "in.jsonl").write_bytes(GOOD.encode() + b'\n{"custom_id": "\xff"}\n')
    with pytest.raises(DataError, match=r"in\.jsonl:2: not UTF-8 text$"):
        await batch(tmp_path, FakeEndpoint())


async def test_a_batch_whose_first_attempts_all_fail_alike_stops_at_once(tmp_path: Path) -> None:
    # Nothing listening: every attempt fails the same way. The batch stops once its first 8
    # attempts have, naming why, instead of retrying all 40 requests 6 times each.
    names = [f"d{i}" for i in range(40)]
    write_input(tmp_path / "in.jsonl", [request(n) for n in names])
    refused = Transient("Cannot connect to host 127.0.0.1:8009")
    endpoint = FakeEndpoint({n: [refused] * 6 for n in names})
    summary = await batch(tmp_path, endpoint, concurrency=2, max_attempts=6)
    assert summary.refusal == (
        "the first 8 attempts all failed, none answered: "
        "transient: Cannot connect to host 127.0.0.1:8009"
    )
    assert summary.interrupted
    assert len(endpoint.calls) <= 8 + 2


async def test_a_batch_that_ends_with_errors_exits_non_zero_naming_the_commonest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Answers between the failures (so no stop), but three requests fail for good: exit 4 and
    # one line naming the commonest cause and the command that sends them again.
    write_input(tmp_path / "in.jsonl", [request(n) for n in ("ok", "a", "b", "c")])
    script: dict[str, list[Step]] = {
        "a": [Transient("503 unavailable")] * 2,
        "b": [Transient("503 unavailable")] * 2,
        "c": [BadRequest("context too long")],
    }
    args = parse([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl")])
    args.max_attempts, args.concurrency = 2, 1
    assert await batch_main(args, FakeEndpoint(script)) == 4
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "ended in an error" in x]
    assert line.startswith("ttc: 3 requests ended in an error (2 of them: transient: 503")
    assert line.endswith(f"--out {tmp_path / 'out.jsonl'} --resume")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ttc batch")
    add_batch_arguments(parser)
    return parser.parse_args(argv)


def test_flags_and_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["in.jsonl", "--out", "out.jsonl"])
    assert (args.input, args.out, args.model, args.resume) == (
        Path("in.jsonl"),
        Path("out.jsonl"),
        None,
        False,
    )
    assert (args.base_url, args.api_key_env) == ("https://api.openai.com/v1", "OPENAI_API_KEY")
    assert (args.concurrency, args.timeout, args.max_attempts, args.rpm, args.tpm) == (
        64,
        300.0,
        6,
        None,
        None,
    )
    for bad in (["--concurrency", "0"], ["--timeout", "nan"], ["--rpm", "-1"]):
        with pytest.raises(SystemExit):
            parse(["in.jsonl", "--out", "o", *bad])
        assert bad[0] in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["in.jsonl"])  # --out is required


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals need the main thread"
)
async def test_ctrl_c_stops_writes_the_journal_and_prints_the_resume_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_input(tmp_path / "in.jsonl", [request(f"c{i}") for i in range(6)])
    args = parse([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl")])
    args.concurrency, args.grace = 1, 0.0  # the request in flight hangs: cut off at once
    endpoint = FakeEndpoint(hold_after=2)
    task = asyncio.create_task(batch_main(args, endpoint))
    await until(lambda: len(endpoint.calls) == 3)
    os.kill(os.getpid(), signal.SIGINT)
    assert await task == 130
    assert not (tmp_path / "out.jsonl").exists()
    results = [e for e in read_lines(journal_path(tmp_path / "out.jsonl")) if e["ev"] == "result"]
    assert len(results) == 2
    err = capsys.readouterr().err
    assert "ttc: stopping" in err
    assert f"--out {tmp_path / 'out.jsonl'} --resume" in err


class Loopback:
    """A real HTTP endpoint: chat completions (400 for the text "bad") and embeddings.

    The text or input "empty N" is answered N times with a 200 that holds no answer (no choices,
    no data), then as usual.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, dict[str, Any]]] = []
        self.url = ""
        self.empty_left: dict[tuple[str, str], int] = {}

    def empty(self, path: str, text: str) -> bool:
        """Whether this request of `text` to `path` gets an empty 200."""
        if not text.startswith("empty "):
            return False
        left = self.empty_left.setdefault((path, text), int(text.split()[1]))
        self.empty_left[path, text] = left - 1
        return left > 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.seen.append((request.path, request.headers.get("Authorization"), body))
        if request.path == "/v1/embeddings":
            if self.empty(request.path, body["input"]):
                return web.json_response({"object": "list", "data": [], "model": "emb"})
            data = [{"object": "embedding", "index": 0, "embedding": [0.5, 1.0]}]
            usage = {"prompt_tokens": 2, "total_tokens": 2}
            return web.json_response({"object": "list", "data": data, "usage": usage})
        if self.empty(request.path, body["messages"][0]["content"]):
            return web.json_response({"id": "chatcmpl-0", "choices": [], "usage": USAGE})
        if body["messages"][0]["content"] == "bad":
            error = {"message": "max_tokens is too large", "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=400)
        reply = {
            "id": "chatcmpl-1",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
            "usage": USAGE,
        }
        headers = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9"}
        return web.json_response(reply, headers=headers)


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    handler = Loopback()
    app = web.Application()
    app.router.add_post("/{tail:.*}", handler.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    handler.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield handler
    await runner.cleanup()


async def test_cmd_batch_against_a_real_http_server(
    tmp_path: Path,
    loopback: Loopback,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TTC_BATCH_TEST_KEY", "sk-loopback")
    lines = [request("hello"), request("bad"), request("vec", url="/v1/embeddings")]
    write_input(tmp_path / "in.jsonl", lines)
    args = parse(
        [
            str(tmp_path / "in.jsonl"),
            "--out",
            str(tmp_path / "out.jsonl"),
            "--base-url",
            loopback.url,
            "--api-key-env",
            "TTC_BATCH_TEST_KEY",
            "--model",
            "gpt-loop",
            "--concurrency",
            "2",
        ]
    )
    assert await cmd_batch(args) == 0
    out = read_lines(tmp_path / "out.jsonl")
    assert [o["custom_id"] for o in out] == ["hello", "bad", "vec"]
    assert out[0]["response"]["status_code"] == 200
    assert out[0]["response"]["body"]["model"] == "gpt-loop"
    assert out[1]["response"]["status_code"] == 400
    assert out[1]["response"]["body"]["error"]["message"] == "max_tokens is too large"
    assert out[2]["response"]["body"]["data"][0]["embedding"] == [0.5, 1.0]
    assert all(o["error"] is None for o in out)
    assert sorted(path for path, _, _ in loopback.seen) == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/embeddings",
    ]
    assert {auth for _, auth, _ in loopback.seen} == {"Bearer sk-loopback"}
    assert {body["model"] for _, _, body in loopback.seen} == {"gpt-loop"}
    printed = capsys.readouterr().out
    assert "3 requests: 2 answered, 1 refused (4xx), 0 errors" in printed
    assert f"output: {tmp_path / 'out.jsonl'}" in printed


async def test_a_200_without_an_answer_is_retried_and_never_final(
    tmp_path: Path, loopback: Loopback
) -> None:
    from ttc.adapters.providers._openai import OpenAIProvider

    lines = [
        request("empty 1"),
        request("empty 9"),
        request("empty 1", url="/v1/embeddings"),
        request("empty 9", url="/v1/embeddings"),
    ]
    lines[2]["custom_id"], lines[3]["custom_id"] = "emb 1", "emb 9"
    write_input(tmp_path / "in.jsonl", lines)
    provider = OpenAIProvider("batch", base_url=loopback.url)
    try:
        summary = await batch(tmp_path, provider, max_attempts=3)
    finally:
        await provider.aclose()
    once, always, emb_once, emb_always = read_lines(tmp_path / "out.jsonl")
    assert once["response"]["status_code"] == 200
    assert once["response"]["body"]["choices"][0]["message"]["content"] == "hi"
    assert emb_once["response"]["body"]["data"][0]["embedding"] == [0.5, 1.0]
    for failed, said in ((always, "empty choices"), (emb_always, "empty data")):
        assert failed["response"] is None
        assert failed["error"]["code"] == "transient"
        assert said in failed["error"]["message"]
    assert summary.counts == {"200": 2, "error:transient": 2}
    assert summary.retries == 1 + 2 + 1 + 2
    assert len(loopback.seen) == 2 + 3 + 2 + 3


@pytest.mark.parametrize("value", ["sk-proj-0123456789abcdef", "gsk_Qw8ErTy5UiOp3AsDf7GhJk"])
async def test_a_key_given_as_api_key_env_is_refused_unrepeated(tmp_path: Path, value: str) -> None:
    write_input(tmp_path / "in.jsonl", [request("a")])
    args = parse(
        [str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl"), "--api-key-env", value]
    )
    with pytest.raises(ConfigError, match=r"^--api-key-env: expected the NAME") as caught:
        await cmd_batch(args)
    assert value not in str(caught.value)
    assert not journal_path(tmp_path / "out.jsonl").exists()


def test_via_batch_api_refuses_several_models_or_too_many_embedding_inputs_at_once() -> None:
    from ttc.engine.cli._batchapi import refused
    from ttc.engine.cli._batchio import BatchJob

    def job(i: int, url: str, **body: Any) -> BatchJob:
        return BatchJob(i, f"r{i}", url, body)

    mixed = [job(0, CHAT, model="a"), job(1, "/v1/embeddings", model="e"), job(2, CHAT, model="b")]
    why = refused(mixed, None)
    assert why is not None
    assert "one model per batch" in why
    assert "'a' on line 1, 'b' on line 3" in why
    assert refused(mixed, "m") is None  # --model names one for every request
    many = [job(i, "/v1/embeddings", model="e", input=["x"] * 10_000) for i in range(6)]
    why = refused(many, None)
    assert why is not None
    assert "at most 50,000 embedding inputs" in why
    assert refused(many[:5], None) is None


@pytest.mark.parametrize("flag", [["--otel"], ["--shared-limits", "redis://127.0.0.1:1/0"]])
async def test_via_batch_api_refuses_what_paces_or_traces_requests_one_by_one(
    tmp_path: Path, flag: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write_input(tmp_path / "in.jsonl", [request("a")])
    args = parse([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl"), *flag])
    args.via_batch_api = True
    with pytest.raises(ConfigError, match=f"{flag[0]}: the Batch API is sent as one file"):
        await cmd_batch(args)
    assert not (tmp_path / "o.jsonl").exists()


_TRICKY_OUTS: list[dict[str, Any]] = [
    {"id": "b", "custom_id": "a", "response": {"status_code": 200, "body": {"at": 1}}},
    {"custom_id": ',"out":{"x":1},"at":1.5}', "error": {"code": "x", "message": ',"at":2'}},
    {"custom_id": "é ☃ \\u0000", "response": {"body": {"choices": [{"at": 3.0}], "n": None}}},
    {"custom_id": "last", "at": 7.25},  # a key named like the time's, at the end of `out`
    {"custom_id": "x", "meta": {}, "at": 1},  # ... and after an object's end
]


@pytest.mark.parametrize("out", _TRICKY_OUTS)
def test_an_output_line_is_copied_from_its_journal_line_as_written_alone(
    out: dict[str, Any],
) -> None:
    line = orjson.dumps(
        {"ev": "result", "i": 3, "final": True, "attempts": 2, "out": out, "at": 1764300000.123},
        option=orjson.OPT_APPEND_NEWLINE,
    )
    assert output_bytes(line, "j") == orjson.dumps(out, option=orjson.OPT_APPEND_NEWLINE)
    # Laid out otherwise (another writer, another order, no time): parsed and written again.
    for other in (
        {"ev": "result", "out": out, "i": 3, "final": True, "attempts": 2},
        {"ev": "result", "i": 3, "final": True, "attempts": 2, "out": out},
    ):
        line = orjson.dumps(other, option=orjson.OPT_APPEND_NEWLINE)
        assert orjson.loads(output_bytes(line, "j")) == out


def test_an_output_line_as_this_version_writes_it_is_not_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The copy at the end of a batch reads every line back: parsing each again cost as much as
    # writing it.
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr("ttc.engine.cli._batchio.parse_json", refuse)
    for out in _TRICKY_OUTS[:3]:
        line = orjson.dumps(
            {"ev": "result", "i": 0, "final": False, "attempts": 1, "out": out, "at": 1.5},
            option=orjson.OPT_APPEND_NEWLINE,
        )
        assert output_bytes(line, "j") == orjson.dumps(out, option=orjson.OPT_APPEND_NEWLINE)


def test_a_result_line_without_an_output_line_is_named() -> None:
    with pytest.raises(DataError, match=r"OUT\.journal: a result line with no output line"):
        output_bytes(b'{"ev":"result","i":0,"final":true,"attempts":1,"at":1.0}\n', "OUT.journal")


async def test_a_journal_edited_by_hand_gives_the_output_its_lines_say(tmp_path: Path) -> None:
    # Lines laid out otherwise than this version writes them (a field after `out`, keys in
    # another order, spaces, an error that is no object) are read, counted and copied whole.
    write_input(tmp_path / "in.jsonl", [request(n) for n in ("a", "b", "c", "d")])
    await batch(tmp_path, FakeEndpoint({"d": [Transient("x")] * 3}))
    journal = journal_path(tmp_path / "out.jsonl")
    lines = journal.read_bytes().split(b"\n")
    outs = {e["out"]["custom_id"]: e["out"] for e in map(orjson.loads, lines[1:5])}
    edited = [
        {
            "ev": "result",
            "i": 0,
            "final": True,
            "attempts": 1,
            "out": outs["a"],
            "x": {"n": 1},
            "at": 1.5,
        },
        {"out": outs["b"], "ev": "result", "attempts": 1, "final": True, "i": 1, "at": 1.5},
        {
            "ev": "result",
            "i": 3,
            "final": True,
            "attempts": 1,
            "out": {"custom_id": "d", "error": "boom"},
        },
    ]
    lines[1] = orjson.dumps(edited[0])
    lines[2] = json.dumps(edited[1], indent=None, separators=(", ", ": ")).encode()
    lines[4] = orjson.dumps(edited[2])
    journal.write_bytes(b"\n".join(lines))
    summary = await batch(tmp_path, FakeEndpoint(), resume=True)
    out = read_lines(tmp_path / "out.jsonl")
    assert out == [outs["a"], outs["b"], outs["c"], {"custom_id": "d", "error": "boom"}]
    assert summary.counts == {"200": 3, "error:?": 1}
    assert summary.sent == 0


async def test_the_result_lines_a_batch_writes_are_laid_out_as_its_output_copy_expects(
    tmp_path: Path,
) -> None:
    # The output is sliced from lines of this layout: a field added to RequestResult must
    # change LAYOUT too, or the copy would take it for part of the output line.
    write_input(tmp_path / "in.jsonl", [request(n) for n in ("a", "b")])
    await batch(tmp_path, FakeEndpoint({"b": [Transient("x")] * 3}))
    results = [e for e in read_lines(journal_path(tmp_path / "out.jsonl")) if e["ev"] == "result"]
    assert [tuple(e) for e in results] == [LAYOUT, LAYOUT]
