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
ordinary coroutine, so it embeds in any async service.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from ttc.engine._config import FLAGS, OPERATIONAL, RunConfig
from ttc.engine._errors import ConfigError, Fatal, ProviderError
from ttc.engine._journal import Journal, SampleKey, completed_samples, difficulty_ratings
from ttc.engine._lexical import LexicalEmbedder
from ttc.engine._limiter import Limiter
from ttc.engine._neighbours import Retrieval
from ttc.engine._prices import Price, price_for
from ttc.engine._progress import Progress
from ttc.engine._retry import RetryPolicy
from ttc.engine._round import RoundRun, count_into
from ttc.engine._rundir import RunDir, items_sha256
from ttc.engine._state import QuestionRecord, RoundStats, RunState
from ttc.engine._types import Embedder, FloatArray, Item, Provider, Sampling, Suite, Usage
from ttc.engine._verify import VerifierPool
from ttc.engine.strategy._difficulty import Estimates
from ttc.engine.strategy._judges import RoleCaller
from ttc.engine.strategy._strategy import Allotment, DemoPlan, Strategy, preset

log = logging.getLogger("ttc")


@dataclass(frozen=True, slots=True, repr=False)
class RunResult:
    """What a run produced: per-round totals, per-question records, coverage and tokens."""

    def __repr__(self) -> str:
        # Compact on purpose: asyncio.run (3.11) builds the repr of a coroutine's result, and a
        # field-by-field repr of 100,000 records costs hundreds of megabytes.
        return f"RunResult(n={self.n}, solved={self.solved}, rounds={len(self.rounds)})"

    items: list[Item]
    records: list[QuestionRecord]
    rounds: list[RoundStats]
    wall_s: float
    out_dir: Path | None
    state: RunState | None = None

    @property
    def n(self) -> int:
        return len(self.items)

    @property
    def _state(self) -> RunState:
        if self.state is not None:
            return self.state
        state = RunState(self.items)
        state.records = self.records
        return state

    @property
    def solved(self) -> int:
        """Questions the judgement resolved (for ground truth: solved)."""
        return self._state.solved_count()

    @property
    def covered(self) -> int:
        """Questions with a ground-truth-correct response."""
        return self._state.covered_count()

    @property
    def coverage(self) -> float:
        return self.covered / self.n if self.n else 0.0

    @property
    def accurate(self) -> int:
        """Questions whose selected final answer is correct by ground truth."""
        return self._state.accurate_count()

    @property
    def accuracy(self) -> float:
        return self.accurate / self.n if self.n else 0.0

    @property
    def usage(self) -> Usage:
        total = Usage()
        for stats in self.rounds:
            total = total + stats.usage
        return total

    def response(self, item_id: str) -> str | None:
        """ỹ of a question, if it has one (for ground truth: its first passing response)."""
        row = next(i for i, item in enumerate(self.items) if item.id == item_id)
        return self._state.response(row)


class Engine:
    """Runs a test set through a provider with a strategy; use as `async with Engine(...)`."""

    def __init__(
        self,
        provider: Provider,
        suite: Suite,
        config: RunConfig | None = None,
        *,
        out_dir: Path | str | None = None,
        embedder: Embedder | Callable[[], Embedder] | None = None,
        strategy: Strategy | None = None,
        resume: bool = False,
        limiter: Limiter | None = None,
        retry: RetryPolicy | None = None,
        price: Price | None = None,
        progress: Progress | None = None,
        invocation: dict[str, Any] | None = None,
        roles: Mapping[str, Provider] | None = None,
    ) -> None:
        self.provider = provider
        self.suite = suite
        self.config = config or RunConfig()
        self.strategy = strategy or preset(self.config, suite.name)
        # The models besides the policy: `judge` (the reward model), `difficulty` (da).
        self.roles = dict(roles or {})
        self.rundir = RunDir(Path(out_dir)) if out_dir is not None else None
        self.resume = resume
        self._embedder_spec = embedder
        self.limiter = limiter or Limiter(self.config.rpm, self.config.tpm, self.config.concurrency)
        self.retry = retry or RetryPolicy(max_attempts=self.config.max_attempts)
        self.verifiers = VerifierPool(suite, self.config.verifier_workers)
        self.price = price_for(provider.model, price)
        # A role model is priced as the policy when it is the same model (--price included),
        # else by the table; None: unknown.
        self.role_prices = {
            role: self.price if p.model == provider.model else price_for(p.model)
            for role, p in self.roles.items()
        }
        self.progress = progress or Progress()
        self.invocation = invocation
        self.stopped: str | None = None
        # True while rounds run (not during set-up or the final writing of results).
        self.running = False
        self._failure_streak = 0
        self._role_streaks: dict[str, int] = {}
        self._mean_output = 512.0
        self._outputs_seen = 0
        self.scorer = self._caller("judge") if self.strategy.judgement.reward_model else None
        rates = self.strategy.allocation.needs_difficulty
        self._rater = self._caller("difficulty") if rates else None
        self.estimates: Estimates | None = None

    def _caller(self, role: str) -> RoleCaller:
        provider = self.roles.get(role)
        if provider is None:
            flag = {"judge": "--judge-model", "difficulty": "--difficulty-model"}[role]
            raise ConfigError(f"{flag}: this method needs a {role} model; none was given")
        cfg = self.config
        return RoleCaller(
            provider,
            cfg.concurrency,
            self.retry,
            cfg.timeout_s,
            cfg.seed,
            Sampling(temperature=cfg.judge_temperature),
            on_failure=lambda error: self.role_failed(role, error),
            on_success=lambda: self.role_answered(role),
        )

    def stop(self, reason: str) -> None:
        """Stop dispatching: requests in flight finish and are recorded, nothing new is sent."""
        if self.stopped is None:
            self.stopped = reason
            log.warning("stopping: %s; requests in flight are finishing", reason)

    def sample_failed(self, error: ProviderError) -> None:
        """A sample ended in an error. An account-wide refusal (a bad key, an exhausted quota),
        or a long streak of failures with no answer between them (a wrong --base-url or model),
        stops dispatching: the rest of the test set would only collect the same refusal."""
        self._failure_streak += 1
        if isinstance(error, Fatal) and error.stops_run:
            self.stop(f"{PROVIDER_STOP}: {str(error)[:300]}")
        elif self._failure_streak >= FAILURE_STREAK:
            self.stop(
                f"{PROVIDER_STOP}: {self._failure_streak} samples in a row failed "
                f"(last: {str(error)[:300]})"
            )

    def sample_answered(self) -> None:
        """A sample got a response: the failure streak is over."""
        self._failure_streak = 0

    def role_failed(self, role: str, error: ProviderError) -> None:
        """A role model's call failed after its retries. As for samples, an account-wide refusal
        or a long streak of failures stops the run: a judge (or rater) that cannot answer would
        otherwise turn the method into another one (every response scored 0, every rating
        neutral) without a word."""
        streak = self._role_streaks[role] = self._role_streaks.get(role, 0) + 1
        if isinstance(error, Fatal) and error.stops_run:
            self.stop(f"{PROVIDER_STOP}: the {role} model: {str(error)[:300]}")
        elif streak >= FAILURE_STREAK:
            self.stop(
                f"{PROVIDER_STOP}: {streak} {role} model calls in a row failed "
                f"(last: {str(error)[:300]})"
            )

    def role_answered(self, role: str) -> None:
        """A role model's call was answered: its failure streak is over."""
        self._role_streaks[role] = 0

    def cost(self, usage: Usage) -> float | None:
        """What `usage` cost, by this run's price (None when the model has no known price)."""
        return None if self.price is None else self.price.cost(usage)

    def role_usage(self, state: RunState) -> dict[str, Usage]:
        """What each role model has consumed so far (journaled calls replayed included)."""
        usage: dict[str, Usage] = {}
        if self.scorer is not None:
            usage["judge"] = state.judge_usage()
        if self.estimates is not None:
            usage["difficulty"] = self.estimates.usage
        return usage

    def role_costs(self, state: RunState) -> dict[str, float | None]:
        """What each role model's calls cost, by its price (None when it has no known price)."""
        costs: dict[str, float | None] = {}
        for role, usage in self.role_usage(state).items():
            price = self.role_prices.get(role)
            costs[role] = None if price is None else price.cost(usage)
        return costs

    def check_budget(self, state: RunState) -> None:
        """Stops the run once it reaches --max-cost (the policy's calls and the role models'
        together) or --max-output-tokens (the policy's output tokens only)."""
        cfg = self.config
        if cfg.max_cost_usd is None and cfg.max_output_tokens is None:
            return
        usage = state.total_usage()
        if cfg.max_output_tokens is not None and usage.output_tokens >= cfg.max_output_tokens:
            self.stop(f"--max-output-tokens {cfg.max_output_tokens:,} reached")
        cost = self.cost(usage)
        if cfg.max_cost_usd is not None and cost is not None:
            cost += sum(c for c in self.role_costs(state).values() if c is not None)
            if cost >= cfg.max_cost_usd:
                self.stop(f"--max-cost ${cfg.max_cost_usd:g} reached")

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
        # Self-consistency groups answers by the suite's notion of equivalence, if it has one.
        state = RunState(items, self.strategy.judgement, getattr(self.suite, "answer_key", None))
        cfg = self.config
        needs_vectors = self.strategy.needs_embeddings and cfg.rounds > cfg.warmup_rounds
        if self.rundir is not None and self.rundir.path.exists() and not self.rundir.path.is_dir():
            raise ConfigError(f"--out: {self.rundir.path} exists and is not a directory")
        handler = self.rundir.attach_log() if self.rundir is not None else None
        journal: Journal | None = None
        embedding: asyncio.Task[FloatArray] | None = None
        owns_pool = began = False
        started = time.perf_counter()
        try:
            # Everything that can be refused is refused before the journal or a request.
            embedder = self._embedder() if needs_vectors else None
            done = self._prepare_rundir(items)
            owns_pool = not self.verifiers.started
            self.verifiers.start()
            began = True
            self.running = True
            if self._rater is not None:
                known = {}
                if done and self.rundir is not None:
                    known = difficulty_ratings(self.rundir.journal_path)
                emit = journal_emit(lambda: journal)
                self.estimates = Estimates(
                    self._rater, emit, known, cfg.concurrency, lambda: self.stopped is not None
                )
            if self.rundir is not None:
                journal = Journal(self.rundir.journal_path).open()
                journal.append({"ev": "start", "resumed": bool(done), "t": time.time()})
            if self.price is None and self.config.max_cost_usd is not None:
                raise ConfigError(
                    f"--max-cost: no price is known for model {self.provider.model!r}; give --price"
                )
            if self.config.max_cost_usd is not None:
                for role, price in sorted(self.role_prices.items()):
                    if price is None:
                        log.warning(
                            "--max-cost: no price is known for the %s model %r; its calls do "
                            "not count towards the budget",
                            role,
                            self.roles[role].model,
                        )
            self.progress.start(state, cfg.rounds, self.cost)
            if embedder is not None:
                log.info("questions are embedded with the %s embedder", embedder.name)
                # In a thread, while the warm-up rounds run: loading a model takes seconds.
                embedding = asyncio.create_task(self._embed(state, embedder))
            retrieval: Retrieval | None = None
            for t in range(1, cfg.rounds + 1):
                self.check_budget(state)
                if self.stopped is not None:
                    break
                adaptive = t > cfg.warmup_rounds
                if adaptive and retrieval is None and embedding is not None:
                    retrieval = await asyncio.to_thread(Retrieval, state, await embedding)
                stats = RoundStats(round=t, adaptive=adaptive)
                state.rounds.append(stats)  # an interrupted round is reported as incomplete
                round_started = time.perf_counter()
                self.progress.round_started()
                await self._round(state, stats, retrieval, journal, done)
                stats.wall_s = time.perf_counter() - round_started
                stats.complete = stats.samples == stats.planned
                self._end_round(stats, journal)
                if not stats.complete:
                    break
                if retrieval is not None:
                    await asyncio.to_thread(retrieval.sync)
        finally:
            self.running = False
            for stats in state.rounds:
                if not stats.complete:  # stopped mid-round: report the round as it stood
                    count_into(state, stats)
            await self.progress.stop()
            if embedding is not None and not embedding.done():
                embedding.cancel()
            wall = time.perf_counter() - started
            if journal is not None:
                journal.close()
            if began and self.rundir is not None:
                self.rundir.write_results(state, self._summary_extra(state), wall, self.cost)
            if handler is not None and self.rundir is not None:
                self.rundir.detach_log(handler)
            if owns_pool:
                await self.verifiers.aclose()
        return RunResult(state.items, state.records, state.rounds, wall, self._out_path(), state)

    async def _round(
        self,
        state: RunState,
        stats: RoundStats,
        retrieval: Retrieval | None,
        journal: Journal | None,
        done: dict[SampleKey, dict[str, Any]],
    ) -> None:
        t, k = stats.round, self.config.k
        strategy = self.strategy
        # Algorithm 1's warm-up samples every question ("for each x in S"); the allocation
        # decides from the first adaptive round on.
        allotment: Allotment = dict.fromkeys(range(state.n), k)
        if stats.adaptive:
            allocation = strategy.allocation
            # Rated once, and only when the allotment will read the ratings (a matched budget
            # the warm-up already spent needs none).
            if (
                self.estimates is not None
                and not state.difficulty
                and allocation.needs_ratings(t, state, k)
            ):
                await self.estimates.rate(state, state.unsolved_rows())
                self.check_budget(state)
            allotment = allocation.allocate(t, state, k)
        plan: DemoPlan = {}
        if stats.adaptive and allotment:
            hood = retrieval if retrieval is not None else _NoRetrieval()
            rows = list(allotment)
            plan = await asyncio.to_thread(strategy.intervention.plan, t, rows, state, hood)
        sampling = strategy.intervention.sampling(t, self.config.sampling)
        await RoundRun(self, state, stats, journal, done).run(allotment, plan, sampling)

    def _end_round(self, stats: RoundStats, journal: Journal | None) -> None:
        log.info(
            "round %d/%d: %d active, %d requests, %d solved (%.1f%%), %d output tokens",
            stats.round,
            self.config.rounds,
            stats.active,
            stats.requests,
            stats.solved,
            100 * stats.coverage,
            stats.usage.output_tokens,
        )
        if journal is not None:
            journal.append(
                {
                    "ev": "round",
                    "round": stats.round,
                    "active": stats.active,
                    "requests": stats.requests,
                    "solved": stats.solved,
                    "coverage": stats.coverage,
                    "errors": stats.errors,
                    "retries": stats.retries,
                    "wall_s": round(stats.wall_s, 3),
                }
            )
            journal.sync()

    def _prepare_rundir(self, items: Sequence[Item]) -> dict[SampleKey, dict[str, Any]]:
        """Checks the run directory, writes config.json; returns the journal's samples on resume."""
        if self.rundir is None:
            return {}
        rundir = self.rundir
        description = self._describe(items)
        if not self.resume:
            if rundir.journal_path.exists():
                raise ConfigError(
                    f"--out: {rundir.path} already holds a run; "
                    "resume it (--resume) or pick a new directory"
                )
            rundir.write_config(description)
            return {}
        if rundir.config_path.exists():
            self._check_same_run(orjson.loads(rundir.config_path.read_bytes()), description)
        else:
            rundir.write_config(description)
        return completed_samples(rundir.journal_path)

    def _check_same_run(self, before: dict[str, Any], now: dict[str, Any]) -> None:
        """A resumed run must be the same experiment; limits and timeouts may change."""
        operational = OPERATIONAL
        # A key the old config lacks was written before the setting existed: its default.
        defaults = RunConfig().to_dict()
        old_cfg, new_cfg = before.get("config", {}), now["config"]
        for key in sorted(set(old_cfg) | set(new_cfg)):
            old = old_cfg.get(key, defaults.get(key))
            if key not in operational and old != new_cfg.get(key):
                raise ConfigError(
                    f"{FLAGS.get(key, key)}: the run in {self._out_path()} used "
                    f"{old!r}, not {new_cfg.get(key)!r}; a resumed run must match"
                )
        for key in ("suite", "items", "items_sha256", "provider", "model", "strategy", "roles"):
            if before.get(key) != now.get(key):
                raise ConfigError(
                    f"--resume: the run in {self._out_path()} had a different {key} "
                    f"({before.get(key)!r}, now {now.get(key)!r})"
                )
        # Runs made before endpoints were recorded have none: nothing to compare.
        if "endpoint" in before and before["endpoint"] != now["endpoint"]:
            raise ConfigError(
                f"--base-url: the run in {self._out_path()} was sent to "
                f"{before['endpoint']!r}, not {now['endpoint']!r}; a resumed run must match"
            )

    def _out_path(self) -> Path | None:
        return None if self.rundir is None else self.rundir.path

    def _embedder(self) -> Embedder:
        """The run's embedder: the one given, or built by the factory given (only when the method
        needs vectors, and after the run's log is attached), or the lexical default."""
        spec = self._embedder_spec
        if isinstance(spec, str):
            raise ConfigError(
                f"embedder={spec!r}: the engine takes an Embedder; build one by name with "
                f"ttc.adapters.make_embedder({spec!r})"
            )
        if spec is None:
            # No model and no network: the library's default. `ttc run --embedder auto` (and
            # ttc.adapters.make_embedder("auto")) prefer the MiniLM model.
            log.info("no embedder given: using the lexical embedder")
            return LexicalEmbedder()
        return spec if isinstance(spec, Embedder) else spec()

    async def _embed(self, state: RunState, embedder: Embedder) -> FloatArray:
        from ttc.retrieval import cached_embeddings

        ids = [item.id for item in state.items]
        texts = [item.question for item in state.items]
        if self.rundir is not None:
            path = self.rundir.embeddings_path
            return await asyncio.to_thread(cached_embeddings, path, ids, texts, embedder)
        return await asyncio.to_thread(embedder.embed, texts)

    def expected_output_tokens(self) -> int:
        """The running mean of output (and thinking) tokens, for the TPM estimate of a request."""
        return int(self._mean_output)

    def observe_output(self, usage: Usage) -> None:
        """Feeds one completion's usage into the running mean."""
        self._outputs_seen += 1
        produced = usage.output_tokens + usage.thinking_tokens
        self._mean_output += (produced - self._mean_output) / self._outputs_seen

    def _describe(self, items: Sequence[Item]) -> dict[str, Any]:
        from ttc import __version__

        return {
            "config": self.config.to_dict(),
            "strategy": self.strategy.describe(),
            "roles": self._describe_roles() or None,
            "provider": self.provider.name,
            "model": self.provider.model,
            # Where the provider sends (None for in-process ones): a rehearsal server and the
            # vendor answer the same model name differently.
            "endpoint": getattr(self.provider, "endpoint", None),
            "suite": self.suite.name,
            "items": len(items),
            "items_sha256": items_sha256(items),
            "invocation": self.invocation,
            "ttc_version": __version__,
        }

    def _describe_roles(self) -> dict[str, dict[str, str]]:
        return {
            role: {"provider": p.name, "model": p.model} for role, p in sorted(self.roles.items())
        }

    def _role_stats(self, state: RunState) -> dict[str, Any]:
        """What each role model did: calls, tokens and cost (apart from the run's), failures."""
        roles: dict[str, Any] = {}
        described = self._describe_roles()
        costs = self.role_costs(state)
        if self.scorer is not None:
            u = state.judge_usage()
            roles["judge"] = {
                **described.get("judge", {}),
                "calls": sum(s.judge_calls for s in state.rounds),
                "unparsed": sum(s.judge_unparsed for s in state.rounds),
                "errors": sum(s.judge_errors for s in state.rounds),
                "retries": self.scorer.retries,
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "thinking_tokens": u.thinking_tokens,
            }
        if self.estimates is not None:
            roles["difficulty"] = {**described.get("difficulty", {}), **self.estimates.stats()}
        for role, entry in roles.items():
            price = self.role_prices.get(role)
            entry["cost_usd"] = costs.get(role)
            entry["price_per_million"] = None if price is None else dataclasses.asdict(price)
        return roles

    def role_cost(self, state: RunState) -> float | None:
        """The role models' cost together: 0 with none, None if one of them has no price."""
        costs = self.role_costs(state).values()
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def _summary_extra(self, state: RunState) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "provider": self.provider.name,
            "model": self.provider.model,
            "suite": self.suite.name,
            "method": self.config.method,
            "judgement": self.strategy.judgement.name,
            "roles": self._role_stats(state),
            # The run's `cost_usd` is the policy model's; the role models' is apart, and the
            # total is both (None when a part has no known price).
            "role_cost_usd": self.role_cost(state),
            "rounds_planned": self.config.rounds,
            "stopped": self.stopped,
            "price_per_million": None if self.price is None else dataclasses.asdict(self.price),
        }
        if getattr(self.provider, "simulated", False):
            extra["simulated"] = True
            extra["note"] = SIM_NOTE
        return extra


# A stop for the provider's reasons starts with this; `ttc run` then exits with code 4.
PROVIDER_STOP = "the provider refuses"
# Samples failing in a row, none answered between them, that stop a run.
FAILURE_STREAK = 32

SIM_NOTE = (
    "simulated: these numbers come from the offline sim provider; they measure the engine's "
    "machinery, not the method"
)


def journal_emit(current: Callable[[], Journal | None]) -> Callable[[dict[str, Any]], None]:
    """Appends an event to the run's journal, if it has one (opened later than the caller)."""

    def emit(event: dict[str, Any]) -> None:
        journal = current()
        if journal is not None:
            journal.append(event)

    return emit


class _NoRetrieval:
    """For interventions that need no embeddings (random demonstrations)."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("similar neighbours need embeddings")

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("fixed neighbours need embeddings")
