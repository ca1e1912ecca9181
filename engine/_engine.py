"""The run loop: Algorithm 1 over rounds, with a barrier between rounds.

    for each round t:
        rows  = allocation.active(t)                      # unif: all; elim/rand/adpt: unsolved
        plan  = intervention.plan(t, rows) if t > R_warm  # demonstrations per question
        jobs  = K samples per row, prompts rendered lazily from the suite's templates
        run_round(jobs)                                   # limiter → retries → provider → verifiers
        barrier: stats, journal, index the newly solved questions

The engine never calls `asyncio.run` and never touches the loop policy: `Engine.run` is an
ordinary coroutine, so it embeds in any async service.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from ttc.engine._config import RunConfig
from ttc.engine._errors import ConfigError, ProviderError
from ttc.engine._journal import Journal, SampleKey, completed_samples
from ttc.engine._limiter import Limiter
from ttc.engine._neighbours import Retrieval
from ttc.engine._retry import RetryPolicy
from ttc.engine._rundir import RunDir
from ttc.engine._scheduler import Job, Outcome, Sender, run_round
from ttc.engine._state import QuestionRecord, RoundStats, RunState
from ttc.engine._strategy import DemoPlan, Strategy, preset
from ttc.engine._types import (
    Demo,
    Embedder,
    FloatArray,
    Item,
    Message,
    Provider,
    Request,
    Suite,
    Usage,
    Verdict,
)
from ttc.engine._verify import VerifierPool

log = logging.getLogger("ttc")

FinishFn = Callable[[Job, "str | None", Usage, bool], None]


def sample_seed(run_seed: int, item_id: str, round_no: int, k: int) -> int:
    """The sampling seed of one planned sample: stable across processes, fits in 31 bits."""
    digest = hashlib.blake2b(f"{run_seed}/{item_id}/{round_no}/{k}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run produced: per-round totals, per-question records, coverage and tokens."""

    items: list[Item]
    records: list[QuestionRecord]
    rounds: list[RoundStats]
    wall_s: float
    out_dir: Path | None

    @property
    def n(self) -> int:
        return len(self.items)

    @property
    def solved(self) -> int:
        return sum(rec.solved for rec in self.records)

    @property
    def coverage(self) -> float:
        return self.solved / self.n if self.n else 0.0

    @property
    def usage(self) -> Usage:
        total = Usage()
        for stats in self.rounds:
            total = total + stats.usage
        return total

    def response(self, item_id: str) -> str | None:
        """ỹ of a question, if it was solved."""
        row = next(i for i, item in enumerate(self.items) if item.id == item_id)
        fp = self.records[row].first_pass
        return None if fp is None else fp[2]


class Engine:
    """Runs a test set through a provider with a strategy; use as `async with Engine(...)`."""

    def __init__(
        self,
        provider: Provider,
        suite: Suite,
        config: RunConfig | None = None,
        *,
        out_dir: Path | str | None = None,
        embedder: Embedder | str = "auto",
        strategy: Strategy | None = None,
        resume: bool = False,
        limiter: Limiter | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.provider = provider
        self.suite = suite
        self.config = config or RunConfig()
        self.strategy = strategy or preset(self.config)
        self.rundir = RunDir(Path(out_dir)) if out_dir is not None else None
        self.resume = resume
        self._embedder_spec = embedder
        self.limiter = limiter or Limiter(self.config.rpm, self.config.tpm, self.config.concurrency)
        self.retry = retry or RetryPolicy(max_attempts=self.config.max_attempts)
        self.verifiers = VerifierPool(suite, self.config.verifier_workers)
        self._mean_output = 512.0
        self._outputs_seen = 0

    async def __aenter__(self) -> Engine:
        self.verifiers.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.verifiers.aclose()

    async def run(self, items: Sequence[Item] | None = None) -> RunResult:
        """Algorithm 1 over `items` (the suite's items by default); returns when all rounds end."""
        items = list(self.suite.items() if items is None else items)
        if not items:
            raise ConfigError("the test set is empty")
        state = RunState(items)
        self.verifiers.start()
        journal: Journal | None = None
        done: dict[SampleKey, dict[str, Any]] = {}
        handler = None
        if self.rundir is not None:
            handler = self.rundir.attach_log()
            if self.resume:
                done = completed_samples(self.rundir.journal_path)
            elif self.rundir.journal_path.exists():
                raise ConfigError(
                    f"--out: {self.rundir.path} already holds a run; "
                    "resume it or pick a new directory"
                )
            self.rundir.write_config(self._describe(items))
            journal = Journal(self.rundir.journal_path).open()
            journal.append({"ev": "start", "resumed": bool(done), "t": time.time()})
        started = time.perf_counter()
        cfg = self.config
        embedding: asyncio.Task[FloatArray] | None = None
        if self.strategy.needs_embeddings and cfg.rounds > cfg.warmup_rounds:
            # Choose the embedder now (a missing model is an error before any request), and
            # embed the questions in a thread while the warm-up rounds run.
            embedding = asyncio.create_task(self._embed(state, self._embedder()))
        try:
            retrieval: Retrieval | None = None
            for t in range(1, cfg.rounds + 1):
                adaptive = t > cfg.warmup_rounds
                if adaptive and retrieval is None and embedding is not None:
                    vectors = await embedding
                    retrieval = await asyncio.to_thread(Retrieval, state, vectors)
                stats = await self._round(t, adaptive, state, retrieval, journal, done)
                state.rounds.append(stats)
                if retrieval is not None:
                    await asyncio.to_thread(retrieval.sync)
                log.info(
                    "round %d/%d: %d active, %d requests, %d solved (%.1f%%), %d output tokens",
                    t,
                    cfg.rounds,
                    stats.active,
                    stats.requests,
                    stats.solved,
                    100 * stats.coverage,
                    stats.usage.output_tokens,
                )
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()
            wall = time.perf_counter() - started
            if journal is not None:
                journal.close()
            if self.rundir is not None:
                self.rundir.write_results(state, self._summary_extra(), wall)
                if handler is not None:
                    self.rundir.detach_log(handler)
        return RunResult(state.items, state.records, state.rounds, wall, self._out_path())

    def _out_path(self) -> Path | None:
        return None if self.rundir is None else self.rundir.path

    def _embedder(self) -> Embedder:
        from ttc.adapters import make_embedder

        spec = self._embedder_spec
        embedder = make_embedder(spec, log=log) if isinstance(spec, str) else spec
        log.info("questions are embedded with the %s embedder", embedder.name)
        return embedder

    async def _embed(self, state: RunState, embedder: Embedder) -> FloatArray:
        from ttc.retrieval import cached_embeddings

        ids = [item.id for item in state.items]
        texts = [item.question for item in state.items]
        if self.rundir is not None:
            path = self.rundir.embeddings_path
            return await asyncio.to_thread(cached_embeddings, path, ids, texts, embedder)
        return await asyncio.to_thread(embedder.embed, texts)

    async def _round(
        self,
        t: int,
        adaptive: bool,
        state: RunState,
        retrieval: Retrieval | None,
        journal: Journal | None,
        done: dict[SampleKey, dict[str, Any]],
    ) -> RoundStats:
        started = time.perf_counter()
        strategy, cfg = self.strategy, self.config
        stats = RoundStats(round=t, adaptive=adaptive)
        rows = strategy.allocation.active(t, state)
        stats.active = len(rows)
        plan: DemoPlan = {}
        if adaptive and rows:
            hood = retrieval if retrieval is not None else _NoRetrieval()
            plan = await asyncio.to_thread(strategy.intervention.plan, t, rows, state, hood)

        def emit(event: dict[str, Any]) -> None:
            if journal is not None:
                journal.append(event)

        last_progress = [time.monotonic()]

        def finish(job: Job, text: str | None, usage: Usage, passed: bool) -> None:
            stats.samples += 1
            stats.usage = stats.usage + usage
            stats.passed += passed
            stats.errors += text is None
            if state.record_sample(job.row, t, job.k, text, usage, passed):
                stats.newly_solved += 1
            now = time.monotonic()
            if now - last_progress[0] >= PROGRESS_EVERY_S:
                last_progress[0] = now
                planned = stats.active * cfg.k
                log.info(
                    "round %d: %d/%d samples, %d newly solved, %d errors, %d retries",
                    t, stats.samples, planned, stats.newly_solved, stats.errors, stats.retries,
                )  # fmt: skip

        def on_retry(job: Job, attempt: int, error: ProviderError, delay: float) -> None:
            stats.retries += 1
            emit(
                {
                    "ev": "retry",
                    "round": t,
                    "item": state.items[job.row].id,
                    "k": job.k,
                    "attempt": attempt,
                    "error": error.kind,
                    "message": str(error)[:500],
                    "delay": round(delay, 3),
                }
            )

        async def on_finished(landed: list[tuple[Job, Outcome]]) -> None:
            answered = [(job, out.completion) for job, out in landed if out.completion is not None]
            pairs = [(state.items[job.row], comp.texts[0]) for job, comp in answered]
            verdicts = iter(await self.verifiers.judge_many(pairs) if pairs else [])
            for job, outcome in landed:
                event: dict[str, Any] = {
                    "ev": "sample",
                    "round": t,
                    "item": state.items[job.row].id,
                    "k": job.k,
                    "attempts": outcome.attempts,
                    "demos": [d.item_id for d in job.request.demos],
                }
                comp = outcome.completion
                if comp is None:
                    assert outcome.error is not None
                    err = outcome.error
                    event.update(ok=False, error=err.kind, message=str(err)[:500])
                    emit(event)
                    finish(job, None, Usage(), False)
                    continue
                self._observe_output(comp.usage)
                verdict = next(verdicts)
                passed = strategy.judgement.passed(verdict)
                u = comp.usage
                event.update(
                    ok=True,
                    text=comp.texts[0],
                    usage=[u.input_tokens, u.output_tokens, u.thinking_tokens],
                    latency=round(comp.latency_s, 4),
                    score=verdict.score,
                    answer=verdict.answer,
                    passed=passed,
                )
                emit(event)
                finish(job, comp.texts[0], u, passed)

        # Samples already in the journal (resume, or a warm-up shared across methods) are
        # replayed in plan order instead of sent: a completed response is never bought twice.
        ids = [state.items[row].id for row in rows]
        replays = sum((t, item_id, k) in done for item_id in ids for k in range(cfg.k))
        stats.requests = len(rows) * cfg.k - replays
        stats.replayed = replays

        def to_send() -> Iterator[Job]:
            for job in self._jobs(t, rows, plan, state):
                event = done.pop((t, ids_by_row[job.row], job.k), None)
                if event is None:
                    yield job
                else:
                    self._replay(job, event, finish)

        ids_by_row = dict(zip(rows, ids, strict=True))
        if stats.requests:
            sender = Sender(
                self.provider,
                self.limiter,
                self.retry,
                cfg.timeout_s,
                on_retry,
                seed=sample_seed(cfg.seed, "retry", t, 0),
            )
            workers = min(cfg.concurrency, stats.requests)
            # A few verify workers per verifier process keep every process busy.
            verifiers = min(workers, max(4, 4 * cfg.verifier_workers))
            await run_round(to_send(), sender, on_finished, workers=workers, verifiers=verifiers)
        else:
            for _ in to_send():
                raise AssertionError("every sample of this round was expected in the journal")
        stats.solved = state.solved_count()
        stats.coverage = stats.solved / state.n
        stats.wall_s = time.perf_counter() - started
        emit(
            {
                "ev": "round",
                "round": t,
                "active": stats.active,
                "requests": stats.requests,
                "solved": stats.solved,
                "coverage": stats.coverage,
                "errors": stats.errors,
                "retries": stats.retries,
                "wall_s": round(stats.wall_s, 3),
            }
        )
        if journal is not None:
            journal.sync()
        return stats

    def _jobs(self, t: int, rows: Sequence[int], plan: DemoPlan, state: RunState) -> Iterator[Job]:
        cfg = self.config
        for row in rows:
            item = state.items[row]
            demos = tuple(
                Demo(state.items[r].id, state.items[r].question, resp, sim)
                for r, sim in plan.get(row, ())
                if (resp := state.response(r)) is not None
            )
            # With no solved neighbour yet, an adaptive prompt has nothing to show: zero-shot.
            prompt = (
                self.suite.adaptive_prompt(item, demos) if demos else self.suite.warmup_prompt(item)
            )
            est = math.ceil(len(prompt) / 4) + int(self._mean_output)
            messages = (Message("user", prompt),)
            for k in range(cfg.k):
                sampling = replace(cfg.sampling, seed=sample_seed(cfg.seed, item.id, t, k))
                request = Request(messages, sampling, 1, item.id, demos)
                yield Job(row, t, k, request, est)

    def _replay(self, job: Job, event: dict[str, Any], finish: FinishFn) -> None:
        if not event.get("ok"):
            finish(job, None, Usage(), False)
            return
        usage = Usage(*event["usage"])
        verdict = Verdict(float(event["score"]), event.get("answer"))
        finish(job, str(event["text"]), usage, self.strategy.judgement.passed(verdict))

    def _observe_output(self, usage: Usage) -> None:
        # A running mean of output length, for the token estimate the TPM bucket is charged.
        self._outputs_seen += 1
        produced = usage.output_tokens + usage.thinking_tokens
        self._mean_output += (produced - self._mean_output) / self._outputs_seen

    def _describe(self, items: Sequence[Item]) -> dict[str, Any]:
        from ttc import __version__

        digest = hashlib.sha256()
        for item in items:
            digest.update(f"{item.id}\0{item.question}\0{item.reference}\n".encode())
        return {
            "config": self.config.to_dict(),
            "strategy": {
                "allocation": self.strategy.allocation.name,
                "intervention": self.strategy.intervention.name,
                "judgement": self.strategy.judgement.name,
            },
            "provider": self.provider.name,
            "model": self.provider.model,
            "suite": self.suite.name,
            "items": len(items),
            "items_sha256": digest.hexdigest(),
            "ttc_version": __version__,
        }

    def _summary_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "provider": self.provider.name,
            "model": self.provider.model,
            "suite": self.suite.name,
            "method": self.config.method,
        }
        if getattr(self.provider, "simulated", False):
            extra["simulated"] = True
            extra["note"] = SIM_NOTE
        return extra


# Within a long round, a progress line this often (the round's own line comes at its end).
PROGRESS_EVERY_S = 10.0

SIM_NOTE = (
    "simulated: these numbers come from the offline sim provider; they measure the engine's "
    "machinery, not the method"
)


class _NoRetrieval:
    """For interventions that need no embeddings (random demonstrations)."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("similar neighbours need embeddings")

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("fixed neighbours need embeddings")
