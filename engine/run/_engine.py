"""The run loop: Algorithm 1 over rounds, with a barrier between rounds.

    for each round t:
        rows  = every question K times in warm-up rounds, else allocation.allocate(t)
                (difficulty-aware allocation first has each question's difficulty rated, once)
        plan  = intervention.plan(t, rows) in adaptive rounds  # demonstrations per question
        sampling = intervention.sampling(t)                    # e.g. a temperature schedule
        RoundRun: replay the journal's samples, send the rest (limiter → retries → provider),
                  journal each as it lands, judge it in the verifier pool (and by the reward
                  model, if the judgement has one), account it
        barrier: round totals; questions new to the demonstration pool join the FAISS index

The engine never calls `asyncio.run` and never touches the loop policy: `Engine.run` is an
ordinary coroutine, so it embeds in any async service. What stops a run early is the run
budget's (`_budget`); what a round needs of the run is its `RoundContext`; what a run writes to
its directory is `_rundir`'s; the host watches through a `RunObserver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import ttc.retrieval  # its heavy names (numpy, FAISS) are loaded by a run that embeds
from ttc.engine._util._offloop import in_thread
from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ConfigError, describe_failure
from ttc.engine.contract._policy import Allotment, DemoPlan
from ttc.engine.contract._state import RoundStats, RunState, count_into
from ttc.engine.contract._types import (
    Embedder,
    EmbedderSpec,
    Item,
    Provider,
    Suite,
    Usage,
    require_parts,
)
from ttc.engine.journal._events import (
    Event,
    LimiterSampled,
    LimitsSteered,
    RoundEnded,
    RunStarted,
    replay_steered,
    sample_limiter,
    steer,
)
from ttc.engine.journal._journal import (
    Journal,
    Replay,
    SampleKey,
    difficulty_ratings,
    steered_in,
)
from ttc.engine.journal._logs import to_run_log
from ttc.engine.journal._rundir import RunDir
from ttc.engine.journal._walltime import RunTimer, past_times
from ttc.engine.run._budget import RunBudget, StopReason
from ttc.engine.run._dispatch import RoundContext
from ttc.engine.run._observer import RunObserver
from ttc.engine.run._options import EngineOptions
from ttc.engine.run._result import RunResult
from ttc.engine.run._roles import RoleModels
from ttc.engine.run._round import RoundRun
from ttc.engine.run._runinfo import RunParts, open_rundir
from ttc.engine.run._stream import Sink, SolvedWatch, StreamEvent, discard, stream_of
from ttc.engine.run._verify import VerifierPool, Verifiers
from ttc.engine.send._cache import ProviderCache
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._prices import price_for
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._tokens import TokenEstimator
from ttc.engine.strategy._strategy import preset
from ttc.retrieval import NoRetrieval

if TYPE_CHECKING:
    from ttc.retrieval import Retrieval

log = logging.getLogger("ttc")

# Why a run stops that its host cancelled: its stream (`Engine.stream`) closed before it ended,
# or the task running it cancelled.
CANCELLED = "cancelled by the host (the run's stream closed, or its task cancelled)"


# Events that record no work done: a resumed run that journals only these did nothing new. A
# tuple, made once (every sample's events pass the test).
_BOOKKEEPING = (RunStarted, RoundEnded, LimiterSampled, LimitsSteered)


def _embedder(spec: EmbedderSpec) -> Embedder:
    """`ttc.retrieval.resolve_embedder(spec)`, the package loaded where this runs."""
    return ttc.retrieval.resolve_embedder(spec)


class Engine:
    """Runs a test set through a provider with a strategy; use as `async with Engine(...)`.

    `resume=True` goes on with the run in `out_dir` from its journal; a directory with no
    journal, or an empty one, is refused (ConfigError) instead of buying every sample again.
    `resume=run_begun(out_dir)` goes on with a run if there is one, and starts it if not."""

    def __init__(
        self,
        provider: Provider,
        suite: Suite,
        config: RunConfig | None = None,
        *,
        out_dir: Path | str | None = None,
        embedder: EmbedderSpec = None,
        roles: Mapping[str, Provider] | None = None,
        resume: bool = False,
        options: EngineOptions | None = None,
    ) -> None:
        opts = options or EngineOptions()
        require_parts(provider, suite, roles or {})
        self.provider = provider
        self.suite = suite
        self.config = cfg = config or RunConfig()
        self.strategy = opts.strategy or preset(cfg, suite.name)
        self.rundir = RunDir(Path(out_dir)) if out_dir is not None else None
        self.resume = resume
        self._embedder_spec = embedder
        self.limiter = opts.limiter or Limiter(cfg.rpm, cfg.tpm, cfg.concurrency)
        if cfg.hedge:  # a host's limiter keeps its own setting unless the config asks
            self.limiter.hedge = True
        self.retry = opts.retry or RetryPolicy(max_attempts=cfg.max_attempts)
        self._owns_verifiers = opts.verifiers is None
        self.verifiers: Verifiers = opts.verifiers or VerifierPool(suite, cfg.verifier_workers)
        # The models besides the policy: `judge` (the reward model), `difficulty` (da).
        self.models = RoleModels(roles or {}, provider, price_for(provider.model, opts.price))
        self.roles = self.models.providers
        self.pricing = self.models.pricing
        self.observer = opts.observer or RunObserver()
        if self.observer.traces_attempts:  # why each attempt waited, for the tracer
            self.limiter.timing = True
        self.invocation = opts.invocation
        self.budget = RunBudget(cfg, self.pricing, self.models.usage)
        # True while rounds run (not during set-up or the final writing of results).
        self.running = False
        self.outputs = TokenEstimator()
        # The response cache as each model sees it (keyed by its identity), handed to its Sender.
        self.cache = None if opts.cache is None else ProviderCache(opts.cache, provider)
        judgement, allocation = self.strategy.judgement, self.strategy.allocation
        self.models.wire(
            cfg,
            self.retry,
            self.budget,
            opts.cache,
            scores=judgement.reward_model,
            rates=allocation.needs_difficulty,
        )
        self.parts = RunParts(cfg, self.strategy, provider, suite, self.roles, self.invocation)
        self._journal: Journal | None = None
        # Events of this session that are new work (samples, verdicts, ratings), not replays.
        self._fresh = 0
        self._busy = False  # a run is under way (one at a time)
        # Where a run's events go besides the journal and the observer: its stream.
        self._sink: Sink = discard
        self._watch: SolvedWatch | None = None

    @property
    def stopped(self) -> StopReason | None:
        """Why the run stopped dispatching, if it did."""
        return self.budget.stopped

    def stop(self, reason: StopReason | str = "interrupted") -> None:
        """Stop dispatching: requests in flight finish and are recorded, nothing new is sent.
        A plain string is the host's own reason: an interruption."""
        if isinstance(reason, str):
            reason = StopReason.interrupted(reason)
        self.budget.stop(reason)

    def cost(self, usage: Usage) -> float | None:
        """What `usage` cost, by this run's price (None when the model has no known price)."""
        return self.pricing.cost(usage)

    def role_usage(self, state: RunState) -> dict[str, Usage]:
        """What each role model has consumed so far (journaled calls replayed included)."""
        return self.models.usage(state)

    def role_costs(self, state: RunState) -> dict[str, float | None]:
        """What each role model's calls cost, by its price (None when it has no known price)."""
        return self.models.costs(state)

    def role_cost(self, state: RunState) -> float | None:
        """The role models' cost together: 0 with none, None if one of them has no price."""
        return self.models.cost(state)

    async def __aenter__(self) -> Engine:
        if self._owns_verifiers:
            self.verifiers.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owns_verifiers:
            await self.verifiers.aclose()

    def stream(self, items: Sequence[Item] | None = None) -> AsyncGenerator[StreamEvent, None]:
        """Algorithm 1 over `items` (the suite's items by default), as an async iterator of its
        events as they happen (see `_stream`), ending with `RunEnded`; a run that fails raises
        from it. Close it early (`contextlib.aclosing`) to cancel the run: its summary says it
        was stopped (`CANCELLED`), and its log says so too."""
        return stream_of(lambda sink: self._run(items, sink))

    async def run(self, items: Sequence[Item] | None = None) -> RunResult:
        """Algorithm 1 over `items` (the suite's items by default); returns when all rounds end.
        No stream is made: nothing reads its events (cancelling the caller stops the run as
        closing a stream does)."""
        return await self._run(items, None)

    def _claim(self) -> None:
        """An engine runs one run at a time, and none once it was told to stop."""
        if self._busy:
            raise RuntimeError(
                "this Engine is already running: an Engine runs one run at a time "
                "(make one Engine per concurrent run; they may share a VerifierPool)"
            )
        if self.stopped is not None:
            raise RuntimeError(
                f"this Engine was stopped ({self.stopped}), so it sends nothing more: "
                "make a new Engine (with resume=True to go on with its run directory)"
            )
        self._busy = True

    async def _run(self, items: Sequence[Item] | None, sink: Sink | None) -> RunResult:
        """The run; `sink` takes the stream's events (None: no one reads them, none is made)."""
        self._claim()
        try:
            return await self._run_claimed(items, sink)
        finally:
            self._busy = False

    async def _run_claimed(self, items: Sequence[Item] | None, sink: Sink | None) -> RunResult:
        items = list(self.suite.items() if items is None else items)
        if not items:
            raise ConfigError("the test set is empty")
        # Self-consistency groups answers by the suite's notion of equivalence, if it has one.
        state = await in_thread(RunState, items, self.strategy.judgement, self.suite.answer_key)
        timer = RunTimer()
        # With no stream, no resolution is told: the watch's checks are not made at all.
        self._sink = discard if sink is None else sink
        self._watch = None if sink is None else SolvedWatch(state, sink)
        async with contextlib.AsyncExitStack() as stack:
            done, embedding = await self._open(stack, state, timer)
            try:
                await self._rounds(state, done, embedding, timer)
            except asyncio.CancelledError:
                # Logged in the run's own context (its run.log), and summary.json's `stopped`.
                self.budget.stop(StopReason.interrupted(CANCELLED))
                raise
            except Exception as exc:
                # Written into summary.json as the run's reason to stop, and raised as itself.
                self._failed(exc)
                raise
            ran = [stats.complete for stats in state.rounds]
            if (
                self._watch is not None
                and self.stopped is None
                and ran == [True] * self.config.rounds
            ):
                self._watch.give_up()  # every round ran to its barrier
            failed = self.budget.failed_for_good()
            if failed is not None:
                log.warning("%s", failed)
        return RunResult(
            state.items,
            state.records,
            state.rounds,
            timer.wall,
            None if self.rundir is None else self.rundir.path,
            state,
            self.stopped,
            failed,
        )

    def _failed(self, exc: BaseException) -> None:
        """The run stops for `exc`: its reason (for summary.json), and its traceback in the log
        (once)."""
        if self.stopped is None:
            self.budget.stop(StopReason.failed(describe_failure(exc)))
            to_run_log(logging.ERROR, f"the run failed: {describe_failure(exc)}", exc)

    async def _open(
        self, stack: contextlib.AsyncExitStack, state: RunState, timer: RunTimer
    ) -> tuple[MutableMapping[SampleKey, Replay], asyncio.Task[Retrieval] | None]:
        """Sets a run up; `stack` undoes each part, in reverse, when the run ends however."""
        cfg = self.config
        needs_vectors = self.strategy.needs_embeddings and cfg.rounds > cfg.warmup_rounds
        # What can be refused is refused before anything is written (a refused resume leaves a
        # run as it was), or (the embedder, which run.log names) before the journal or a request.
        self.parts.check_prices(self.pricing)
        done: MutableMapping[SampleKey, Replay] = {}
        if self.rundir is not None:  # checked, locked, opened; on resume, the journal's samples
            description = await in_thread(self.parts.describe, state.items)  # its checksum
            done = await open_rundir(stack, self.rundir, description, resume=self.resume)
        if self.resume and self.rundir is not None:  # its time goes on from its sessions'
            timer.past = await asyncio.to_thread(past_times, self.rundir.journal_path)
            # ... and its limits from where `ttc ctl set` left them.
            steered = await asyncio.to_thread(steered_in, self.rundir.journal_path)
            replayed = replay_steered(self.limiter, steered)
            if replayed is not None:
                log.info("limits as `ttc ctl set` left them: %s", replayed.describe())
        self.parts.warn_prices(self.pricing)
        # In a thread: the first use of `ttc.retrieval` imports numpy and FAISS (40-60 ms), and
        # a factory may load a model; the host's loop goes on meanwhile.
        embedder = await in_thread(_embedder, self._embedder_spec) if needs_vectors else None
        if not self.verifiers.started:  # a pool this run starts, this run closes
            self.verifiers.start()
            stack.push_async_callback(self.verifiers.aclose)
        self.running = True
        stack.push_async_callback(in_thread, self._write_results, state, timer)
        if self.rundir is not None:  # closed, then no longer written to
            # Opened in a thread: reopening a compact journal reads its frames' headers (a second
            # at a million questions), which the host's loop does not wait for. Closed however
            # the open ends (cancelled, it finishes first).
            journal = Journal(self.rundir.journal_path, compact=True)
            stack.push_async_callback(in_thread, journal.close)
            self._journal = await in_thread(journal.open)
            stack.callback(setattr, self, "_journal", None)
        if done and self.rundir is not None:  # da's ratings the journal holds are not asked again
            known = await in_thread(difficulty_ratings, self.rundir.journal_path)
        else:
            known = {}
        self.models.start_estimates(known, self._emit, cfg.concurrency, self.budget.is_stopped)
        self._emit(RunStarted(bool(done), timer.started_at))
        stack.callback(asyncio.create_task(sample_limiter(self.limiter, self._emit)).cancel)
        self.observer.run_started(state, cfg.rounds, self.cost)
        stack.push_async_callback(lambda: self.observer.run_ended(self.stopped))
        embedding = None
        if embedder is not None:  # in a thread, while the warm-up runs: a model loads slowly
            log.info("questions are embedded with the %s embedder", embedder.name)
            cache = None if self.rundir is None else self.rundir.embeddings_path
            embedding = asyncio.create_task(
                ttc.retrieval.neighbourhood(state, embedder, cache, cfg.index)
            )
            stack.callback(embedding.cancel)
        # Undone first: the rounds' totals as they stood, before anything else is closed.
        stack.callback(self._finish_rounds, state, timer)
        return done, embedding

    def steer(self, change: LimitsSteered) -> None:
        """`ttc ctl`: applies `change` to the limiter and journals it (the timeline shows it; a
        resumed run replays it)."""
        steer(self.limiter, change)
        self._emit(change)

    def _emit(self, event: Event) -> None:
        """Journals an event (when the run has a directory) and shows it to the observer."""
        if self._journal is not None:
            self._journal.append(event)
        self._tell(event)

    def _journal_all(self, events: list[Event]) -> None:
        """Journals several events (when the run has a directory), in order, their lines handed
        to the journal's writer together; the observer is told of each apart (`_tell`)."""
        if self._journal is not None:
            self._journal.extend(events)

    def _tell(self, event: Event) -> None:
        """Shows an event to the observer and the run's stream (journaled apart)."""
        self._fresh += not isinstance(event, _BOOKKEEPING)
        self.observer.event(event)
        self._sink(event)

    def _finish_rounds(self, state: RunState, timer: RunTimer) -> None:
        self.running = False
        for stats in state.rounds:
            if not stats.complete:  # stopped mid-round: report the round as it stood
                count_into(state, stats)
                stats.wall_s = stats.wall_s or timer.round_done(stats.round)
        timer.stop()

    def _write_results(self, state: RunState, timer: RunTimer) -> None:
        self.running = False
        timer.stop()
        state.simulated |= self.provider.simulated
        if self.rundir is None:
            return
        if self.resume and not self._fresh and self.rundir.finished():
            # A finished run resumed with nothing new done (if stopped while it replayed too).
            log.info("nothing new to do: the run's reports are left as they were")
            return
        extra = self.parts.summary_extra(
            self.models.summary(state),
            self.pricing,
            self.role_cost(state),
            self.stopped,
            state,
            self.limiter.stragglers.copies,
        )
        self.rundir.write_results(state, extra, timer.wall, self.cost)

    async def _rounds(
        self,
        state: RunState,
        done: MutableMapping[SampleKey, Replay],
        embedding: asyncio.Task[Retrieval] | None,
        timer: RunTimer,
    ) -> None:
        cfg = self.config
        retrieval: Retrieval | None = None
        journaled = {key[0] for key in done} | timer.past.ended
        for t in range(1, cfg.rounds + 1):
            # A budget stops new work, not the replay of the rounds the journal holds (samples, or
            # the end of one with nothing to sample): a finished run stays finished.
            if t not in journaled:
                self.budget.check(state)
            if self.stopped is not None:
                break
            adaptive = t > cfg.warmup_rounds
            stats = RoundStats(round=t, adaptive=adaptive)
            state.rounds.append(stats)  # an interrupted round is reported as incomplete
            self.observer.round_started(stats)
            if adaptive and retrieval is None and embedding is not None:
                self.observer.waiting("the embedder (loading its model, embedding the questions)")
                retrieval = await embedding
                self.observer.waiting(None)
            if adaptive and retrieval is not None:  # the pool as the last barrier left it
                await asyncio.to_thread(retrieval.sync)
            await self._round(state, stats, retrieval, done)
            stats.wall_s = timer.round_done(t)  # what the round waited for included
            stats.complete = stats.samples == stats.planned
            await self._end_round(stats)
            if not stats.complete:
                break

    def _context(self) -> RoundContext:
        return RoundContext(
            self.config,
            self.suite,
            self.strategy.judgement,
            self.provider,
            self.limiter,
            self.retry,
            self.verifiers,
            self.models.scorer,
            self.budget,
            self.outputs,
            self._emit,
            self._journal_all,
            self._tell,
            self.cache,
            self._watch,
            self._failed,
            self.observer.attempt if self.observer.traces_attempts else None,
        )

    async def _round(
        self,
        state: RunState,
        stats: RoundStats,
        retrieval: Retrieval | None,
        done: MutableMapping[SampleKey, Replay],
    ) -> None:
        t, k = stats.round, self.config.k
        strategy = self.strategy
        # Algorithm 1's warm-up samples every question ("for each x in S"); the allocation
        # decides from the first adaptive round on.
        allotment: Allotment = dict.fromkeys(range(state.n), k)
        if stats.adaptive:
            allotment = await self._allot(state, t)
        plan: DemoPlan = {}
        if stats.adaptive and allotment:
            hood = retrieval if retrieval is not None else NoRetrieval()
            rows = list(allotment)
            plan = await asyncio.to_thread(strategy.intervention.plan, t, rows, state, hood)
        sampling = strategy.intervention.sampling(t, self.config.sampling)
        await RoundRun(self._context(), state, stats, done).run(allotment, plan, sampling)

    async def _allot(self, state: RunState, t: int) -> Allotment:
        """An adaptive round's samples per question, by the allocation."""
        allocation, k = self.strategy.allocation, self.config.k
        # Rated once, and only when the allotment will read the ratings (a matched budget the
        # warm-up already spent needs none).
        estimates = self.models.estimates
        if estimates is not None and not state.difficulty and allocation.needs_ratings(t, state, k):
            fresh = self._fresh
            await estimates.rate(state, state.unsolved_rows())
            if self._fresh > fresh:  # ratings bought (not replayed) count towards a budget
                self.budget.check(state)
        return allocation.allocate(t, state, k)

    async def _end_round(self, stats: RoundStats) -> None:
        log.info("%s", stats.describe(self.config.rounds))
        self._emit(RoundEnded.of(stats))
        if self._journal is not None:  # in a thread, never holding the loop
            await in_thread(self._journal.sync)
