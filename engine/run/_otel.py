"""A run as OpenTelemetry spans under the GenAI semantic conventions (`--otel`, or a library
host's own tracer): one span for the run, one per round, one per attempt of a sample.

    ttc run METHOD                     (parent: the host's current span, if any)
      round T                          (its questions, solved, coverage, requests at its barrier)
        chat MODEL                     (one attempt: gen_ai.* attributes, why it waited, verdict)

An attempt's span starts when it asked the limiter for a slot and ends when its answer (or its
error) came back; what it waited for is on it (`ttc.wait.*`: the concurrency cap, the gate, the
request window or pace, the token debt, and the backoff after the attempt before it, with
`ttc.wait.reason` naming the longest), and a landed attempt's verdict is added when the verifier
gives it, before the span is ended. The spans are made by the observer hooks on the loop, and
ended there too; exporting them is the tracer provider's (the SDK's batch processor sends them
from its own thread). Only counts, kinds, ids and model names are written: never a prompt, a
response, an error's message or anything from the command line.

opentelemetry-api is imported only when a `SpanObserver` is made (`ttc[otel]`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttc.engine._util._extras import require
from ttc.engine.contract._state import RoundStats, RunState
from ttc.engine.contract._types import Usage
from ttc.engine.journal._events import Event, Judged, RoundEnded, SampleKey
from ttc.engine.run._budget import StopReason
from ttc.engine.run._observer import Attempted, RunObserver
from ttc.engine.send._waits import Waited

__all__ = ["GEN_AI_PROVIDERS", "SpanObserver", "wait_attributes"]

# ttc's provider names as the GenAI conventions' `gen_ai.provider.name` spells them.
GEN_AI_PROVIDERS = {
    "openai": "openai",
    "gemini": "gcp.gemini",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "sim": "ttc.sim",
}

Attributes = dict[str, str | int | float | bool]


def wait_attributes(waited: Waited | None, backoff_s: float) -> Attributes:
    """What an attempt waited for, as span attributes: the seconds at each step of the limiter
    (when it timed them), the backoff after the attempt before, and the longest as the reason."""
    found: Attributes = {"ttc.wait.backoff_s": round(backoff_s, 6)}
    if waited is not None:
        found["ttc.wait.concurrency_s"] = round(waited.concurrency_s, 6)
        found["ttc.wait.gate_s"] = round(waited.gate_s, 6)
        found["ttc.wait.window_s"] = round(waited.window_s, 6)
        found["ttc.wait.tokens_s"] = round(waited.tokens_s, 6)
    reason = waited.reason(backoff_s) if waited is not None else "backoff" if backoff_s else None
    if reason is not None:
        found["ttc.wait.reason"] = reason
    return found


class SpanObserver(RunObserver):
    """Spans of a run for `tracer` (an `opentelemetry.trace.Tracer`); `parent`: the context they
    hang under (default: the one current when the run starts, a host's span)."""

    traces_attempts = True

    def __init__(
        self,
        tracer: Any,
        *,
        provider: str,
        model: str,
        method: str,
        parent: Any = None,
    ) -> None:
        self._trace = require("opentelemetry.trace", "otel")
        self._context = require("opentelemetry.context", "otel")
        self._tracer = tracer
        self._system = GEN_AI_PROVIDERS.get(provider, provider)
        self._model = model
        self._method = method
        self._parent = parent
        self._run: Any = None
        self._round: Any = None
        self._cost: Callable[[Usage], float | None] = lambda usage: None
        # Landed attempts waiting for their verdict: the span, and when it ended (ns).
        self._landed: dict[SampleKey, tuple[Any, int]] = {}

    def _under(self, span: Any) -> Any:
        return self._trace.set_span_in_context(span)

    def run_started(
        self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]
    ) -> None:
        """Opens the run's span, under the host's current span unless a parent was given."""
        self._cost = cost
        parent = self._parent if self._parent is not None else self._context.get_current()
        self._run = self._tracer.start_span(
            f"ttc run {self._method}",
            context=parent,
            attributes={
                "ttc.method": self._method,
                "ttc.questions": len(state.items),
                "ttc.rounds": rounds,
                "gen_ai.provider.name": self._system,
                "gen_ai.request.model": self._model,
            },
        )

    def round_started(self, stats: RoundStats) -> None:
        """Opens a round's span (ending one a stopped round left open)."""
        if self._round is not None:
            self._round.end()
        self._round = self._tracer.start_span(
            f"round {stats.round}",
            context=self._under(self._run),
            attributes={"ttc.round": stats.round, "ttc.round.active": stats.active},
        )

    def attempt(self, attempted: Attempted) -> None:
        """One attempt's span, from its ask for a slot to its answer; a landed one stays open
        for its verdict."""
        a, waited = attempted, attempted.waited
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._system,
            "gen_ai.system": self._system,
            "gen_ai.request.model": self._model,
            "ttc.round": a.round,
            "ttc.item": a.item,
            "ttc.k": a.k,
            "ttc.attempt": a.attempt,
        }
        if a.temperature is not None:
            attributes["gen_ai.request.temperature"] = a.temperature
        attributes |= wait_attributes(waited, a.backoff_s)
        start = a.ended_ns if waited is None else waited.asked_ns
        if a.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = a.usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = (
                a.usage.output_tokens + a.usage.thinking_tokens
            )
            attributes["ttc.usage.thinking_tokens"] = a.usage.thinking_tokens
            cost = self._cost(a.usage)
            if cost is not None:
                attributes["ttc.cost_usd"] = cost
        if a.latency_s is not None:
            attributes["ttc.latency_s"] = round(a.latency_s, 6)
        if a.error is not None:
            attributes["error.type"] = a.error
        parent = self._round if self._round is not None else self._run
        span = self._tracer.start_span(
            f"chat {self._model}",
            context=self._under(parent),
            kind=self._trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if a.error is not None:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, a.error))
            span.end(end_time=a.ended_ns)
            return
        self._landed[(a.round, a.item, a.k)] = (span, a.ended_ns)

    def event(self, event: Event) -> None:
        """A verdict closes its attempt's span; a round's totals close the round's."""
        if isinstance(event, Judged):
            found = self._landed.pop(event.key, None)
            if found is not None:
                span, ended = found
                span.set_attributes(
                    {
                        "ttc.verdict.score": event.score,
                        "ttc.verdict.correct": event.correct,
                        "ttc.verdict.passed": event.passed,
                    }
                )
                span.end(end_time=ended)
        elif isinstance(event, RoundEnded) and self._round is not None:
            self._round.set_attributes(
                {
                    "ttc.round.requests": event.requests,
                    "ttc.round.solved": event.solved,
                    "ttc.round.coverage": event.coverage,
                    "ttc.round.errors": event.errors,
                    "ttc.round.retries": event.retries,
                }
            )
            self._round.end()
            self._round = None

    async def run_ended(self, stopped: StopReason | None) -> None:
        """Ends every span still open (attempts never judged, a stopped round, the run)."""
        for span, ended in self._landed.values():
            span.end(end_time=ended)
        self._landed.clear()
        if self._round is not None:
            self._round.end()
            self._round = None
        if self._run is not None:
            if stopped is not None:
                self._run.set_attribute("ttc.stopped", stopped.kind.name.lower())
            self._run.end()
            self._run = None
