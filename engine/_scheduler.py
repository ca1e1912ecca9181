"""One round of requests: a bounded producer/consumer pipeline under an `asyncio.TaskGroup`.

    jobs (lazy) ─► queue ─► request workers ─► send_with_retry ─► send_limited ─► provider.generate
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

from ttc.engine._errors import Fatal, ProviderError, RateLimited, Transient
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._types import Completion, Provider, Request


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
        attempt = 0
        while True:
            attempt += 1
            try:
                completion = await self.send_limited(job)
                return Outcome(completion, None, attempt)
            except ProviderError as exc:
                error = exc
            if isinstance(error, RateLimited) and error.retry_after:
                self.limiter.defer(error.retry_after)
            if not self.policy.should_retry(attempt, error):
                return Outcome(None, error, attempt)
            delay = self.policy.delay(attempt, error, self._rng)
            self.on_retry(job, attempt, error, delay)
            await asyncio.sleep(delay)

    async def send_limited(self, job: Job) -> Completion:
        """One attempt: a limiter slot, a timeout, the provider call, and a sanity check."""
        async with self.limiter.slot(job.est_tokens):
            try:
                async with asyncio.timeout(self.timeout_s):
                    completion = await self.provider.generate(job.request)
            except TimeoutError as exc:
                raise Transient(f"attempt timed out after {self.timeout_s:g}s") from exc
            except ProviderError:
                raise
            except Exception as exc:
                # A provider must raise from the error tree; anything else is a bug or garbage,
                # recorded for this sample so the rest of the run goes on.
                raise Fatal(f"provider raised {exc!r}") from exc
        usage = completion.usage
        self.limiter.reconcile(
            job.est_tokens, usage.input_tokens + usage.output_tokens + usage.thinking_tokens
        )
        if len(completion.texts) != job.request.n:
            raise Fatal(f"provider returned {len(completion.texts)} texts for n={job.request.n}")
        return completion


async def run_round(
    jobs: Iterable[Job],
    sender: Sender,
    on_landed: Callable[[Job, Outcome], None],
    on_judged: Callable[[list[tuple[Job, Completion]]], Awaitable[None]],
    *,
    workers: int,
    verifiers: int,
    batch: int = 64,
) -> None:
    """Sends every job; `on_landed` sees each outcome at once, `on_judged` the answered ones."""
    todo: asyncio.Queue[Job | None] = asyncio.Queue(maxsize=2 * workers)
    landed: asyncio.Queue[tuple[Job, Completion] | None] = asyncio.Queue(maxsize=2 * workers)
    senders_left = workers

    async def request_worker() -> None:
        nonlocal senders_left
        while (job := await todo.get()) is not None:
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
