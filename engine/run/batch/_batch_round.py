"""A round through a Batch API: the samples the cache does not answer go out as batches, and each
lands as if it had come back synchronously (the same journal events), so replay and resume work
as they do for any round.

    jobs ─► cache ── hit ──────────────────────────────────────────────► ready ─► run_round
         └► chunks (≤ max_requests, ≤ max_bytes) ─► upload ─► create ─► poll ... ─► results ─┘
              journaled: batch_file, batch                 batch_state  │
                                                                        ├ answered: lands
                                     failed in it, expired, cancelled ──┴► a new batch (or the
                                                                          synchronous path)

The round hands this module a `Landing` (`run/_dispatch`), never itself: its pipeline
(`Landing.land`: landing, journaling, judging) is the synchronous rounds' own; here its jobs come
from a queue that this module fills as batches end, and its "send" hands over the outcome the
batch gave. Durable: every file and batch id is journaled the moment it exists; a resumed
run polls the round's journaled batches for the samples it still lacks, asks the vendor for a
batch by its tag before creating one (a kill between the creation and its journal line), makes
a batch of a journaled file instead of uploading it again (a kill between the two), and creates
batches only for samples no batch holds. A sample is never bought twice: it is in one live batch
at a time, and a new batch holds only requests whose batch ended without them.

How the requests become batches: split by the vendor's limits (`chunks`), checked against
`--max-cost` before each is submitted (`affordable`), and the files a killed session uploaded
that a resumed one may use again (`journaled_files`).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hashlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ttc.engine.contract._batch import FINAL_STATES, BatchAPI, BatchResult, BatchStatus
from ttc.engine.contract._errors import BadRequest, Fatal, ProviderError, Transient
from ttc.engine.contract._state import sample_seed
from ttc.engine.contract._types import Usage
from ttc.engine.journal._batch_events import (
    BatchCreated,
    BatchEvent,
    BatchFileUploaded,
    BatchUpdated,
)
from ttc.engine.run._budget import StopReason
from ttc.engine.run._dispatch import Landing
from ttc.engine.run._scheduler import single
from ttc.engine.send._sender import Job, Outcome, Sender
from ttc.engine.send._tokens import text_tokens

__all__ = ["BatchRound", "custom_id"]

log = logging.getLogger("ttc")

T = TypeVar("T")
# Poll errors in a row (the poll itself failing: the network, the vendor's 5xx) that end the run.
POLL_ERRORS = 30


class _Ready(AsyncIterator[Job]):
    """The jobs whose outcome is known, read by `run_round`'s workers; `close` ends them."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Job | None] = asyncio.Queue()

    def put(self, job: Job) -> None:
        self._queue.put_nowait(job)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def __anext__(self) -> Job:
        job = await self._queue.get()
        if job is None:
            self._queue.put_nowait(None)  # for the next reader
            raise StopAsyncIteration
        return job


@dataclass(slots=True)
class _Live:
    """A batch this round waits for."""

    batch_id: str
    ids: tuple[str, ...]
    attempt: int
    started: float = field(default_factory=time.monotonic)
    status: str = ""
    # Its end was journaled by a session before a resume (its re-sends already counted).
    reported: bool = False


class BatchRound:
    """Sends the jobs of one round through `api` and lands them in the round (`landing`)."""

    def __init__(self, landing: Landing, api: BatchAPI, journaled: Sequence[BatchEvent]) -> None:
        self.landing = landing
        self.ctx = landing.ctx
        self.api = api
        self.t = landing.round
        self.journaled = list(journaled)
        self.resumed = bool(journaled)
        # Files uploaded before a kill, of which no batch was made: used instead of uploading.
        self._uploaded = journaled_files(api, self.journaled)
        self.pending: dict[str, Job] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.attempts: dict[str, int] = collections.Counter()
        self.ready = _Ready()
        self.live: list[_Live] = []
        self._poll_errors = 0
        self._sync: Sender | None = None
        self._rng = random.Random(sample_seed(self.ctx.config.seed, "batch", self.t, 0))

    async def send(self, jobs: Iterable[Job], to_send: int) -> None:
        """Sends every job (at most `to_send`), landing each as its batch ends (or the cache
        answers it)."""

        async def outcome(job: Job) -> Outcome:
            return self.outcomes.pop(custom_id(job))

        async def produce() -> None:
            try:
                await self._produce(jobs)
            finally:
                self.ready.close()

        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(produce())
                await self.landing.land(self.ready, outcome, to_send)
        except BaseExceptionGroup as group:
            raise single(group) from None

    def _land(self, job: Job, outcome: Outcome) -> None:
        self.outcomes[custom_id(job)] = outcome
        self.pending.pop(custom_id(job), None)
        self.ready.put(job)

    async def _produce(self, jobs: Iterable[Job]) -> None:
        cache = self.ctx.cache
        todo: list[Job] = []
        for job in jobs:
            cached = None if cache is None else cache.lookup(job.request)
            if cached is not None and len(cached.texts) == job.request.n:
                self._land(job, Outcome(cached, None, 1))
            else:
                todo.append(job)
        self.pending = {custom_id(job): job for job in todo}
        self._adopt()
        held = {i for live in self.live for i in live.ids}
        # A sample no batch holds goes out at its next attempt: the same tag, and so the same
        # batch found, as a session that made it but was killed before journaling its id.
        by_attempt: dict[int, list[Job]] = {}
        for job in todo:
            if custom_id(job) not in held:
                by_attempt.setdefault(self.attempts[custom_id(job)] + 1, []).append(job)
        for attempt, group in sorted(by_attempt.items()):
            await self._submit(group, attempt)
        await self._wait()

    def _adopt(self) -> None:
        """The round's journaled batches, each polled for the pending samples it was the last
        batch to hold (an ended one too: its answers may not have been journaled yet)."""
        owner: dict[str, BatchCreated] = {}
        for event in self.journaled:
            if isinstance(event, BatchCreated):
                for i in event.ids:
                    self.attempts[i] = max(self.attempts[i], event.attempt)
                    if i in self.pending:
                        owner[i] = event
        reported = {
            e.batch_id
            for e in self.journaled
            if isinstance(e, BatchUpdated) and e.status in FINAL_STATES
        }
        held: dict[str, list[str]] = {}
        for i, event in owner.items():
            held.setdefault(event.batch_id, []).append(i)
        for event in self.journaled:
            if not isinstance(event, BatchCreated):
                continue
            ids = held.pop(event.batch_id, None)
            if ids:
                live = _Live(event.batch_id, tuple(ids), event.attempt)
                live.reported = event.batch_id in reported
                self.live.append(live)
                log.info(
                    "round %d: polling batch %s from before the resume (%d samples)",
                    self.t,
                    event.batch_id,
                    len(ids),
                )

    async def _submit(self, jobs: list[Job], attempt: int) -> None:
        """New batches for `jobs`, split by the vendor's limits; each id journaled at once. The
        jobs go in (row, k) order, so the same samples make the same file and tag."""
        jobs = sorted(jobs, key=lambda job: (job.row, job.k))
        for chunk, lines in chunks(self.api, jobs):
            if self.ctx.stopped or not affordable(self.landing, chunk):
                return
            data = b"".join(lines)
            digest = hashlib.sha256(data).hexdigest()[:20]
            tag = f"ttc-t{self.t}-a{attempt}-{digest}"
            ids = tuple(custom_id(job) for job in chunk)
            status = await self._found(tag) if self.resumed else None
            if status is None:
                file_id = self._uploaded.pop(tag, None)
                if file_id is None:
                    upload = functools.partial(self.api.upload, data, f"{tag}.jsonl")
                    file_id = await self._control(upload)
                    self.ctx.emit(BatchFileUploaded(self.t, tag, file_id, len(chunk), len(data)))
                else:
                    log.info(
                        "round %d: file %s from before the resume (not uploaded again)",
                        self.t,
                        file_id,
                    )
                status = await self._create(file_id, tag)
                self.ctx.emit(BatchCreated(self.t, tag, status.id, file_id, ids, attempt))
            for i in ids:
                self.attempts[i] = attempt
            if self.ctx.cache is not None:  # each request in a batch goes to the provider
                for _ in ids:
                    self.ctx.cache.count_miss()
            self.live.append(_Live(status.id, ids, attempt))
            log.info(
                "round %d: batch %s submitted (%d requests, %s bytes)",
                self.t,
                status.id,
                len(chunk),
                f"{len(data):,}",
            )

    async def _create(self, file_id: str, tag: str) -> BatchStatus:
        """Creates a batch; a retry first asks for one by the tag (the failed attempt may have
        made it: a timeout after the vendor created it), so a retry never makes a second."""
        tried = False

        async def create() -> BatchStatus:
            nonlocal tried
            if tried and (found := await self._found(tag)) is not None:
                return found
            tried = True
            return await self.api.create(file_id, tag)

        return await self._control(create)

    async def _control(self, call: Callable[[], Awaitable[T]]) -> T:
        """A control-plane call (upload, create), retried as the retry policy says."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except ProviderError as exc:
                if not self.ctx.retry.should_retry(attempt, exc):
                    raise
                delay = self.ctx.retry.delay(attempt, exc, self._rng)
                log.warning(
                    "round %d: a batch call failed (%s); again in %.1f s", self.t, exc, delay
                )
                await asyncio.sleep(delay)

    async def _found(self, tag: str) -> BatchStatus | None:
        known = {e.batch_id for e in self.journaled if isinstance(e, BatchCreated)}
        found = await self.api.find(tag)
        if found is None or found.id in known:
            return None
        log.info("round %d: batch %s found by its tag (its id was not journaled)", self.t, found.id)
        return found

    async def _wait(self) -> None:
        """Polls the live batches, backing off, until every one has ended (or the run stops)."""
        first, longest = self.api.poll_s
        delay = first
        while self.live and not self.ctx.stopped:
            await asyncio.sleep(delay)
            delay = min(longest, delay * 1.5)
            for live in list(self.live):
                status = await self._poll(live)
                if status is not None and status.final:
                    self.live.remove(live)
                    await self._ended(live, status)
                elif self._overdue(live):
                    return

    def _overdue(self, live: _Live) -> bool:
        """--batch-deadline: a batch still not ended after it stops the run, resumable (a
        resume polls it again, its deadline counted afresh)."""
        waited = time.monotonic() - live.started
        if waited <= self.api.deadline_s:
            return False
        self.ctx.budget.stop(
            StopReason.budget(
                f"batch {live.batch_id} is still {live.status or 'not ended'} after "
                f"{waited / 3600:.1f} h (--batch-deadline {self.api.deadline_s:g} s); resume to "
                "poll it again"
            )
        )
        return True

    async def _poll(self, live: _Live) -> BatchStatus | None:
        try:
            status = await self.api.poll(live.batch_id)
        except ProviderError as exc:
            if isinstance(exc, Fatal) or self._poll_errors >= POLL_ERRORS:
                raise
            self._poll_errors += 1
            log.warning(
                "round %d: polling batch %s failed (%s); polling again later",
                self.t,
                live.batch_id,
                exc,
            )
            return None
        self._poll_errors = 0
        if status.status != live.status and not status.final:
            live.status = status.status
            self._emit_state(live, status, {})
        return status

    def _emit_state(self, live: _Live, status: BatchStatus, resent: dict[str, int]) -> None:
        waited = round(time.monotonic() - live.started, 1)
        event = BatchUpdated(
            self.t,
            live.batch_id,
            status.status,
            status.total,
            status.completed,
            status.failed,
            waited,
            resent,
        )
        self.ctx.emit(event)
        log.info("%s", event.describe())

    async def _ended(self, live: _Live, status: BatchStatus) -> None:
        """Lands a finished batch's answers; what it did not answer goes again."""
        results = []
        if status.status != "failed":
            waiting = {i: self.pending[i].request for i in live.ids if i in self.pending}
            results = await self.api.results(status, waiting)
        again: list[Job] = []
        failed: list[tuple[Job, ProviderError]] = []
        resent: dict[str, int] = collections.Counter()
        seen: set[str] = set()
        for result in self._accepted(live, results):
            job = self.pending.get(result.custom_id)
            if job is None:
                continue
            seen.add(result.custom_id)
            if result.completion is not None:
                self._answered(job, result)
            elif result.reason in ("failed", "expired", "cancelled") and not _final(result):
                again.append(job)
                resent[result.reason] += 1
            else:
                failed.append((job, result.error or Transient("no answer in the batch")))
        why = status.status if status.status != "completed" else "missing"
        for i in live.ids:
            if i in self.pending and i not in seen:
                again.append(self.pending[i])
                resent[why] += 1
        if not live.reported:
            self._emit_state(live, status, dict(resent))
        for job, error in failed:
            self._land(job, Outcome(None, error, self.attempts[custom_id(job)]))
        await self._again(again, live.attempt + 1)

    def _accepted(self, live: _Live, results: list[BatchResult]) -> list[BatchResult]:
        """The first result of each request `live` holds. What the server sent is input: a line
        that is no result, a result for a request this batch never held, and a second result
        for a request are left out, counted in one warning (the others are kept)."""
        accepted: list[BatchResult] = []
        seen: set[str] = set()
        refused: dict[str, int] = collections.Counter()
        held = set(live.ids)
        for result in results:
            if result.reason == "unreadable":
                refused["unreadable lines"] += 1
            elif result.custom_id not in held:
                refused["for ids never sent"] += 1
            elif result.custom_id in seen:
                refused["repeated ids"] += 1
            else:
                seen.add(result.custom_id)
                accepted.append(result)
        if refused:
            log.warning(
                "round %d: batch %s: %d results refused (%s); the others are kept",
                self.t,
                live.batch_id,
                sum(refused.values()),
                ", ".join(f"{n:,} {what}" for what, n in refused.items()),
            )
        return accepted

    def _answered(self, job: Job, result: BatchResult) -> None:
        """An answer: bought at the batch rate, kept in the cache, landed."""
        completion = result.completion
        assert completion is not None
        usage = completion.usage.bought_in_batch()
        simulated = completion.simulated or bool(self.ctx.provider.simulated)
        completion = replace(completion, usage=usage, simulated=simulated)
        if self.ctx.cache is not None:
            self.ctx.cache.store(job.request, completion)
        self._land(job, Outcome(completion, None, self.attempts[result.custom_id]))

    async def _again(self, jobs: list[Job], attempt: int) -> None:
        """Requests a batch did not answer: a new batch, the synchronous path, or, past the
        retry policy's attempts, a final error."""
        if not jobs:
            return
        give_up = [j for j in jobs if attempt > self.ctx.retry.max_attempts]
        for job in give_up:
            error = Transient(f"no answer after {attempt - 1} batches")
            self._land(job, Outcome(None, error, attempt - 1))
        jobs = [j for j in jobs if attempt <= self.ctx.retry.max_attempts]
        if not jobs:
            return
        if self.api.fallback_sync:
            await asyncio.gather(*(self._send_sync(job) for job in jobs))
        else:
            await self._submit(jobs, attempt)

    async def _send_sync(self, job: Job) -> None:
        if self._sync is None:  # its retries' jitter drawn apart from the synchronous path's
            self._sync = self.landing.sender(1)
        self._land(job, await self._sync.send_with_retry(job))


def custom_id(job: Job) -> str:
    """A sample's id within its round's batches: round, question row, sample index."""
    return f"t{job.round}-r{job.row}-k{job.k}"


def chunks(api: BatchAPI, jobs: list[Job]) -> Iterable[tuple[list[Job], list[bytes]]]:
    """`jobs` in batches of at most the vendor's requests and bytes, with their input lines."""
    size = 0
    chunk: list[Job] = []
    lines: list[bytes] = []
    for job in jobs:
        line = api.encode(custom_id(job), job.request)
        if chunk and (len(chunk) >= api.max_requests or size + len(line) > api.max_bytes):
            yield chunk, lines
            chunk, lines, size = [], [], 0
        chunk.append(job)
        lines.append(line)
        size += len(line)
    if chunk:
        yield chunk, lines


def affordable(landing: Landing, chunk: list[Job]) -> bool:
    """--max-cost: a batch whose estimated cost would pass the budget is not submitted (the
    run stops, saying why)."""
    budget, state = landing.ctx.budget, landing.state
    limit, price = landing.ctx.config.max_cost_usd, budget.pricing.price
    if limit is None or price is None:
        return True
    estimate = Usage()
    for job in chunk:
        prompt = text_tokens(sum(len(m.content) for m in job.request.messages))
        estimate = estimate + Usage(prompt, max(0, job.est_tokens - prompt))
    spent = price.cost(state.total_usage())
    spent += sum(c for c in budget.role_costs(state).values() if c is not None)
    cost = price.cost(estimate.bought_in_batch())
    if spent + cost <= limit:
        return True
    budget.stop(
        StopReason.budget(
            f"--max-cost ${limit:g} would be passed by the next batch ({len(chunk)} requests, "
            f"about ${cost:.4f} at the batch rate, ${spent:.4f} spent)"
        )
    )
    return False


def journaled_files(api: BatchAPI, journaled: Sequence[BatchEvent]) -> dict[str, str]:
    """The input files a session uploaded but made no batch of (killed between the two), by
    tag: a resumed run creates the batch from the file instead of uploading it again."""
    used = {e.file_id for e in journaled if isinstance(e, BatchCreated)}
    return {
        e.tag: e.file_id
        for e in journaled
        if isinstance(e, BatchFileUploaded) and e.file_id not in used and api.reusable(e.file_id)
    }


def _final(result: BatchResult) -> bool:
    """A request refused as bad inside a batch: sent again it would be refused again."""
    return isinstance(result.error, BadRequest)
