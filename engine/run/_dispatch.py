"""What sends a round's requests is given: the run's parts (`RoundContext`) and where the round's
samples land (`Landing`), with the one pipeline every dispatcher sets up.

A round has two dispatchers: the synchronous one (`RoundRun`: each request sent as a worker takes
it) and a Batch API's (`run/batch`). Both send on the run's send path (`Landing.sender`: the
cache, the limiter, retries) and land every outcome through `run_round` into the round's
callbacks (`Landing.land`). The round makes the `Landing` and hands it over, so a dispatcher
needs nothing else of the round, and `run/batch` never imports it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ProviderError
from ttc.engine.contract._state import RunState, sample_seed
from ttc.engine.contract._types import Completion, Provider, Request, Suite
from ttc.engine.journal._events import Event
from ttc.engine.run._budget import RunBudget
from ttc.engine.run._observer import Attempted
from ttc.engine.run._roles import RoleCaller
from ttc.engine.run._scheduler import Answered, run_round
from ttc.engine.run._stream import SolvedWatch
from ttc.engine.run._verify import Verifiers
from ttc.engine.run._worstcase import worst_of
from ttc.engine.send._cache import ProviderCache
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Job, JobAttemptHook, Outcome, RetryHook, Sender
from ttc.engine.send._tokens import TokenEstimator
from ttc.engine.send._waits import last_wait
from ttc.engine.strategy._judges import Judgement

__all__ = ["Landing", "RoundContext"]


@dataclass(frozen=True, slots=True)
class RoundContext:
    """What a round needs of its run: the config, the send path, the judges, the budget, and
    where its events go (the journal and the run's observer)."""

    config: RunConfig
    suite: Suite
    judgement: Judgement
    provider: Provider
    limiter: Limiter
    retry: RetryPolicy
    verifiers: Verifiers
    scorer: RoleCaller | None
    budget: RunBudget
    outputs: TokenEstimator
    emit: Callable[[Event], None]
    # `emit` in two halves: several events journaled in order, their lines handed to the
    # journal's writer together; an event shown to the observer and the run's stream.
    journal_all: Callable[[list[Event]], None]
    tell: Callable[[Event], None]
    # The response cache as the policy model sees it, if the host gave one.
    cache: ProviderCache | None = None
    # Tells the stream each question's resolution as it happens.
    watch: SolvedWatch | None = None
    # Told of an error that fails the run (a bug in a provider, a judge that raised): it stops
    # the dispatch at once; the round raises the error once the requests in flight have landed.
    fail: Callable[[Exception], None] = lambda exc: None
    # Told of every attempt as it ends, when the run's observer traces attempts (`--otel`).
    attempted: Callable[[Attempted], None] | None = None

    @property
    def stopped(self) -> bool:
        """Whether the run is stopping: nothing new is dispatched."""
        return self.budget.is_stopped()

    def emit_all(self, events: list[Event]) -> None:
        """`emit` for each of `events`, in order, their lines handed to the writer together."""
        try:
            self.journal_all(events)
        finally:  # what reached the journal is told, even when one of them could not
            for event in events:
                self.tell(event)


@dataclass(frozen=True, slots=True)
class Landing:
    """Where round `round`'s samples land: the round's callbacks, made by the round for the
    dispatcher that sends them."""

    ctx: RoundContext
    state: RunState
    round: int
    # A request goes out (answered, or cut off by a stop, or not): counted.
    on_sent: Callable[[], None]
    # One failed attempt that will be retried: counted and journaled.
    on_retry: RetryHook
    # Samples' final outcomes, responses or last errors, as many as landed in one turn of the
    # loop: journaled together (`run_round`).
    on_landed: Callable[[list[tuple[Job, Outcome]]], None]
    # Answered samples, as many as landed meanwhile: judged, then accounted.
    on_judged: Callable[[list[Answered]], Awaitable[None]]
    # The completions the response cache served that have not landed yet, by id (held, so that
    # an id is never reused by another completion while it is here).
    served: dict[int, Completion] = field(default_factory=dict)

    def sender(self, stream: int) -> Sender:
        """A sender on the run's send path whose retries the round journals; `stream` keeps its
        jitter's draws apart from another sender's in the same round."""
        ctx, cfg = self.ctx, self.ctx.config
        seed = sample_seed(cfg.seed, "", self.round, stream)
        sender = Sender(
            ctx.provider,
            ctx.limiter,
            ctx.retry,
            cfg.timeout_s,
            self.on_retry,
            seed=seed,
            cache=None if ctx.cache is None else _Marking(ctx.cache, self.served),
            stopped=lambda: ctx.stopped,
        )
        if ctx.attempted is not None:
            sender.on_attempt = self._attempt_hook(ctx.attempted)
        return sender

    def _attempt_hook(self, told: Callable[[Attempted], None]) -> JobAttemptHook:
        """Tells `told` of each attempt of a job, by its sample's key."""
        items = self.state.items

        def attempted(
            job: Job,
            n: int,
            completion: Completion | None,
            error: ProviderError | None,
            backoff: float,
        ) -> None:
            told(
                Attempted(
                    job.round,
                    items[job.row].id,
                    job.k,
                    n,
                    None if completion is None else completion.usage,
                    None if error is None else error.kind,
                    backoff,
                    last_wait(),
                    time.time_ns(),
                    job.request.sampling.temperature,
                    None if completion is None else completion.latency_s,
                )
            )

        return attempted

    def from_cache(self, completion: Completion) -> bool:
        """Whether the response cache served `completion` (asked once, when it lands)."""
        return self.served.pop(id(completion), None) is completion

    def admitted(self, jobs: Iterable[Job]) -> AsyncIterator[Job]:
        """`jobs`, each once the run budget has reserved its worst case (`RunBudget.admit`:
        released when the sample is accounted); none once the run stops."""
        return _Admitted(self, iter(jobs))

    async def land(
        self,
        jobs: Iterable[Job] | AsyncIterator[Job],
        send: Callable[[Job], Awaitable[Outcome]],
        to_send: int,
    ) -> None:
        """Sends each of `jobs` (at most `to_send`) through `send` and lands its outcome in the
        round, until they run out or the run stops (`run_round`)."""
        ctx, cfg = self.ctx, self.ctx.config
        workers = min(cfg.concurrency, to_send)
        # A few verify workers per verifier process keep every process busy.
        verifiers = min(workers, max(4, 4 * cfg.verifier_workers))

        def dispatch() -> bool:  # a job goes out unless the run stops: counted as sent
            if ctx.stopped:
                return False
            self.on_sent()
            return True

        await run_round(
            jobs,
            send,
            self.on_landed,
            self.on_judged,
            workers=workers,
            verifiers=verifiers,
            dispatch=dispatch,
            on_failure=ctx.fail,
        )


class _Admitted:
    """Jobs taken one at a time, each once the run budget has room for its worst case; the
    workers that share it wait their turn (an async generator cannot be awaited twice at once)."""

    def __init__(self, landing: Landing, jobs: Iterator[Job]) -> None:
        self.landing, self.jobs = landing, jobs
        self.turn = asyncio.Lock()
        self.done = False

    def __aiter__(self) -> _Admitted:
        return self

    async def __anext__(self) -> Job:
        async with self.turn:
            job = None if self.done else next(self.jobs, None)
            if job is not None:
                landing = self.landing
                ctx = landing.ctx
                worst = worst_of(job.request, ctx.budget.pricing.price, ctx.outputs)
                key = (landing.round, job.row, job.k)
                if await ctx.budget.admit(landing.state, key, worst):
                    return job
            if not self.done:
                self.done = True
                close = getattr(self.jobs, "close", None)
                if close is not None:  # the limiter's feed ends with it (stragglers hedged)
                    close()
            raise StopAsyncIteration


class _Marking(ProviderCache):
    """The run's cache as a round's senders see it: each completion it serves is noted, so the
    round journals that sample as a cache answer (no request went out)."""

    def __init__(self, cache: ProviderCache, served: dict[int, Completion]) -> None:
        # Not ProviderCache.__init__: the hits and misses stay counted on `cache`.
        self.inner, self.served = cache, served

    def lookup(self, request: Request) -> Completion | None:
        """`cache`'s answer, noted as served from the cache until it lands."""
        cached = self.inner.lookup(request)
        if cached is not None:
            self.served[id(cached)] = cached
        return cached

    def count_miss(self) -> None:
        """One attempt goes to the provider."""
        self.inner.count_miss()

    def store(self, request: Request, completion: Completion) -> None:
        """Keeps a completion the provider returned."""
        self.inner.store(request, completion)
