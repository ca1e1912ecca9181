"""--otel and `SpanObserver`: a run's spans (run, round, attempt) with the GenAI attributes, why
each attempt waited and its verdict; received by a real local OTLP/HTTP endpoint from the
command line, and under a library host's own span."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import Engine, EngineOptions, RateLimited, RunConfig, Transient
from ttc.engine.cli import main
from ttc.engine.journal import read_journal
from ttc.engine.run import SpanObserver
from ttc.engine.send import Limiter, RetryPolicy

pytest.importorskip("opentelemetry.sdk")
web = pytest.importorskip("aiohttp.web")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)
SECRET = "sk-test-do-not-leak-0123456789"


@dataclass
class Collector:
    """A local OTLP/HTTP endpoint: POST /v1/traces, each request's spans decoded and kept."""

    url: str = ""
    spans: list[dict[str, Any]] = field(default_factory=list)
    posts: int = 0


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind is not None else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    found = Collector()
    loop = asyncio.new_event_loop()
    started = threading.Event()

    async def traces(request: Any) -> Any:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        message = trace_service.ExportTraceServiceRequest()
        message.ParseFromString(body)
        found.posts += 1
        for rs in message.resource_spans:
            service = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    found.spans.append(
                        {
                            "name": span.name,
                            "id": span.span_id.hex(),
                            "trace": span.trace_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "status": span.status.code,
                            "resource": service,
                        }
                    )
        response = trace_service.ExportTraceServiceResponse()
        return web.Response(
            body=response.SerializeToString(), content_type="application/x-protobuf"
        )

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]
        found.url = f"http://127.0.0.1:{port}"
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield found
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def by_name(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


FLAGS = ["--suite", "reasoning_gym", "--per-task", "1", "--embedder", "lexical", "--workers",
         "0", "--no-live", "--no-cache", "-q", "-k", "2", "--rounds", "3"]  # fmt: skip


def test_a_run_with_otel_sends_its_spans_to_the_otlp_endpoint(
    collector: Collector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ttc-under-test")
    out = tmp_path / "run"
    assert main(["run", *FLAGS, "--out", str(out), "--otel"]) == 0
    spans = collector.spans
    assert collector.posts >= 1
    assert {s["resource"]["service.name"] for s in spans} == {"ttc-under-test"}
    (command,) = [s for s in spans if s["name"] == "ttc run"]
    (run,) = by_name(spans, "ttc run adpt")
    assert run["parent"] == command["id"]
    rounds = by_name(spans, "round ")
    assert [r["attributes"]["ttc.round"] for r in rounds] == [1, 2, 3]
    assert all(r["parent"] == run["id"] for r in rounds)
    attempts = by_name(spans, "chat ")
    samples = [line for line in read_journal(out / "journal.jsonl") if line["ev"] == "sample"]
    assert len(attempts) == len(samples) > 0  # the sim never fails: one attempt a sample
    round_ids = {r["attributes"]["ttc.round"]: r["id"] for r in rounds}
    verdicts = {
        (line["round"], line["item"], line["k"]): line
        for line in read_journal(out / "journal.jsonl")
        if line["ev"] == "verdict"
    }
    for span in attempts:
        a = span["attributes"]
        assert span["parent"] == round_ids[a["ttc.round"]]
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "ttc.sim"
        assert a["gen_ai.request.model"].startswith("sim")
        assert a["gen_ai.usage.input_tokens"] > 0
        assert a["gen_ai.usage.output_tokens"] > 0
        for wait in ("concurrency", "gate", "window", "tokens", "backoff"):
            assert a[f"ttc.wait.{wait}_s"] >= 0
        verdict = verdicts[(a["ttc.round"], a["ttc.item"], a["ttc.k"])]
        assert a["ttc.verdict.passed"] == verdict["passed"]
        assert a["ttc.verdict.score"] == verdict["score"]
        assert span["start"] <= span["end"]
    in_tokens = sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in attempts)
    summary = (out / "summary.json").read_text()
    assert f'"input_tokens": {in_tokens},' in summary


def test_without_otel_nothing_is_sent_and_nothing_is_timed(
    collector: Collector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    assert main(["run", *FLAGS, "--out", str(tmp_path / "run")]) == 0
    assert collector.posts == 0


def test_a_compare_traces_each_method_under_the_commands_span(
    collector: Collector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{collector.url}/v1/traces")
    args = [*FLAGS, "--rounds", "2", "--out", str(tmp_path / "cmp"), "--otel"]
    assert main(["compare", *args]) == 0
    (command,) = [s for s in collector.spans if s["name"] == "ttc compare"]
    runs = by_name(collector.spans, "ttc run ")
    assert sorted(r["attributes"]["ttc.method"] for r in runs) == sorted(
        ["unif", "elim", "rand", "adpt"]
    )
    assert all(r["parent"] == command["id"] for r in runs)
    assert len({s["trace"] for s in collector.spans}) == 1


def _in_memory() -> tuple[Any, Any]:
    """An SDK tracer provider whose spans are kept in memory, and their exporter."""
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = memory.InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    return provider, exporter


async def test_a_library_hosts_span_is_the_parent_and_waits_are_named(tmp_path: Path) -> None:
    provider, exporter = _in_memory()
    tracer = provider.get_tracer("host")
    script: dict[str, list[Step]] = {
        "q0": [RateLimited(f"quota for key {SECRET}", retry_after=0.02), "right:q0"],
        "q1": [Transient(f"reset; Authorization: Bearer {SECRET}"), (0.05, "right:q1")],
        "q2": [(0.05, "wrong")],
        "q3": [(0.05, "right:q3")],
    }
    config = RunConfig(method="elim", rounds=2, verifier_workers=0, concurrency=1)
    observer = SpanObserver(tracer, provider="openai", model="scripted-1", method="elim")
    options = EngineOptions(retry=FAST, observer=observer, limiter=Limiter(max_concurrency=1))
    suite = FakeSuite(name="fake", pool=items(4))
    with tracer.start_as_current_span("host request") as host:
        async with Engine(
            ScriptedProvider(script), suite, config, out_dir=tmp_path / "run", options=options
        ) as engine:
            await engine.run()
    provider.shutdown()
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "ttc run elim"]
    assert run.parent is not None
    assert run.parent.span_id == host.get_span_context().span_id
    assert run.context.trace_id == host.get_span_context().trace_id
    rounds = {s.context.span_id: s for s in spans if s.name.startswith("round ")}
    assert all(
        r.parent is not None and r.parent.span_id == run.context.span_id for r in rounds.values()
    )
    attempts = [s for s in spans if s.name == "chat scripted-1"]
    assert all(a.parent is not None and a.parent.span_id in rounds for a in attempts)
    by_item: dict[str, list[Any]] = {}
    for a in attempts:
        by_item.setdefault(a.attributes["ttc.item"], []).append(a)
    q0 = sorted(by_item["q0"], key=lambda s: s.attributes["ttc.attempt"])
    assert q0[0].attributes["error.type"] == "rate_limited"
    assert q0[0].status.status_code.name == "ERROR"
    assert q0[1].attributes["ttc.wait.backoff_s"] > 0
    assert q0[1].attributes["ttc.verdict.passed"] is True
    q1 = sorted(by_item["q1"], key=lambda s: s.attributes["ttc.attempt"])
    assert q1[0].attributes["error.type"] == "transient"
    # One request at a time: some attempt waited for the concurrency cap, and says so.
    reasons = {a.attributes.get("ttc.wait.reason") for a in attempts}
    assert "concurrency" in reasons or "gate" in reasons
    assert any(a.attributes["ttc.wait.concurrency_s"] > 0 for a in attempts)
    assert attempts[0].attributes["gen_ai.provider.name"] == "openai"
    # Secrets in errors (a key in a message) never reach a span.
    for span in spans:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)
        assert SECRET not in (span.status.description or "")


class Endpoint:
    """A raw OpenAI-compatible endpoint: `flaky` fails its first call (a 429), others answer."""

    def __init__(self) -> None:
        self.failed = False

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any, None]:
        if body["messages"][0]["content"] == "flaky" and not self.failed:
            self.failed = True
            raise RateLimited(f"slow down {SECRET}", retry_after=0.01)
        usage = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
        choice = {"index": 0, "message": {"role": "assistant", "content": "hi"}}
        return 200, {"choices": [choice], "usage": usage}, None


async def test_ttc_batch_traces_each_attempt_of_each_request(tmp_path: Path) -> None:
    import orjson

    from ttc.engine.cli._batchsend import SendPolicy, run_batch
    from ttc.engine.cli._otel import Tracing

    provider, exporter = _in_memory()
    tracer = provider.get_tracer("test")
    lines = [
        {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "gpt-x", "messages": [{"role": "user", "content": cid}]}}
        for cid in ("steady", "flaky")
    ]  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    command = tracer.start_span("ttc batch")
    tracing = Tracing(tracer, command)
    limiter = Limiter(max_concurrency=2)
    limiter.timing = True
    policy = SendPolicy(limiter, FAST, 5.0, tracing.batch_attempts("openai"))
    summary = await run_batch(tmp_path / "in.jsonl", tmp_path / "out.jsonl", Endpoint(), policy)
    command.end()
    provider.shutdown()
    assert summary.counts == {"200": 2}
    spans = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-x"]
    tried = sorted(
        (s.attributes["ttc.batch.custom_id"], s.attributes["ttc.attempt"]) for s in spans
    )
    assert tried == [("flaky", 1), ("flaky", 2), ("steady", 1)]
    for span in spans:
        assert span.parent is not None
        assert span.parent.span_id == command.get_span_context().span_id
        assert span.attributes["gen_ai.request.model"] == "gpt-x"
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert "ttc.wait.window_s" in span.attributes
        assert SECRET not in str(dict(span.attributes))
    refused = next(
        s
        for s in spans
        if s.attributes["ttc.attempt"] == 1 and s.attributes["ttc.batch.custom_id"] == "flaky"
    )
    assert refused.attributes["error.type"] == "rate_limited"
    answered = next(s for s in spans if s.attributes["ttc.attempt"] == 2)
    assert answered.attributes["gen_ai.usage.input_tokens"] == 5
    assert answered.attributes["gen_ai.usage.output_tokens"] == 7
    assert answered.attributes["ttc.wait.backoff_s"] > 0
