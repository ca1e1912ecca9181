"""One round of requests: a bounded producer/consumer pipeline under an `asyncio.TaskGroup`.

    jobs (lazy) ─► queue ─► request workers ─► send_with_retry ─► call_limited ─► provider.generate
                                               │
                                               ├─► on_landed (journaled at once: never lost)
                                               └─► landed queue ─► verify workers ─► on_judged
                                                                   (in batches of what landed)

Request workers are as many as the concurrency cap, verify workers a few per verifier process;
jobs are built lazily and the queues are bounded, so no task or prompt exists for work that cannot
start yet, and memory stays flat however large the test set. A sample goes to the verifiers the
moment it lands, while other requests are still in flight; a verify worker takes everything that
has landed meanwhile (up to `batch` samples) in one go, because a round trip to a verifier process
costs far more than judging one response.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from ttc.engine._errors import Fatal, ProviderError, RateLimited, Transient
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._types import Completion, Provider, RateInfo, Request


@dataclass(frozen=True, slots=True)
class Job:
    """One planned sample: question row, round, sample index, and the request to send."""

    row: int
    round: int
    k: int
    request: Request
    est_tokens: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job ended: a completion, or the error that ended its last attempt."""

    completion: Completion | None
    error: ProviderError | None
    attempts: int


RetryHook = Callable[[Job, int, ProviderError, float], None]

T = TypeVar("T")


class Sender:
    """Sends one job through the limiter with a per-attempt timeout, retrying as the policy says."""

    def __init__(
        self,
        provider: Provider,
        limiter: Limiter,
        policy: RetryPolicy,
        timeout_s: float,
        on_retry: RetryHook,
        seed: int = 0,
    ) -> None:
        self.provider = provider
        self.limiter = limiter
        self.policy = policy
        self.timeout_s = timeout_s
        self.on_retry = on_retry
        self._rng = random.Random(seed)

    async def send_with_retry(self, job: Job) -> Outcome:
        """Attempts until success, a non-retryable error, or the policy's last attempt."""
        lookup = getattr(self.provider, "lookup", None)  # a response cache answers first
        if lookup is not None:
            cached: Completion | None = lookup(job.request)
            if cached is not None and len(cached.texts) == job.request.n:
                return Outcome(cached, None, 1)

        async def attempt() -> Completion:
            completion = await self.provider.generate(job.request)
            if len(completion.texts) != job.request.n:
                raise Fatal(
                    f"provider returned {len(completion.texts)} texts for n={job.request.n}"
                )
            return completion

        def hook(attempt_no: int, error: ProviderError, delay: float) -> None:
            self.on_retry(job, attempt_no, error, delay)

        result = await self.call_with_retry(job.est_tokens, attempt, _completion_account, hook)
        return Outcome(*result)

    async def call_with_retry(
        self,
        est_tokens: int,
        call: Callable[[], Awaitable[T]],
        account: Callable[[T], tuple[int, RateInfo | None]],
        on_retry: Callable[[int, ProviderError, float], None],
    ) -> tuple[T | None, ProviderError | None, int]:
        """Any provider call with the engine's limits and retries: (result, last error, attempts).

        `account` tells the tokens a result used and the rate-limit headers it came with.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.call_limited(est_tokens, call, account), None, attempt
            except ProviderError as exc:
                error = exc
            if not self.policy.should_retry(attempt, error):
                return None, error, attempt
            # The retry waits at least the provider's retry-after (the policy's floor); other
            # requests go on, paced by the limiter whose cap the refusal has cut.
            delay = self.policy.delay(attempt, error, self._rng)
            on_retry(attempt, error, delay)
            await asyncio.sleep(delay)

    async def call_limited(
        self,
        est_tokens: int,
        call: Callable[[], Awaitable[T]],
        account: Callable[[T], tuple[int, RateInfo | None]],
    ) -> T:
        """One attempt: a limiter slot, a timeout, the call; its outcome feeds the limiter."""
        async with self.limiter.slot(est_tokens) as ticket:
            try:
                async with asyncio.timeout(self.timeout_s):
                    result = await call()
            except TimeoutError as exc:
                raise Transient(f"attempt timed out after {self.timeout_s:g}s") from exc
            except RateLimited as exc:
                self.limiter.rate_limited(ticket, exc.rate)
                self.limiter.reconcile(est_tokens, 0)  # refused: the server counted nothing
                raise
            except ProviderError:
                raise
            except Exception as exc:
                # A provider must raise from the error tree; anything else is a bug or garbage,
                # recorded for this sample so the rest of the run goes on.
                raise Fatal(f"provider raised {exc!r}") from exc
        tokens, rate = account(result)
        self.limiter.reconcile(est_tokens, tokens)
        self.limiter.succeeded(rate)
        return result


def _completion_account(completion: Completion) -> tuple[int, RateInfo | None]:
    u = completion.usage
    return u.input_tokens + u.output_tokens + u.thinking_tokens, completion.rate


async def run_round(
    jobs: Iterable[Job],
    sender: Sender,
    on_landed: Callable[[Job, Outcome], None],
    on_judged: Callable[[list[tuple[Job, Completion]]], Awaitable[None]],
    *,
    workers: int,
    verifiers: int,
    batch: int = 64,
    stopped: Callable[[], bool] = lambda: False,
) -> None:
    """Sends every job; `on_landed` sees each outcome at once, `on_judged` the answered ones.

    Once `stopped()` is true, jobs still queued are dropped unsent (a resumed run sends them);
    requests in flight finish.
    """
    todo: asyncio.Queue[Job | None] = asyncio.Queue(maxsize=2 * workers)
    landed: asyncio.Queue[tuple[Job, Completion] | None] = asyncio.Queue(maxsize=2 * workers)
    senders_left = workers

    async def request_worker() -> None:
        nonlocal senders_left
        while (job := await todo.get()) is not None:
            if stopped():
                continue
            outcome = await sender.send_with_retry(job)
            on_landed(job, outcome)
            if outcome.completion is not None:
                await landed.put((job, outcome.completion))
        senders_left -= 1
        if senders_left == 0:
            for _ in range(verifiers):
                await landed.put(None)

    async def verify_worker() -> None:
        finished = False
        while not finished:
            first = await landed.get()
            if first is None:
                return
            group = [first]
            while len(group) < batch and not landed.empty():
                more = landed.get_nowait()
                if more is None:
                    finished = True
                    break
                group.append(more)
            await on_judged(group)

    async with asyncio.TaskGroup() as tg:
        for _ in range(workers):
            tg.create_task(request_worker())
        for _ in range(verifiers):
            tg.create_task(verify_worker())
        for job in jobs:
            await todo.put(job)
        for _ in range(workers):
            await todo.put(None)
