"""The metrics of `--metrics-port` (see `_metrics` for what each one means): a registry of the
command's own, its counters fed by a run's events (`RunCounts`) or `ttc batch`'s sends
(`CountedEndpoint`, `BatchCounts`), the limiters read when scraped (`LimiterReadings`), and
prometheus-client's HTTP server (`served`).

The registry is never prometheus-client's global one: two commands in one process do not clash.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ttc.engine import (
    BadRequest,
    ConfigError,
    DifficultyRated,
    Event,
    Fatal,
    Limiter,
    ProviderError,
    Rated,
    RateLimited,
    ResponseTooLarge,
    Retried,
    RoundStats,
    RunObserver,
    SampleFailed,
    SampleLanded,
    Transient,
    Usage,
)
from ttc.engine.cli._batchsend import BatchProgress, PostResult, RawProvider
from ttc.engine.send import ProviderCache, token_count

OK = "ok"
POLICY = "policy"
BATCH = "batch"
# The error kinds a role model's failed call is named by (its event carries "kind: message").
KINDS = frozenset(e.kind for e in (RateLimited, Transient, BadRequest, ResponseTooLarge, Fatal))


class Metrics:
    """One command's metrics: a registry of its own, its counters, and the limiters it reads."""

    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()
        self.requests = Counter(
            "ttc_requests",
            "Attempts that ended: ok, or the error kind (rate_limited is a 429)",
            ["method", "role", "outcome"],
            registry=reg,
        )
        self.tokens = Counter(
            "ttc_tokens",
            "Tokens of answered attempts, by kind (input, output, thinking)",
            ["method", "role", "kind"],
            registry=reg,
        )
        self.retries = Counter(
            "ttc_retries",
            "Failed attempts that are retried, by error kind",
            ["method", "role", "kind"],
            registry=reg,
        )
        self.rate_limited = Counter(
            "ttc_rate_limited", "Attempts refused with a 429", ["method", "role"], registry=reg
        )
        self.round = Gauge("ttc_round", "The round under way", ["method"], registry=reg)
        self.models = Gauge(
            "ttc_model_info",
            "The models a run uses (1 each)",
            ["method", "role", "model"],
            registry=reg,
        )
        self.limits = LimiterReadings()
        reg.register(self.limits)

    def start(self, method: str, role: str) -> None:
        """Shows the counters of `role` in `method` at 0 before anything is counted."""
        self.requests.labels(method, role, OK)
        self.rate_limited.labels(method, role)
        for kind in ("input", "output", "thinking"):
            self.tokens.labels(method, role, kind)

    def ended(self, method: str, role: str, outcome: str) -> None:
        """One attempt ended: `ok`, or an error kind."""
        self.requests.labels(method, role, outcome).inc()
        if outcome == RateLimited.kind:
            self.rate_limited.labels(method, role).inc()

    def retried(self, method: str, role: str, kind: str) -> None:
        """One attempt failed with an error of `kind`, and is retried."""
        self.retries.labels(method, role, kind).inc()
        self.ended(method, role, kind)

    def used(self, method: str, role: str, usage: Usage) -> None:
        """An answered attempt's tokens."""
        for kind, n in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("thinking", usage.thinking_tokens),
        ):
            if n > 0:
                self.tokens.labels(method, role, kind).inc(n)

    def watch(
        self,
        method: str,
        limiter: Limiter,
        rpm: float | None,
        tpm: float | None,
        cache: ProviderCache | None = None,
    ) -> None:
        """Reads `limiter` (configured with `rpm` and `tpm`), and `cache`, at every scrape."""
        self.limits.watched[method] = Watched(limiter, rpm, tpm, cache)

    def run_observer(self, method: str, models: Mapping[str, str]) -> RunObserver:
        """The observer that counts a run of `method`; `models`: each role's model name."""
        for role, model in models.items():
            self.models.labels(method, role, model).set(1)
            self.start(method, role)
        return RunCounts(self, method)

    def batch(self, endpoint: RawProvider, model: str | None) -> tuple[RawProvider, BatchProgress]:
        """`ttc batch`'s endpoint and progress, counting as they go (see `CountedEndpoint`)."""
        self.start(BATCH, POLICY)
        if model is not None:
            self.models.labels(BATCH, POLICY, model).set(1)
        return CountedEndpoint(endpoint, self), BatchCounts(self)


class RunCounts(RunObserver):
    """Counts a run's requests, tokens and retries from its events."""

    def __init__(self, metrics: Metrics, method: str) -> None:
        self.metrics = metrics
        self.method = method

    def round_started(self, stats: RoundStats) -> None:
        self.metrics.round.labels(self.method).set(stats.round)

    def event(self, event: Event) -> None:
        m, method = self.metrics, self.method
        if isinstance(event, SampleLanded):
            m.ended(method, POLICY, OK)
            m.used(method, POLICY, event.usage)
        elif isinstance(event, SampleFailed):
            m.ended(method, POLICY, event.error)
        elif isinstance(event, Retried):
            m.retried(method, POLICY, event.error)
        elif isinstance(event, Rated | DifficultyRated):
            role = "judge" if isinstance(event, Rated) else "difficulty"
            m.ended(method, role, OK if event.error is None else role_error(event.error))
            m.used(method, role, event.usage)


def role_error(error: str) -> str:
    """The kind of a role model's failed call, from its event's "kind: message"."""
    kind = error.partition(":")[0]
    return kind if kind in KINDS else "error"


class CountedEndpoint:
    """`ttc batch`'s endpoint, counting each answered attempt: `ok` (a 2xx) or `bad_request`
    (another 4xx, recorded as the answer), with its tokens by kind. Failed attempts are counted
    by `BatchCounts`, where the sender reports them (timeouts never reach the endpoint)."""

    def __init__(self, inner: RawProvider, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    async def post_json(self, path: str, body: dict[str, Any]) -> PostResult:
        result = await self.inner.post_json(path, body)
        status, data, _ = result
        self.metrics.ended(BATCH, POLICY, OK if 200 <= status < 300 else BadRequest.kind)
        self.metrics.used(BATCH, POLICY, body_usage(data))
        return result


class BatchCounts(BatchProgress):
    """`ttc batch`'s progress (its log lines as ever), counting its failed attempts too."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self.metrics = metrics

    def retried(self, error: ProviderError) -> None:
        super().retried(error)
        self.metrics.retried(BATCH, POLICY, error.kind)

    def landed(self, tokens: int, error: ProviderError | None) -> None:
        super().landed(tokens, error)
        if error is not None:  # an answer was counted by the endpoint
            self.metrics.ended(BATCH, POLICY, error.kind)


def body_usage(body: Any) -> Usage:
    """A response body's usage by kind, as the OpenAI adapter reads it: reasoning tokens are the
    thinking share of the completion's; a value that is no token count is left out."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return Usage()

    def count(*names: str) -> int:
        return next((n for k in names if (n := token_count(usage.get(k))) is not None), 0)

    details = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    reasoning = token_count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    thinking = reasoning or 0
    completion = count("completion_tokens", "output_tokens")
    return Usage(count("prompt_tokens", "input_tokens"), max(0, completion - thinking), thinking)


@dataclass(frozen=True, slots=True)
class Watched:
    """A run's limiter, the limits it was configured with, and its response cache."""

    limiter: Limiter
    rpm: float | None
    tpm: float | None
    cache: ProviderCache | None = None


class LimiterReadings:
    """A collector: the watched limiters' state, read when the endpoint is scraped (in the
    server's thread: plain attribute reads of numbers the event loop writes)."""

    def __init__(self) -> None:
        self.watched: dict[str, Watched] = {}

    def collect(self) -> Iterable[Metric]:
        def gauge(name: str, text: str, *labels: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, text, labels=["method", *labels])

        in_flight = gauge("ttc_in_flight", "Requests in flight (limiter slots in use)")
        cap = gauge("ttc_concurrency_cap", "The adaptive concurrency cap in force")
        ceiling = gauge("ttc_concurrency_max", "The concurrency cap's ceiling (--concurrency)")
        cuts = CounterMetricFamily(
            "ttc_concurrency_cuts", "Rate-limit episodes that cut the cap", labels=["method"]
        )
        rpm = gauge(
            "ttc_limit_requests_per_minute",
            "Requests per minute: configured (--rpm), set (ttc ctl set), learned (announced by "
            "the server)",
            "source",
        )
        tpm = gauge(
            "ttc_limit_tokens_per_minute",
            "Tokens per minute: configured (--tpm), set (ttc ctl set), learned (announced by "
            "the server)",
            "source",
        )
        hits = CounterMetricFamily(
            "ttc_cache_hits", "Samples answered by the response cache", labels=["method"]
        )
        for method, w in list(self.watched.items()):
            lim = w.limiter
            in_flight.add_metric([method], lim.in_flight)
            cap.add_metric([method], lim.concurrency_cap)
            ceiling.add_metric([method], lim.max_concurrency)
            cuts.add_metric([method], lim.cuts)
            _limits(rpm, method, w.rpm, lim.rpm, lim.rpm_source)
            _limits(tpm, method, w.tpm, lim.tpm, lim.tpm_source)
            if w.cache is not None:
                hits.add_metric([method], w.cache.hits)
        return [in_flight, cap, ceiling, cuts, rpm, tpm, hits]


def _limits(
    family: GaugeMetricFamily,
    method: str,
    configured: float | None,
    in_force: float | None,
    source: str | None,
) -> None:
    """The configured limit, if any; the one in force when it differs, labelled where it came
    from: "set" by `ttc ctl set`, or "learned" once the server announced a stricter one (the
    limiter then paces at it)."""
    if configured is not None:
        family.add_metric([method, "configured"], configured)
    if in_force is not None and in_force != configured:
        family.add_metric([method, source or "learned"], in_force)


@contextmanager
def served(metrics: Metrics, port: int, addr: str) -> Iterator[str]:
    """Serves `metrics` on `addr:port` (0: any free port) while the block runs; yields the URL.
    A port that cannot be had is a ConfigError naming --metrics-port."""
    try:
        server, thread = start_http_server(port, addr, registry=metrics.registry)
    except OSError as exc:
        flag = "--metrics-addr" if isinstance(exc, socket.gaierror) else "--metrics-port"
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{flag}: cannot serve metrics on {addr}:{port}: {reason}") from None
    try:
        yield url_of(server)
    finally:
        _stop(server, thread)


def url_of(server: WSGIServer) -> str:
    """The URL of the metrics a server serves (its real port, when 0 was asked for)."""
    host, port = server.server_address[:2]
    host = str(host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


def _stop(server: WSGIServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _gaierror() -> type[OSError]:
    import socket

    return socket.gaierror
