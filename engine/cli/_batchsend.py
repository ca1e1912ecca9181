"""How `ttc batch` sends: each request of the input through the engine's limiter and retries,
synchronously, its result journaled the moment it lands.

    INPUT.jsonl ─► scan (every line validated, sha256) ─► journal (resume: skip final results)
       └─► lazy reader ─► bounded queue ─► workers ─► Sender.call_with_retry ─► post_json
                                                       └─► journal.record (one line, at once)
    every request landed ─► OUTPUT.jsonl in input order (temporary file, then rename)

A response (a 2xx that is an answer, or a 4xx other than 429, recorded as OpenAI does) is final;
a request whose retries ran out or that failed fatally gets an `error` line and is sent again by a
later run. Another way of sending (a provider's Batch API) can sit beside this module: the
command (`_batch`) and the files (`_batchio`) do not depend on how requests travel.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from ttc.engine._util._pool import bounded
from ttc.engine.cli._batchio import (
    USAGE_FIELDS,
    BatchJob,
    BatchJournal,
    iter_jobs,
    journal_path,
    scan_input,
    tally,
    usage_tokens,
)
from ttc.engine.cli._control import BatchSteering
from ttc.engine.contract._errors import ConfigError, Fatal, ProviderError, RateLimited
from ttc.engine.contract._types import RateInfo
from ttc.engine.journal._lock import RunLock
from ttc.engine.run._budget import FirstAttempts, cause
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Sender
from ttc.engine.send._tokens import TokenEstimator, token_count
from ttc.engine.send._waits import AttemptHook

log = logging.getLogger("ttc")

PostResult = tuple[int, Any, RateInfo | None]


class RawProvider(Protocol):
    """An endpoint that POSTs a JSON body as is (e.g. `ttc.adapters.OpenAIProvider`).

    `path` is relative to the provider's base URL (which ends in /v1). It raises RateLimited,
    Transient or Fatal for failures, a 2xx that is no answer among them (Transient: no `choices`
    for /chat/completions and /completions, no `data` for /embeddings, an `error` object), and
    returns (status, parsed body, rate) for a 2xx answer or for a request refused as bad (a 4xx
    other than 429), which is recorded, not retried.
    """

    async def post_json(self, path: str, body: dict[str, Any]) -> PostResult: ...


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """How a batch ended; `output` is None when it was interrupted (the journal holds it all)."""

    total: int
    sent: int  # requests that landed in this run
    replayed: int  # requests with a final result from an earlier run
    counts: Mapping[str, int]  # results by status code ("200", "400") or "error:<kind>"
    tokens: int
    rate_limited: int  # 429s met in this run
    retries: int
    wall_s: float
    output: Path | None
    journal: Path
    # Why the provider refused the account (a bad key, a quota), when it stopped the batch.
    refusal: str | None = None
    # The commonest cause of this run's requests that ended in an error, and how many it ended.
    cause: tuple[str, int] | None = None

    @property
    def interrupted(self) -> bool:
        return self.output is None

    @property
    def answered(self) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith("2"))

    @property
    def errors(self) -> int:
        return sum(n for k, n in self.counts.items() if k.startswith("error:"))

    @property
    def refused(self) -> int:
        return sum(self.counts.values()) - self.answered - self.errors


class BatchProgress:
    """Counts a batch as it goes and logs a line every `every_s` seconds."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self.total = self.done = self.sent = self.errors = self.tokens = 0
        self.rate_limited = self.retries = 0
        self._seen: deque[tuple[float, int]] = deque()  # (time, sent) for the achieved rate
        self._ticker: asyncio.Task[None] | None = None

    def start(self, total: int, done: int) -> None:
        """Begin logging (call inside the running loop)."""
        self.total, self.done = total, done
        self._seen.append((time.monotonic(), 0))
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    def retried(self, error: ProviderError) -> None:
        self.retries += 1
        self.rate_limited += isinstance(error, RateLimited)

    def landed(self, tokens: int, error: ProviderError | None) -> None:
        self.sent += 1
        self.done += 1
        self.tokens += tokens
        if error is not None:
            self.errors += 1
            self.rate_limited += isinstance(error, RateLimited)

    def per_minute(self) -> float:
        """Requests landed per minute over about the last minute."""
        now = time.monotonic()
        self._seen.append((now, self.sent))
        while len(self._seen) > 2 and self._seen[1][0] <= now - 60:
            self._seen.popleft()
        (t0, n0), (t1, n1) = self._seen[0], self._seen[-1]
        return (n1 - n0) * 60 / (t1 - t0) if t1 > t0 else 0.0

    def line(self) -> str:
        return (
            f"batch {self.done:,}/{self.total:,} | {self.per_minute():.0f} req/min | "
            f"429s {self.rate_limited} retries {self.retries} | errors {self.errors} | "
            f"tokens {self.tokens:,}"
        )

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            log.info("%s", self.line())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None


# Where a request's text is, and its output cap, in the first of these fields it has.
_PROMPT_FIELDS = ("messages", "input", "prompt")
_CAP_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
# The usage fields a response's tokens are read from, each checked to be a token count.
_USAGE_CHECKED = ("total_tokens", *USAGE_FIELDS)


class _Estimator:
    """A request's tokens for the TPM limit, by the engine's one estimator: its JSON text / 4 plus
    its output cap (or the running mean of outputs) per choice."""

    def __init__(self) -> None:
        self.tokens = TokenEstimator()
        self._said: set[str] = set()

    @property
    def mean_output(self) -> float:
        return self.tokens.mean_output

    def estimate(self, job: BatchJob) -> int:
        body = job.body
        chars = 0
        for key in _PROMPT_FIELDS:
            if key in body:
                text = body[key]
                chars = len(orjson.dumps(text)) if text is not None else 0
                break
        if job.url == "/v1/embeddings":
            return self.tokens.prompt(chars)
        cap = None
        for key in _CAP_FIELDS:
            value = body.get(key)
            if isinstance(value, int) and value > 0:
                cap = value
                break
        n = body.get("n")
        return self.tokens.estimate(chars, cap=cap, n=n if isinstance(n, int) and n > 0 else 1)

    def account(self, result: PostResult) -> tuple[int, RateInfo | None]:
        """The tokens a response used, and its rate headers; feeds the mean output. A usage
        value that is no token count is left out of both, said once per field."""
        _, body, rate = result
        usage = body.get("usage") if isinstance(body, dict) else None
        if isinstance(usage, dict):
            self._check(usage)
            out = token_count(usage.get("completion_tokens", usage.get("output_tokens")))
            if out is not None:
                self.tokens.observe(out)
        return usage_tokens(body), rate

    def _check(self, usage: dict[str, Any]) -> None:
        for field in _USAGE_CHECKED:
            if field in usage and token_count(usage[field]) is None and field not in self._said:
                self._said.add(field)
                log.warning(
                    "batch: usage %s of a response is not a token count; it is left out of the "
                    "token tally (said once)",
                    field,
                )


@dataclass(frozen=True, slots=True)
class SendPolicy:
    """How each request travels: the limiter, the retry policy and the per-attempt timeout;
    `traced`, if given, makes each job's attempt hook (its model named; --otel); `steering`:
    `ttc ctl`'s changes to the limiter, journaled while the journal is open."""

    limiter: Limiter
    retry: RetryPolicy
    timeout_s: float
    traced: Callable[[BatchJob, str | None], AttemptHook] | None = None
    steering: BatchSteering | None = None


# The output lines' ids: unique, not secret, so a generator seeded once from the OS (two reads
# of os.urandom per request were a tenth of `ttc batch`'s CPU at zero latency).
_IDS = random.Random()


def _hex_id() -> str:
    return f"{_IDS.getrandbits(128):032x}"


def output_line(
    job: BatchJob, result: PostResult | None, error: ProviderError | None
) -> dict[str, Any]:
    """The Batch output line of a request: its response, or the error its retries ended in."""
    out: dict[str, Any] = {"id": f"batch_req_{_hex_id()}", "custom_id": job.custom_id}
    if result is not None:
        status, data, _ = result
        out["response"] = {
            "status_code": status,
            # The raw interface returns no headers, so the request id is ours.
            "request_id": f"req_{_hex_id()}",
            "body": data,
        }
        out["error"] = None
    else:
        assert error is not None
        out["response"] = None
        out["error"] = {"code": error.kind, "message": str(error)}
    return out


class _Batch:
    """One batch on its way: sends a job, journals its line, counts it, and stops the batch
    when the provider refuses the account (a bad key, a quota)."""

    def __init__(
        self,
        provider: RawProvider,
        policy: SendPolicy,
        journal: BatchJournal,
        model: str | None,
        progress: BatchProgress,
        stop: asyncio.Event,
    ) -> None:
        self.provider, self.journal, self.model = provider, journal, model
        self.progress, self.stop = progress, stop
        self.estimator = _Estimator()
        self.refusal: str | None = None
        self.causes: Counter[str] = Counter()  # of the requests that ended in an error
        self.first = FirstAttempts()  # every attempt alike failing: stop at once
        # No provider: raw calls go through `call_with_retry`, which takes its own retry hook.
        self.sender = Sender(
            None, policy.limiter, policy.retry, policy.timeout_s, stopped=stop.is_set
        )
        self.traced = policy.traced  # each job's attempt hook, when traced (--otel)

    async def send(self, job: BatchJob) -> None:
        body = job.body if self.model is None else {**job.body, "model": self.model}
        path = job.url.removeprefix("/v1")

        def hook(attempt: int, error: ProviderError, delay: float) -> None:
            self._refused(self.first.failed(error))
            self.progress.retried(error)
            log.debug("%s: attempt %d: %s; retry in %.1fs", job.custom_id, attempt, error, delay)

        async def call() -> PostResult:
            return await self.provider.post_json(path, body)

        # One name first: unpacking at once makes mypy infer T | None for the result.
        traced = None if self.traced is None else self.traced(job, body.get("model"))
        outcome = await self.sender.call_with_retry(
            self.estimator.estimate(job), call, self.estimator.account, hook, traced
        )
        result, error, attempts = outcome
        if error is None:
            self.first.answered()
        else:
            self.causes[cause(error)] += 1
            self._refused(self.first.failed(error))
        if isinstance(error, Fatal) and error.stops_run:
            self._refused(str(error)[:300])
        line = output_line(job, result, error)
        tokens = usage_tokens(result[1]) if result else 0
        final = result is not None
        self.journal.record(job.index, line, final=final, attempts=attempts, tokens=tokens)
        self.progress.landed(tokens, error)

    def _refused(self, why: str | None) -> None:
        """The provider refuses (`why`, None: it does not): the batch stops, the first reason
        stands."""
        if why is not None and self.refusal is None:
            self.refusal = why
            log.warning("stopping: the provider refuses: %s", why)
            self.stop.set()


async def run_batch(
    input_path: Path | str,
    output_path: Path | str,
    provider: RawProvider,
    policy: SendPolicy,
    *,
    resume: bool = False,
    model: str | None = None,
    progress: BatchProgress | None = None,
    stop: asyncio.Event | None = None,
) -> BatchSummary:
    """Sends every request of `input_path` not yet final in the journal; writes `output_path`.

    Raises DataError (bad input, named by line) or ConfigError before any request. Setting
    `stop` ends dispatching: requests in flight land, and the summary says `interrupted`.
    The policy's `steering` (`ttc ctl`) is handed the changes a resumed journal holds.
    """
    input_path, output_path = Path(input_path), Path(output_path)
    if input_path.resolve() == output_path.resolve():
        raise ConfigError(f"--out: {output_path} is the input file")
    scan = scan_input(input_path, need_model=model is None)
    progress = progress or BatchProgress()
    stop = stop or asyncio.Event()
    started = time.perf_counter()
    jpath = journal_path(output_path)
    # One writer per output: a second `ttc batch` on it would send every request twice.
    lock = RunLock(jpath.with_name(f"{jpath.name}.lock"), f"--out {output_path}")
    with lock, BatchJournal(jpath, scan).open(resume=resume) as journal:
        pending = scan.count - journal.replayed
        if journal.replayed:
            log.info(
                "%s: %d of %d requests have a final result",
                journal.path,
                journal.replayed,
                scan.count,
            )
        batch = _Batch(provider, policy, journal, model, progress, stop)
        progress.start(scan.count, journal.replayed)
        steering = policy.steering
        if steering is not None:
            steering.opened(journal, journal.steered)
        try:
            # Closed however dispatching ends: the reader holds the input file open.
            with contextlib.closing(iter_jobs(scan.path, journal.final)) as jobs:
                workers = max(1, min(policy.limiter.max_concurrency, pending))
                # Fed through the limiter: once all are taken, stragglers are hedged.
                await dispatch(policy.limiter.fed(jobs), batch.send, workers, stop)
        finally:
            if steering is not None:
                steering.opened(None)
            await progress.stop()
        interrupted = progress.sent < pending
        counts, tokens = tally(journal, None if interrupted else output_path)
    return BatchSummary(
        total=scan.count,
        sent=progress.sent,
        replayed=journal.replayed,
        counts=dict(counts),
        tokens=tokens,
        rate_limited=progress.rate_limited,
        retries=progress.retries,
        wall_s=time.perf_counter() - started,
        output=None if interrupted else output_path,
        journal=journal.path,
        refusal=batch.refusal,
        cause=batch.causes.most_common(1)[0] if batch.causes else None,
    )


async def dispatch(
    jobs: Iterable[BatchJob],
    send: Callable[[BatchJob], Awaitable[None]],
    workers: int,
    stop: asyncio.Event,
) -> None:
    """`send` every job through the engine's bounded pool: `jobs` is read only as fast as
    `workers` take requests, and none is taken once `stop` is set."""
    await bounded(itertools.takewhile(lambda _: not stop.is_set(), jobs), send, workers)
