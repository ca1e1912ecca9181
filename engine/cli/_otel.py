"""--otel (`ttc run`, `ttc compare`, `ttc batch`): the command's spans sent to an OpenTelemetry
collector over OTLP/HTTP, configured by the standard variables alone (`OTEL_EXPORTER_OTLP_ENDPOINT`
or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`: the SDK reads them).

The command gets its own tracer provider (the process-wide one is left alone, for a host that has
its own) with the SDK's batch processor: a span ended on the loop is queued, and the processor's
thread exports it. At the end of the command the provider is shut down in a thread, so its last
spans are sent (or given up at the exporter's timeout) without blocking the loop. A span for the
command itself is the parent of each run's (`run/_otel`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ttc.engine._util._extras import require
from ttc.engine.contract._errors import ProviderError
from ttc.engine.send._waits import AttemptHook, last_wait

if TYPE_CHECKING:
    from ttc.engine.cli._batchio import BatchJob
    from ttc.engine.run import SpanObserver

__all__ = ["Tracing", "add_otel", "traced"]


def add_otel(g: argparse._ActionsContainer) -> None:
    """--otel (ttc run, compare and batch)."""
    g.add_argument(
        "--otel",
        action="store_true",
        help="send the command's spans (a span per run, round and attempt, GenAI attributes) "
        "over OTLP/HTTP to the collector the OTEL_EXPORTER_OTLP_* variables name (default "
        "http://localhost:4318); needs ttc[otel]",
    )


@dataclass(frozen=True, slots=True)
class Tracing:
    """A command's tracer and its span, while --otel is on."""

    tracer: Any
    span: Any

    def observer(self, provider: str, model: str, method: str) -> SpanObserver:
        """The spans of one run of the command, under the command's span."""
        from ttc.engine.run import SpanObserver

        trace = require("opentelemetry.trace", "otel")
        parent = trace.set_span_in_context(self.span)
        return SpanObserver(
            self.tracer, provider=provider, model=model, method=method, parent=parent
        )

    def batch_attempts(self, provider: str) -> Callable[[BatchJob, str | None], AttemptHook]:
        """`ttc batch`'s attempt hooks: a span per attempt of each request (its custom_id, its
        model, its usage, why it waited), under the command's span."""
        from ttc.engine.run._otel import GEN_AI_PROVIDERS, wait_attributes

        trace = require("opentelemetry.trace", "otel")
        parent = trace.set_span_in_context(self.span)
        system = GEN_AI_PROVIDERS.get(provider, provider)

        def for_job(job: BatchJob, model: str | None) -> AttemptHook:
            operation = "embeddings" if job.url.endswith("/embeddings") else "chat"

            def attempted(
                n: int, result: object, error: ProviderError | None, backoff: float
            ) -> None:
                waited = last_wait()
                ended = time.time_ns()
                attributes: dict[str, Any] = {
                    "gen_ai.operation.name": operation,
                    "gen_ai.provider.name": system,
                    "gen_ai.system": system,
                    "ttc.batch.custom_id": job.custom_id,
                    "ttc.attempt": n,
                    **wait_attributes(waited, backoff),
                }
                if model is not None:
                    attributes["gen_ai.request.model"] = str(model)
                attributes |= _usage_attributes(result)
                if error is not None:
                    attributes["error.type"] = error.kind
                span = self.tracer.start_span(
                    f"{operation} {model or ''}".strip(),
                    context=parent,
                    kind=trace.SpanKind.CLIENT,
                    attributes=attributes,
                    start_time=ended if waited is None else waited.asked_ns,
                )
                if error is not None:
                    span.set_status(trace.Status(trace.StatusCode.ERROR, error.kind))
                span.end(end_time=ended)

            return attempted

        return for_job


def _usage_attributes(result: object) -> dict[str, int]:
    """gen_ai.usage.* of a raw response (an OpenAI-shaped body's `usage`), as far as it says."""
    if not isinstance(result, tuple) or len(result) < 2 or not isinstance(result[1], dict):
        return {}
    usage = result[1].get("usage")
    if not isinstance(usage, dict):
        return {}
    found = {}
    for key, name in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("input_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
        ("output_tokens", "gen_ai.usage.output_tokens"),
    ):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            found[name] = value
    return found


def tracer_provider() -> Any:
    """An SDK tracer provider exporting over OTLP/HTTP through a batch processor, configured by
    the OTEL_* variables."""
    require("opentelemetry.sdk", "otel")
    resources = require("opentelemetry.sdk.resources", "otel")
    sdk_trace = require("opentelemetry.sdk.trace", "otel")
    export = require("opentelemetry.sdk.trace.export", "otel")
    otlp = require("opentelemetry.exporter.otlp.proto.http.trace_exporter", "otel")
    # Attributes given here win over OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME: the
    # service is named ttc only when the variables name none.
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = resources.Resource.create({} if named else {"service.name": "ttc"})
    provider = sdk_trace.TracerProvider(resource=resource)
    provider.add_span_processor(export.BatchSpanProcessor(otlp.OTLPSpanExporter()))
    return provider


@asynccontextmanager
async def traced(enabled: bool, command: str) -> AsyncIterator[Tracing | None]:
    """The command's tracing while the block runs (None: --otel not given)."""
    if not enabled:
        yield None
        return
    provider = tracer_provider()
    tracer = provider.get_tracer("ttc")
    span = tracer.start_span(f"ttc {command}")
    try:
        yield Tracing(tracer, span)
    finally:
        span.end()
        # Flushes the queue and stops the processor's thread: off the loop.
        await asyncio.to_thread(provider.shutdown)
