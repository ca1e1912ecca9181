"""How every request reaches a provider: the response cache, the limiter, a timeout, retries.

    send_with_retry(job) ─► cache.lookup ── hit ─► done (no rate-limit slot spent)
                         └► call_with_retry ─► call_limited ─► provider.generate ─► cache.store

`call_with_retry` is the engine's one retry loop, for any call that is paced by the limiter and
classified by the error tree: the round's samples (through `send_with_retry`), the role models'
calls, and `ttc batch`'s raw requests. The policy (`RetryPolicy`) decides whether and how long
to wait; the limiter is told of every outcome, so a refusal cuts the concurrency cap and a
success's usage corrects the tokens charged for it. Each attempt runs under `first_answer`: once
the work has run out, a straggling attempt gets a second copy and the first answer is kept
(`_stragglers`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ttc.engine.contract._errors import Fatal, ProviderError, RateLimited, Transient
from ttc.engine.contract._fastinit import fast_init
from ttc.engine.contract._types import Completion, Provider, RateInfo, Request
from ttc.engine.send._cache import ProviderCache
from ttc.engine.send._deadlines import Deadlines
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._stragglers import first_answer
from ttc.engine.send._tokens import billed
from ttc.engine.send._waits import AttemptHook, watch_wait

__all__ = ["Job", "JobAttemptHook", "Outcome", "RetryHook", "Sender"]

T = TypeVar("T")


@fast_init
@dataclass(frozen=True, slots=True)
class Job:
    """One planned sample: question row, round, sample index, and the request to send."""

    row: int
    round: int
    k: int
    request: Request
    est_tokens: int


@fast_init
@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job ended: a completion, or the error that ended its last attempt."""

    completion: Completion | None
    error: ProviderError | None
    attempts: int


RetryHook = Callable[[Job, int, ProviderError, float], None]
"""Told of each retry of a job: the job, the attempt that failed, its error, the wait."""


JobAttemptHook = Callable[[Job, int, Completion | None, ProviderError | None, float], None]
"""Told of each attempt of a job as it ends (a host tracing attempts): the job, the attempt's
number, its completion (None: it failed), its error, and the backoff it waited before it; the
limiter's wait, when the limiter times its slots, is `last_wait()` (`_waits`)."""


def _no_retry_hook(job: Job, attempt: int, error: ProviderError, delay: float) -> None:
    return None


def _never() -> bool:
    return False


class Sender:
    """Sends through the limiter with a per-attempt timeout, retrying as the policy says.

    `provider` may be None for a sender that only makes raw calls (`call_with_retry`). `cache`,
    if given, answers `send_with_retry` before any rate-limit slot is taken, and keeps every
    completion bought. Once `stopped()` is true, a failed attempt is not tried again (a resumed
    run sends the request anew). `on_attempt`, when set, is told of every attempt of a job as it
    ends (`JobAttemptHook`).
    """

    def __init__(
        self,
        provider: Provider | None,
        limiter: Limiter,
        policy: RetryPolicy,
        timeout_s: float,
        on_retry: RetryHook = _no_retry_hook,
        seed: int = 0,
        *,
        cache: ProviderCache | None = None,
        stopped: Callable[[], bool] = _never,
    ) -> None:
        self.provider = provider
        self.on_attempt: JobAttemptHook | None = None
        self.stopped = stopped
        self.cache = cache
        self.limiter = limiter
        self.policy = policy
        self.timeout_s = timeout_s
        self._deadlines = Deadlines(timeout_s)  # every attempt's timeout, on one timer
        self.on_retry = on_retry
        self._rng = random.Random(seed)

    async def send_with_retry(self, job: Job) -> Outcome:
        """The cache's answer, or attempts until success, a non-retryable error, or the policy's
        last attempt."""
        provider, cache, request = self.provider, self.cache, job.request
        if provider is None:
            raise TypeError("this Sender has no provider: it only makes raw calls")
        if cache is not None:
            cached = cache.lookup(request)
            if cached is not None and len(cached.texts) == request.n:
                return Outcome(cached, None, 1)

        def hook(attempt_no: int, error: ProviderError, delay: float) -> None:
            self.on_retry(job, attempt_no, error, delay)

        attempt = _Attempt(provider, request, cache)
        # One name first: unpacking at once makes mypy infer the call's T as Completion | None.
        result = await self.call_with_retry(
            job.est_tokens, attempt, attempt.account, hook, self._attempted(job)
        )
        completion, error, attempts = result
        if completion is not None:
            if provider.simulated and not completion.simulated:
                # The label follows the answer: into the cache, the journal and the reports.
                completion = dataclasses.replace(completion, simulated=True)
            if cache is not None:
                cache.store(request, completion)
        return Outcome(completion, error, attempts)

    def _attempted(self, job: Job) -> AttemptHook | None:
        """`on_attempt` for the attempts of `job`, or None when no one traces them."""
        traced = self.on_attempt
        if traced is None:
            return None

        def attempted(n: int, got: object, error: ProviderError | None, backoff: float) -> None:
            traced(job, n, got if isinstance(got, Completion) else None, error, backoff)

        return attempted

    async def call_with_retry(
        self,
        est_tokens: int,
        call: Callable[[], Awaitable[T]],
        account: Callable[[T], tuple[int, RateInfo | None]],
        on_retry: Callable[[int, ProviderError, float], None],
        on_attempt: AttemptHook | None = None,
    ) -> tuple[T | None, ProviderError | None, int]:
        """Any provider call with the engine's limits and retries: (result, last error, attempts).

        `account` tells the tokens a result used and the rate-limit headers it came with;
        `on_attempt`, if given, is told of every attempt as it ends (a tracing host's).
        """
        attempt = 0
        backoff = 0.0  # what the attempt waited after the one before failed
        while True:
            attempt += 1
            if on_attempt is not None:
                watch_wait()  # the slot this attempt is granted says why it waited
            try:
                if self.limiter.hedge:
                    # A straggler gets a second copy once the work has run out (`_stragglers`).
                    result = await first_answer(
                        lambda due: self.call_limited(est_tokens, call, account, due),
                        lambda: self.call_limited(est_tokens, call, account, copy=True),
                    )
                else:  # one copy: no task of its own, nothing watched
                    result = await self.call_limited(est_tokens, call, account)
            except ProviderError as exc:
                error = exc
            else:
                if on_attempt is not None:
                    on_attempt(attempt, result, None, backoff)
                return result, None, attempt
            if on_attempt is not None:
                on_attempt(attempt, None, error, backoff)
            if not self.policy.should_retry(attempt, error) or self.stopped():
                return None, error, attempt
            # The retry waits at least the provider's retry-after (the policy's floor); other
            # requests go on, paced by the limiter whose cap the refusal has cut.
            delay = backoff = self.policy.delay(attempt, error, self._rng)
            on_retry(attempt, error, delay)
            await asyncio.sleep(delay)
            if self.stopped():  # the run stopped while this request waited
                return None, error, attempt

    async def call_limited(
        self,
        est_tokens: int,
        call: Callable[[], Awaitable[T]],
        account: Callable[[T], tuple[int, RateInfo | None]],
        due: asyncio.Future[None] | None = None,
        *,
        copy: bool = False,
    ) -> T:
        """One attempt: a limiter slot, a timeout, the call; its outcome feeds the limiter.
        `due`, if given, is made done if the attempt becomes a straggler (`_stragglers`); `copy`
        marks a straggler's second copy, counted once it has its slot."""
        async with self.limiter.slot(est_tokens) as ticket:
            self.limiter.stragglers.copies += copy  # a straggler's copy goes out
            deadlines = self._deadlines
            if deadlines.seconds != self.timeout_s:  # changed since: the attempts to come
                deadlines = self._deadlines = Deadlines(self.timeout_s)
            try:
                with deadlines.watch():
                    if due is None:
                        result = await call()
                    else:
                        with self.limiter.stragglers.watch(due):
                            result = await call()
            except TimeoutError as exc:
                raise Transient(f"attempt timed out after {self.timeout_s:g}s") from exc
            except RateLimited as exc:
                self.limiter.rate_limited(ticket, exc.rate)
                self.limiter.reconcile(est_tokens, 0)  # refused: the server counted nothing
                raise
            except asyncio.CancelledError as exc:
                if _cancelled_from_above():
                    raise
                # A library below the provider gave up (its task was not cancelled by us): the
                # attempt failed, and is retried like any other transient failure.
                raise Transient(f"the provider's call was cancelled from within ({exc!r})") from exc
        # Anything else a provider raises, outside the error tree, is a bug in it: it propagates
        # as itself, with its traceback (the round stops dispatching and raises it).
        tokens, rate = account(result)
        self.limiter.reconcile(est_tokens, tokens)
        self.limiter.succeeded(rate)
        return result


def _cancelled_from_above() -> bool:
    """Whether the running task is being cancelled (by its owner), not handed a stray
    CancelledError by code it awaited."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _Attempt:
    """One request's attempts: each is the provider's own call, with no coroutine of ours
    around it (one a request less); its answer is checked as the limiter accounts it."""

    __slots__ = ("cache", "provider", "request")

    def __init__(self, provider: Provider, request: Request, cache: ProviderCache | None) -> None:
        self.provider, self.request, self.cache = provider, request, cache

    def __call__(self) -> Awaitable[Completion]:
        if self.cache is not None:
            self.cache.count_miss()
        return self.provider.generate(self.request)

    def account(self, completion: Completion) -> tuple[int, RateInfo | None]:
        """The tokens it used and its rate-limit headers; Fatal if it has not one text for
        each sample asked (a bug in the provider: an attempt that failed, not retried)."""
        n = self.request.n
        if len(completion.texts) != n:
            raise Fatal(f"provider returned {len(completion.texts)} texts for n={n}")
        return billed(completion.usage), completion.rate
