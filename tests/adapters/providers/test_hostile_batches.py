"""A Batch API server is input like any other: its results file is read as it arrives, each line
at most --max-response-bytes and checked (a garbage or too-deep line is counted, never a
traceback, and the answers on the other lines are kept), results for ids never sent and repeated
ones are refused with a count, the ids it chooses are redacted before they are journaled or
logged, and a batch it keeps in progress forever stops the run at --batch-deadline, resumable.

The server is a scripted OpenAI Batch API on loopback (files, batches, output content), driven
by the official client through `OpenAIBatchAPI` in whole runs."""

from __future__ import annotations

import argparse
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import MultipartReader, web
from fakes import FakeSuite, items, serve_everything

from ttc.adapters import Connection, OpenAIProvider
from ttc.adapters.providers import OpenAIBatchAPI
from ttc.engine import Engine, RunConfig, StopKind
from ttc.engine._util import Unreadable, served_lines, served_lines_of
from ttc.engine.cli._batchapi import _keep, via_batch_api
from ttc.engine.cli._batchmode import duration
from ttc.engine.journal._journal import journal_text, read_journal
from ttc.retrieval import LexicalEmbedder

KEY = "sk-hostile-batch-SECRET-0123456789"
Output = Callable[[list[str], int], bytes]


def answer(cid: str, pad: str = "") -> bytes:
    """The output line answering `cid` (the fake suite's question `qN`) correctly."""
    qid = re.sub(r"^t\d+-r(\d+)-k\d+$", r"q\1", cid)
    content = f"right:{qid}{pad}"
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    line = {"id": "r", "custom_id": cid, "response": {"status_code": 200, "body": body}}
    return orjson.dumps(line) + b"\n"


def own(given: str) -> str:
    """The id this server made of one a client sends back (which may have lost its suffix)."""
    found = re.search(r"(file-\d+|batch_\d+)", given)
    return found.group(1) if found else given


@dataclass
class HostileBatches:
    """An OpenAI Batch API whose output file `output(custom ids, batch number)` writes, whose
    ids end in `suffix`, and whose batches end only if `ends`."""

    output: Output
    suffix: str = ""
    ends: bool = True
    files: dict[str, list[str]] = field(default_factory=dict)
    batches: dict[str, str] = field(default_factory=dict)

    def batch(self, bid: str, status: str) -> dict[str, Any]:
        n = len(self.files[self.batches[bid]])
        return {
            "id": bid + self.suffix,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "created_at": 0,
            "input_file_id": self.batches[bid],
            "status": status,
            "output_file_id": f"out-{bid}{self.suffix}" if status == "completed" else None,
            "error_file_id": None,
            "metadata": {},
            "request_counts": {"total": n, "completed": n, "failed": 0},
        }

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/v1/files" and request.method == "POST":
            reader = MultipartReader(request.headers, request.content)
            data = b""
            while (part := await reader.next()) is not None:
                if getattr(part, "name", None) == "file":
                    data = bytes(await part.read())  # type: ignore[union-attr]
            fid = f"file-{len(self.files)}"
            self.files[fid] = [orjson.loads(raw)["custom_id"] for raw in data.splitlines()]
            return web.json_response(
                {
                    "id": fid + self.suffix,
                    "object": "file",
                    "bytes": len(data),
                    "created_at": 0,
                    "filename": "in.jsonl",
                    "purpose": "batch",
                    "status": "processed",
                }
            )
        if path == "/v1/batches" and request.method == "POST":
            body = await request.json()
            bid = f"batch_{len(self.batches)}"
            self.batches[bid] = own(body["input_file_id"])
            return web.json_response(self.batch(bid, "validating"))
        if path == "/v1/batches":
            return web.json_response({"object": "list", "data": [], "has_more": False})
        if path.startswith("/v1/batches/"):
            bid = own(path.removeprefix("/v1/batches/"))
            return web.json_response(self.batch(bid, "completed" if self.ends else "in_progress"))
        if path.startswith("/v1/files/out-") and path.endswith("/content"):
            bid = own(path.removeprefix("/v1/files/out-"))
            number = list(self.batches).index(bid)
            return web.Response(body=self.output(self.files[self.batches[bid]], number))
        return web.json_response({"error": {"message": f"no route {path}"}}, status=404)


@pytest.fixture
async def hostile() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []

    async def start(output: Output, **kw: Any) -> tuple[HostileBatches, str]:
        server = HostileBatches(output, **kw)
        runner, url = await serve_everything(server.handle, "/v1")
        runners.append(runner)
        return server, url

    yield start
    for runner in runners:
        await runner.cleanup()


async def run(
    url: str, out: Path, n: int = 6, *, cap: int | None = None, deadline_s: float | None = None
) -> Any:
    connection = Connection() if cap is None else Connection(max_response_bytes=cap)
    provider = OpenAIProvider("m", base_url=url, api_key=KEY, connection=connection)
    provider.batch = api = OpenAIBatchAPI(provider, poll_s=(0.01, 0.05))
    if deadline_s is not None:
        api.deadline_s = deadline_s
    config = RunConfig(
        method="unif", rounds=1, k=1, warmup_rounds=1, verifier_workers=0, max_attempts=3
    )
    suite = FakeSuite(pool=items(n))
    try:
        async with Engine(
            provider, suite, config, out_dir=out, embedder=LexicalEmbedder()
        ) as engine:
            return await engine.run()
    finally:
        await api.aclose()
        await provider.aclose()


def samples(out: Path) -> list[str]:
    return [str(ev["item"]) for ev in read_journal(out / "journal.jsonl") if ev["ev"] == "sample"]


async def test_garbage_deep_unknown_and_repeated_lines_are_counted_and_answers_kept(
    hostile: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def output(cids: list[str], number: int) -> bytes:
        if number > 0:  # the second batch: what the first one lost, answered plainly
            return b"".join(answer(c) for c in cids)
        first, *rest = cids
        deep = b'{"custom_id": "' + first.encode() + b'", "x": ' + b"[" * 100 + b"]" * 100 + b"}"
        lines = [
            b"\x00garbage{{{",
            b"[" * 5000 + b"]" * 5000,  # valid JSON, but no object
            deep,  # an object of a request this batch holds, too deep to read
            *(answer(f"t9-r{i}-k0").strip() for i in range(1000)),  # ids never sent
            *(answer(c).strip() for c in rest),
            *(answer(c, " again").strip() for c in rest),  # each one a second time
        ]
        return b"\n".join(lines) + b"\n"

    server, url = await hostile(output)
    with caplog.at_level(logging.WARNING, "ttc"):
        result = await run(url, tmp_path / "run")
    assert result.stopped is None
    assert len(samples(tmp_path / "run")) == 6  # each planned sample landed once
    assert result.coverage == 1.0
    refused = [r.getMessage() for r in caplog.records if "results refused" in r.getMessage()]
    assert len(refused) == 1
    assert "1,000 for ids never sent" in refused[0]
    assert "5 repeated ids" in refused[0]
    assert "3 unreadable lines" in refused[0]
    assert len(server.batches) == 2  # the first sample, whose line was too deep, sent again


async def test_a_results_line_over_the_response_cap_is_skipped_as_it_arrives(
    hostile: Callable[..., Any], tmp_path: Path
) -> None:
    def output(cids: list[str], number: int) -> bytes:
        huge = answer(cids[0], " " + "x" * 200_000)  # an answer, over the cap
        return (huge if number == 0 else b"") + b"".join(answer(c) for c in cids[number == 0 :])

    server, url = await hostile(output)
    result = await run(url, tmp_path / "run", n=3, cap=100_000)
    assert result.stopped is None
    assert len(samples(tmp_path / "run")) == 3
    assert len(server.batches) == 2  # its request sent again, and answered within the cap
    texts = [
        e["text"] for e in read_journal(tmp_path / "run" / "journal.jsonl") if e["ev"] == "sample"
    ]
    assert max(len(t) for t in texts) < 100


async def test_ids_the_server_chooses_are_redacted_before_they_are_written(
    hostile: Callable[..., Any], tmp_path: Path
) -> None:
    _, url = await hostile(lambda cids, n: b"".join(answer(c) for c in cids), suffix=f"-{KEY}")
    await run(url, tmp_path / "run", n=2)
    journal = b"".join(journal_text(tmp_path / "run" / "journal.jsonl")).decode()
    for name, text in (
        ("journal.jsonl", journal),
        ("run.log", (tmp_path / "run" / "run.log").read_text()),
    ):
        assert "batch_0-" in text or name == "run.log"
        assert KEY not in text, name
    # Nor in the journal's bytes as they lie on the disk (compressed or not).
    assert KEY.encode() not in (tmp_path / "run" / "journal.jsonl").read_bytes()


async def test_a_batch_that_never_ends_stops_the_run_at_the_deadline(
    hostile: Callable[..., Any], tmp_path: Path
) -> None:
    server, url = await hostile(lambda cids, n: b"", ends=False)
    result = await run(url, tmp_path / "run", n=2, deadline_s=0.3)
    assert result.stopped is not None
    assert result.stopped.kind is StopKind.BUDGET
    assert "--batch-deadline" in str(result.stopped)
    assert "resume" in str(result.stopped)
    assert samples(tmp_path / "run") == []
    # Its id is journaled: a resume polls that batch again instead of buying it twice.
    created = [e for e in read_journal(tmp_path / "run" / "journal.jsonl") if e["ev"] == "batch"]
    assert [e["batch"] for e in created] == list(server.batches)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_served_lines_split_chunks_and_never_hold_a_line_over_the_cap() -> None:
    got = [
        x
        async for x in served_lines(
            chunks(b'{"a": 1}\n{"b"', b": 2}\n\n" + b"x" * 50, b"y" * 50 + b'\n{"c": 3}'), 40
        )
    ]
    assert got[:2] == [{"a": 1}, {"b": 2}]
    assert isinstance(got[2], Unreadable)
    assert "over 40 bytes" in got[2].why
    assert got[3] == {"c": 3}
    read = served_lines_of(b"[1]\nnull\n{\n" + b"z" * 200, 100)
    whys = [x.why if isinstance(x, Unreadable) else "" for x in read]
    assert whys[:2] == ["a JSON list, not an object", "a JSON NoneType, not an object"]
    assert whys[2].startswith("not JSON")
    assert "over 100 bytes" in whys[3]


def test_ttc_batch_keeps_the_first_result_of_each_id_it_sent() -> None:
    lines: dict[str, dict[str, Any]] = {}
    refused: Counter[str] = Counter()
    output: list[dict[str, Any] | Unreadable] = [
        {"custom_id": "a", "n": 1},
        {"custom_id": "a", "n": 2},
        {"custom_id": "zz"},
        Unreadable(4, "not JSON"),
        {"custom_id": "b"},
    ]
    _keep(lines, {"a", "b"}, output, refused)
    assert lines == {"a": {"custom_id": "a", "n": 1}, "b": {"custom_id": "b"}}
    assert refused == {"repeated ids": 1, "for ids never sent": 1, "unreadable lines": 1}


def test_batch_deadline_takes_a_time_with_its_unit() -> None:
    assert [duration(t) for t in ("24h", "90m", "30s", "45")] == [86400.0, 5400.0, 30.0, 45.0]
    for bad in ("", "h", "-1h", "0", "inf", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)


async def test_ttc_batch_via_the_batch_api_stops_at_the_deadline_in_one_line(
    hostile: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, url = await hostile(lambda cids, n: b"", ends=False)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body}
    (tmp_path / "in.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    args = argparse.Namespace(
        input=str(tmp_path / "in.jsonl"),
        out=str(tmp_path / "out.jsonl"),
        model=None,
        quiet=True,
        batch_poll=0.01,
        batch_deadline=0.3,
    )
    provider = OpenAIProvider("m", base_url=url, api_key=KEY)
    try:
        code = await via_batch_api(args, provider)
    finally:
        await provider.aclose()
    assert code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--batch-deadline" in err
    assert "the same command polls it again" in err
    assert not (tmp_path / "out.jsonl").exists()
    assert list(server.batches) == ["batch_0"]
