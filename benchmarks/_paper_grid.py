"""The grid of `benchmarks/paper.py`: methods × suites × seeds through the Engine library API,
one run after another in one event loop.

Each run is an ordinary run directory `DIR/<suite>/seed<k>/<method>/`. Before a method runs, the
warm-up source's warm-up samples and verdicts are copied into its journal (`share_warmup`, as
`ttc compare` does) when `_paper_plan.same_warmup` says they are the same experiment; the engine
then replays them (resume) instead of sending them. A run whose summary says it is complete is
not run again; an incomplete one is resumed (the engine replays its journal, sends the rest),
and one whose journal is gone is refused rather than bought again.
All runs of a suite share one verifier pool and all runs one embedder (vectors memoised by text).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _paper_plan import (
    MATCHED,
    GridOptions,
    LoadedSuite,
    cell_dir,
    check_same,
    load_suite,
    plan_methods,
    read_summary,
    run_complete,
    same_warmup,
    skip_reason,
    warmup_source,
)

from ttc.adapters import make_embedder
from ttc.engine import ConfigError, Embedder, Engine, Item, Provider, RunConfig, StopReason, Suite
from ttc.engine.cli import Progress, make_engine, provider_from, share_warmup, wire
from ttc.engine.contract import FloatArray
from ttc.engine.journal import matched_output_tokens
from ttc.engine.run import VerifierPool, run_begun

# Builds the policy model of one (suite, seed).
ProviderFactory = Callable[[Suite, Sequence[Item], int], Provider]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One cell of the grid: where its run directory is and what this invocation did with it."""

    suite: str
    seed: int
    method: str
    path: Path
    # "ran" (run or resumed now), "complete" (done before: not run again), "skipped" (not run).
    status: str
    why: str = ""
    warmup_from: str | None = None
    requests: int = 0
    sent: int = 0
    wall_s: float = 0.0
    stopped: StopReason | None = None


@dataclass
class Grid:
    """Runs the grid; `current` is the engine running now (for Ctrl-C)."""

    opts: GridOptions
    make_provider: ProviderFactory | None = None
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    current: Engine | None = None
    stopping: StopReason | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    _embedder: Embedder | None = None

    def stop(self, reason: StopReason | str) -> None:
        """No new run starts; the running one stops dispatching and stays resumable."""
        if isinstance(reason, str):
            reason = StopReason.interrupted(reason)
        self.stopping = self.stopping or reason
        if self.current is not None:
            self.current.stop(reason)

    async def run(self) -> list[Outcome]:
        opts = self.opts
        loaded = [load_suite(opts, name) for name in opts.suites]  # every data file, up front
        self._check_roles()
        opts.out.mkdir(parents=True, exist_ok=True)
        for ls in loaded:
            if ls.note:
                self.log(f"note: {ls.note}")
        total = sum(len(plan_methods(opts, ls.name)) for ls in loaded) * len(opts.seeds)
        for ls in loaded:
            pool: VerifierPool | None = None
            try:
                for seed in opts.seeds:
                    for method in plan_methods(opts, ls.name):
                        if self.stopping is not None:
                            return self.outcomes
                        if pool is None and self._must_run(ls, method, seed):
                            # One pool per suite, started only if something must run: a
                            # re-run of a finished grid starts no process.
                            pool = VerifierPool(ls.suite, opts.workers)
                            pool.start()
                        outcome = await self._cell(ls, method, seed, pool)
                        self.outcomes.append(outcome)
                        self.log(f"[{len(self.outcomes)}/{total}] {describe(outcome, self.opts)}")
                        if outcome.stopped is not None:
                            self.stopping = outcome.stopped
                            return self.outcomes
            finally:
                if pool is not None:
                    await pool.aclose()
        return self.outcomes

    def _check_roles(self) -> None:
        """Role model names are well formed, and a real policy model is judged or rated by a
        real role model, never by a stand-in."""
        opts = self.opts
        names = {"judge": opts.judge_model, "difficulty": opts.difficulty_model}
        for role, name in names.items():
            kind, _, model = name.partition(":")
            if name != "sim" and (kind not in ("openai", "gemini") or not model):
                raise ConfigError(
                    f"--{role}-model: expected sim, openai:MODEL or gemini:MODEL, got {name!r}"
                )
        if opts.simulated:
            return
        for method in opts.methods:
            for role in opts.config(method, 0, 1).roles:
                if names[role] == "sim":
                    raise ConfigError(
                        f"--{role}-model: {method} needs a {role} model; with --provider "
                        f"{opts.provider} name a real one (openai:MODEL or gemini:MODEL; the "
                        "paper: Gemini-3-flash), not the sim stand-in"
                    )

    def _must_run(self, ls: LoadedSuite, method: str, seed: int) -> bool:
        if skip_reason(self.opts, ls.name, method) is not None:
            return False
        return not run_complete(cell_dir(self.opts.out, ls.name, seed, method))

    async def _cell(
        self, ls: LoadedSuite, method: str, seed: int, pool: VerifierPool | None
    ) -> Outcome:
        opts = self.opts
        out = cell_dir(opts.out, ls.name, seed, method)
        skip = skip_reason(opts, ls.name, method)
        if skip is not None:
            return Outcome(ls.name, seed, method, out, "skipped", skip)
        match_tokens = None
        if method in MATCHED and opts.match_to != "none":
            ref = cell_dir(opts.out, ls.name, seed, opts.match_to)
            match_tokens = matched_output_tokens(ref, ls.suite.name, ls.items, seed)
        config = opts.config(method, seed, match_tokens)
        source = warmup_source(opts, ls.name)
        shares = source is not None and method != source and same_warmup(opts, ls.name, method)
        if run_complete(out):
            check_same(out, config, ls, self._model(ls, seed))
            done_from = source if shares else None
            return Outcome(ls.name, seed, method, out, "complete", warmup_from=done_from)
        if shares and not run_begun(out):
            assert source is not None
            share_warmup(
                cell_dir(opts.out, ls.name, seed, source) / "journal.jsonl",
                out / "journal.jsonl",
                opts.warmup,
            )
        assert pool is not None
        return await self._execute(ls, method, seed, config, pool, out, source if shares else None)

    async def _execute(
        self,
        ls: LoadedSuite,
        method: str,
        seed: int,
        config: RunConfig,
        pool: VerifierPool,
        out: Path,
        warmup_from: str | None,
    ) -> Outcome:
        opts = self.opts
        spec = opts.spec(method, seed, ls.spec)
        custom = (
            None if self.make_provider is None else self.make_provider(ls.suite, ls.items, seed)
        )
        started = time.perf_counter()
        try:
            async with wire(
                spec, config, ls.suite, ls.items, provider=custom, embedder=self.embedder()
            ) as wired:
                engine = make_engine(
                    config,
                    wired,
                    out=out,
                    # A cell begun before goes on (refused if its journal is gone).
                    resume=run_begun(out),
                    progress=Progress(live=False),
                    invocation={"tool": "benchmarks/paper.py", "argv_of_tool": list(opts.argv)},
                    # The suite's pool, started once for all its runs.
                    verifiers=pool,
                )
                if self.stopping is not None:  # stopped while it was wired: not begun
                    why = "stopped before it began"
                    return Outcome(
                        ls.name, seed, method, out, "skipped", why, stopped=self.stopping
                    )
                self.current = engine
                result = await engine.run(ls.items)
        finally:
            self.current = None
        requests = sum(s.requests for s in result.rounds)
        sent = engine.cache.misses if engine.cache is not None else requests
        return Outcome(
            ls.name,
            seed,
            method,
            out,
            "ran",
            warmup_from=warmup_from,
            requests=requests,
            sent=sent,
            wall_s=time.perf_counter() - started,
            stopped=engine.stopped,
        )

    def _model(self, ls: LoadedSuite, seed: int) -> str | None:
        """The model name a run of this grid records (the sim's carries its knobs' digest)."""
        if self.make_provider is not None:
            return None
        if self.opts.simulated:
            return provider_from(self.opts.policy, seed, ls.suite, ls.items).model
        return self.opts.model

    def embedder(self) -> Embedder:
        """One embedder for every run: MiniLM loads once, and a question is embedded once."""
        if self._embedder is None:
            self._embedder = MemoEmbedder(make_embedder(self.opts.embedder))
        return self._embedder


class MemoEmbedder:
    """An embedder that remembers every vector it made, by text (the grid embeds each suite's
    questions once, not once per run and seed)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._memo: dict[str, FloatArray] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size

    def embed(self, texts: Sequence[str]) -> FloatArray:
        new = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if new:
            for text, vector in zip(new, self.inner.embed(new), strict=True):
                self._memo[text] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])


def describe(o: Outcome, opts: GridOptions) -> str:
    """One progress line for a finished cell."""
    head = f"{o.suite} seed{o.seed} {o.method}"
    if o.status == "skipped":
        return f"{head}: skipped ({o.why})"
    summary = read_summary(o.path)
    text = (
        f"{head}: coverage {100 * float(summary['coverage']):.1f}%, "
        f"{int(summary['output_tokens']):,} output tokens"
    )
    if o.status == "complete":
        return text + "; finished before, not run again"
    text += f"; {o.wall_s:.1f} s, {o.requests} requests ({o.sent} sent)"
    if o.warmup_from:
        text += f"; warm-up replayed from {o.warmup_from}"
    if o.stopped:
        text += f"; stopped: {o.stopped}"
    return text
