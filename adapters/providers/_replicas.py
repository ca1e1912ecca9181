"""Many servers of one model (`--base-url` repeated): self-hosted replicas behind one provider.

`ReplicasProvider` wraps one provider per replica (an `OpenAIProvider` per base URL, as built by
`openai_replicas`) and is, to the engine, one provider. The engine's own limiter stays the
global one (--concurrency, --rpm, --tpm over all replicas); each replica also has its own
`Limiter`: its adaptive concurrency cap, and the rate-limit headers that replica announces.

- Routing: each request goes to the replica with the fewest requests in flight (counting those
  queued at its limiter), ties in turn. A replica's announced limits and 429s stay with its own
  limiter: what the engine sees of a completion or a refusal carries no `rate`, so one replica's
  quota never becomes everyone's.
- Draining: a replica that fails `max_failures` times in a row at the transport (connection
  refused or reset, a body cut short) or with no answer within `timeout_s` is marked down. The
  failed attempt is a `Transient`, which the engine retries as any other; the retry is routed to
  a replica that is up. A replica down is probed again after `probe_s`, doubling per failed probe
  up to `probe_max_s`: one request goes to it, and an answer brings it back. When every replica
  is down, requests go to the one due for a probe soonest rather than fail unsent.
- Draining by error rate: a replica that answers, but with server errors (a 5xx: a Transient
  that is no transport failure), is drained the same way once more than `max_error_rate` of its
  last `error_window` outcomes (at least half a window of them) were such errors; a probe that
  gets one keeps it down. Without this, a replica failing fast holds the fewest requests in
  flight and so takes most of the traffic, and its requests' retries run out.
- Other failures (a bad request, a Fatal) pass through as they are, and count as answers: they
  are the request's fault, or the run's, not the replica's.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from ttc.adapters.providers._connection import Connection
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine import (
    Completion,
    ConfigError,
    Limiter,
    Provider,
    ProviderError,
    RateLimited,
    Request,
    Transient,
)

__all__ = ["Replica", "ReplicasProvider", "openai_replicas"]

log = logging.getLogger("ttc")

# What says a replica is not there (a transport failure), as the adapter's Transient's cause.
_GONE = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    ConnectionError,
    asyncio.IncompleteReadError,
    TimeoutError,
)


@dataclasses.dataclass(slots=True, eq=False)
class Replica:
    """One server: its provider, its own limiter, and what the router knows of it."""

    provider: Provider
    limiter: Limiter
    in_flight: int = 0  # routed here and not yet ended (queued at its limiter included)
    max_in_flight: int = 0
    sent: int = 0  # requests routed here
    answered: int = 0
    failures: int = 0  # transport failures in a row
    down_until: float | None = None  # monotonic time of its next probe, while it is down
    downs: int = 0  # failed probes in a row (the probe's backoff)
    probing: bool = False
    # Its latest outcomes, True for a server error (the error rate's window).
    recent: collections.deque[bool] = dataclasses.field(default_factory=collections.deque)
    errors: int = 0  # server errors, in all

    @property
    def url(self) -> str:
        return self.provider.endpoint or self.provider.name

    @property
    def down(self) -> bool:
        return self.down_until is not None


class ReplicasProvider(Provider):
    """One model served by several replicas; see the module docstring."""

    def __init__(
        self,
        providers: Sequence[Provider],
        *,
        max_concurrency: int = 64,
        timeout_s: float | None = None,
        max_failures: int = 3,
        probe_s: float = 1.0,
        probe_max_s: float = 30.0,
        error_window: int = 20,
        max_error_rate: float = 0.5,
    ) -> None:
        if len(providers) < 2:
            raise ConfigError("--base-url: replicas need at least two servers")
        if max_failures < 1:
            raise ConfigError(f"max_failures must be >= 1, got {max_failures!r}")
        if error_window < 2 or not 0 <= max_error_rate < 1:
            raise ConfigError(
                f"error_window must be >= 2 and max_error_rate in [0, 1), got {error_window!r} "
                f"and {max_error_rate!r}"
            )
        first = providers[0]
        self.name = first.name
        self.model = first.model
        self.replicas = [
            Replica(
                p,
                Limiter(max_concurrency=max_concurrency),
                recent=collections.deque(maxlen=error_window),
            )
            for p in providers
        ]
        urls = [r.url for r in self.replicas]
        if len(set(urls)) != len(urls):
            raise ConfigError(f"--base-url: the same server given twice: {', '.join(urls)}")
        self.endpoint = ",".join(urls)
        self.timeout_s = timeout_s
        self.max_failures = max_failures
        self.probe_s = probe_s
        self.probe_max_s = probe_max_s
        self.max_error_rate = max_error_rate
        self._turn = itertools.count()

    def __repr__(self) -> str:
        return f"ReplicasProvider({self.endpoint!r}, model={self.model!r})"

    async def generate(self, request: Request) -> Completion:
        replica, probe = self._pick()
        replica.in_flight += 1
        replica.sent += 1
        replica.max_in_flight = max(replica.max_in_flight, replica.in_flight)
        try:
            return await self._send(replica, request)
        finally:
            replica.in_flight -= 1
            if probe:
                replica.probing = False

    async def _send(self, replica: Replica, request: Request) -> Completion:
        async with replica.limiter.slot() as ticket:
            try:
                async with asyncio.timeout(self.timeout_s):
                    completion = await replica.provider.generate(request)
            except TimeoutError as exc:
                self._failed(replica, exc)
                raise Transient(
                    f"{self.name}: {replica.url}: no answer within {self.timeout_s:g}s"
                ) from exc
            except RateLimited as exc:
                replica.limiter.rate_limited(ticket, exc.rate)
                self._answered(replica)
                raise RateLimited(str(exc)) from exc
            except Transient as exc:
                if isinstance(exc.__cause__, _GONE):
                    self._failed(replica, exc)
                else:
                    self._erred(replica, exc)
                raise
            except ProviderError:
                self._answered(replica)
                raise
        replica.limiter.succeeded(completion.rate)
        self._answered(replica)
        self.simulated = self.simulated or replica.provider.simulated
        return dataclasses.replace(completion, rate=None)

    def _pick(self) -> tuple[Replica, bool]:
        """A replica due for a probe (and True: the probe), else the up one with the fewest in
        flight (ties in turn), else, all down, the one due soonest."""
        now = time.monotonic()
        due = [r for r in self.replicas if r.down_until is not None and r.down_until <= now]
        for replica in due:
            if not replica.probing:
                replica.probing = True
                return replica, True
        up = [r for r in self.replicas if not r.down]
        if not up:
            return min(self.replicas, key=lambda r: (r.down_until or 0.0, r.in_flight)), False
        turn = next(self._turn)
        n = len(self.replicas)
        return min(up, key=lambda r: (r.in_flight, (self.replicas.index(r) - turn) % n)), False

    def _answered(self, replica: Replica) -> None:
        replica.answered += 1
        replica.failures = 0
        replica.recent.append(False)
        if replica.down:
            log.warning("%s: replica %s answers again", self.name, replica.url)
            replica.down_until = None
            replica.downs = 0

    def _failed(self, replica: Replica, exc: BaseException) -> None:
        replica.failures += 1
        if replica.failures < self.max_failures and not replica.down:
            return
        self._drain(replica, f"{replica.failures} failures in a row ({exc})")

    def _erred(self, replica: Replica, exc: BaseException) -> None:
        """A server error: the replica answered, badly; drained once its error rate passes
        `max_error_rate` (a probe's error keeps it down)."""
        replica.errors += 1
        if replica.down:
            self._drain(replica, f"a server error ({exc})")
            return
        replica.recent.append(True)
        seen, errors = len(replica.recent), sum(replica.recent)
        maxlen = replica.recent.maxlen or seen
        if 2 * seen >= maxlen and errors > self.max_error_rate * seen:
            # Judged afresh when it comes back: its old outcomes would drain it at once.
            replica.recent.clear()
            self._drain(replica, f"{errors} server errors in its last {seen} answers ({exc})")

    def _drain(self, replica: Replica, why: str) -> None:
        """Marks `replica` down (its requests go to the others) until its next probe."""
        if replica.down_until is not None and replica.down_until > time.monotonic():
            return  # a request sent before it went down: not a probe
        wait = min(self.probe_max_s, self.probe_s * 2**replica.downs)
        if not replica.down:
            log.warning(
                "%s: replica %s is down after %s; its requests go to the others, and it is "
                "probed again in %gs",
                self.name,
                replica.url,
                why,
                wait,
            )
        replica.downs += 1
        replica.down_until = time.monotonic() + wait

    def status(self) -> list[dict[str, Any]]:
        """Each replica: where, requests routed and answered, in flight, and whether down."""
        return [
            {
                "url": r.url,
                "sent": r.sent,
                "answered": r.answered,
                "server_errors": r.errors,
                "in_flight": r.in_flight,
                "max_in_flight": r.max_in_flight,
                "down": r.down,
                "concurrency_cap": r.limiter.concurrency_cap,
            }
            for r in self.replicas
        ]

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.provider.aclose()


def openai_replicas(
    model: str,
    base_urls: Sequence[str],
    *,
    connection: Callable[[], Connection] = Connection,
    max_concurrency: int = 64,
    timeout_s: float | None = None,
    **openai: Any,
) -> ReplicasProvider:
    """One `OpenAIProvider` per base URL (each on its own session from `connection()`, the
    other keywords passed to each), behind a `ReplicasProvider`."""
    providers = [
        OpenAIProvider(model, base_url=url, connection=connection(), **openai) for url in base_urls
    ]
    return ReplicasProvider(providers, max_concurrency=max_concurrency, timeout_s=timeout_s)
