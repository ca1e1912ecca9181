"""`ttc ablate RUN_DIR`: the paired ablation of a run's demonstrations on its own model.

The questions the run's warm-up left unsolved are sampled in two arms, each an ordinary run in
RUN_DIR/ablation/ (`with`, `without`) that shares the run's warm-up (copied from its journal:
neither sent nor judged again) and then samples exactly those questions (`Listed`) for --rounds
rounds: one arm with the demonstrations the method retrieves from the solved set (the run's own
intervention, or adpt's similar solved neighbours for a method that shows none), the other
zero-shot. A sample's seed depends on (run seed, question, round, k) only, so both sides of a pair
share it. The arms run side by side under one limiter (the run's limits), through the run's
provider and response cache; each is resumable from its own journal, so running the command again
goes on and buys nothing twice. RUN_DIR/ablation.json holds the effect (`_ablation`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

import orjson

from ttc.engine._util import redact_argv
from ttc.engine.cli._commands import EXIT_PROVIDER, Session, share_warmup, shared_quota_of
from ttc.engine.cli._executor import verifiers_for
from ttc.engine.cli._otel import traced
from ttc.engine.cli._progress import Progress
from ttc.engine.cli._spec import RunSpec
from ttc.engine.cli._usage import ttc_command
from ttc.engine.cli._wiring import make_engine, stored_config, suite_and_items, wire
from ttc.engine.contract._config import RunConfig
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Item, Suite
from ttc.engine.journal._lock import RunLock
from ttc.engine.journal._rundir import RunDir, items_sha256, write_atomic
from ttc.engine.report._ablation import paired_effect, unsolved_after_warmup, verdicts_after
from ttc.engine.run._observer import RunObserver
from ttc.engine.run._result import RunResult
from ttc.engine.run._runinfo import SIM_NOTE, require_journal, run_begun
from ttc.engine.send._limiter import Limiter
from ttc.engine.strategy import (
    FixedDemos,
    Listed,
    RandomICL,
    SimilarICL,
    Strategy,
    ZeroShot,
    preset,
)

log = logging.getLogger("ttc")

ARMS = ("with", "without")
# The runs of a `ttc compare` directory worth ablating first: the method's own, then the others.
ARMS_OF_COMPARE = ("adpt", "rand", "elim", "unif")


def arm_strategies(config: RunConfig, suite: str, rows: list[int]) -> dict[str, Strategy]:
    """The two arms' methods: the same questions and judgement, with the run's demonstrations
    (adpt's similar solved neighbours when the run's method shows none) and without any."""
    base = preset(config, suite)
    shows = base.intervention
    if not isinstance(shows, SimilarICL | RandomICL | FixedDemos):
        shows = SimilarICL(config.p, config.neighbours)
    listed = Listed(tuple(rows))
    return {
        "with": Strategy(listed, shows, base.judgement),
        "without": Strategy(listed, ZeroShot(), base.judgement),
    }


def _source(run_dir: Path) -> tuple[RunConfig, str | None]:
    """The run's config and its questions' checksum, from its config.json."""
    stored = stored_config(run_dir)
    if not stored:
        runs = [m for m in ARMS_OF_COMPARE if (run_dir / m / "config.json").is_file()]
        if runs:  # a `ttc compare` directory: each of its runs is ablated on its own
            raise DataError(
                f"{run_dir}: a `ttc compare` directory; name one of its runs, e.g. "
                f"{run_dir / runs[0]}"
            )
        raise DataError(f"{run_dir}: no config.json of a run (give a directory `ttc run` made)")
    require_journal(RunDir(run_dir))
    data = orjson.loads((run_dir / "config.json").read_bytes())
    config = RunConfig.from_dict(stored)
    if config.warmup_rounds < 1:
        raise ConfigError(f"{run_dir}: the run has no warm-up (--warmup 0): nothing to ablate")
    checksum = data.get("items_sha256") if isinstance(data, dict) else None
    return config, checksum if isinstance(checksum, str) else None


async def cmd_ablate(spec: RunSpec, session: Session, args: argparse.Namespace) -> int:
    """`ttc ablate`: both arms, then the paired effect on the terminal and in ablation.json."""
    run_dir, rounds, limit = Path(args.run_dir), int(args.rounds), args.limit
    source = await asyncio.to_thread(run_dir.resolve)
    config, checksum = _source(source)
    suite, items = suite_and_items(spec.suite)
    if checksum is not None and checksum != items_sha256(items):
        raise DataError(f"{source}: its questions are not the suite's as given now (checksum)")
    judgement = preset(config, suite.name).judgement
    journal = RunDir(source).journal_path
    rows = unsolved_after_warmup(journal, items, judgement, config.warmup_rounds, suite.answer_key)[
        :limit
    ]
    out = source / "ablation"
    if not rows:
        print("ablation: the warm-up solved every question: no pairs")
        return 0
    # The run's experiment, with the limits given now, and --rounds adaptive rounds.
    arm_config = dataclasses.replace(
        spec.run_config(config.method),
        rounds=config.warmup_rounds + rounds,
        match_tokens=None,
    )
    strategies = arm_strategies(arm_config, suite.name, rows)
    log.info(
        "ablation: %d questions the warm-up left unsolved, %d round(s) of K=%d, with and without "
        "demonstrations (%s)",
        len(rows),
        rounds,
        arm_config.k,
        strategies["with"].intervention.name,
    )
    out.mkdir(exist_ok=True)
    with RunLock.of_dir(out):
        async with (
            shared_quota_of(spec) as session.shared,  # --shared-limits: the arms' one limiter
            traced(spec.otel, "ablate") as session.tracing,
            verifiers_for(spec.executor, suite, spec.verifier_workers) as session.verifiers,
        ):
            invocation = {"argv": redact_argv(args.argv), "cwd": os.getcwd()}
            arms = _Arms(spec, session, arm_config, suite, invocation)
            results = await arms.run(strategies, items, journal, out)
    for result in results.values():
        if result.stopped is not None:
            print(f"stopped: {result.stopped}; go on with: {ttc_command()} ablate {run_dir}")
            return result.stopped.exit_code
    ablation = paired_effect(
        verdicts_after(out / "with" / "journal.jsonl", config.warmup_rounds),
        verdicts_after(out / "without" / "journal.jsonl", config.warmup_rounds),
        any(r.simulated for r in results.values()),
    )
    record = ablation.json() | {
        "run": str(source),
        "method": config.method,
        "demonstrations": strategies["with"].intervention.describe(),
        "rounds": rounds,
        "k": arm_config.k,
    }
    write_atomic(source / "ablation.json", orjson.dumps(record, option=orjson.OPT_INDENT_2))
    print(ablation.line())
    print(f"ablation: {source / 'ablation.json'}")
    if ablation.simulated:
        print(f"note: {SIM_NOTE}")
    failed = [f"{arm}: {r.failed}" for arm, r in results.items() if r.failed is not None]
    if failed:  # their pairs are left out until they are sent again
        print(f"ttc: {'; '.join(failed)}; send them again with: {ttc_command()} ablate {run_dir}")
        return EXIT_PROVIDER
    return 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Arms:
    """What both arms are run with: the run's spec, the ablation's config, its command line."""

    spec: RunSpec
    session: Session
    config: RunConfig
    suite: Suite
    invocation: dict[str, Any]

    async def run(
        self, strategies: dict[str, Strategy], items: list[Item], journal: Path, out: Path
    ) -> dict[str, RunResult]:
        """Both arms side by side, through one provider, cache and limiter."""
        config = self.config
        resume = {}
        for arm in ARMS:
            begun = run_begun(out / arm)
            if not begun:  # the run's warm-up, replayed rather than bought again
                begun = share_warmup(journal, out / arm / "journal.jsonl", config.warmup_rounds)
            resume[arm] = begun
        limiter = Limiter(config.rpm, config.tpm, config.concurrency)
        session = self.session
        if session.shared is not None:
            limiter.share(session.shared)
        async with (
            wire(self.spec, config, self.suite, items) as wired,
            contextlib.AsyncExitStack() as stack,
        ):
            engines = [
                make_engine(
                    config,
                    dataclasses.replace(wired, limiter=limiter, strategy=strategies[arm]),
                    out=out / arm,
                    resume=resume[arm],
                    progress=Progress(live=False),  # two runs at once: no status line
                    invocation=self.invocation | {"arm": arm},
                    verifiers=session.verifiers,
                    observers=self._observers(wired.provider.model, arm),
                )
                for arm in ARMS
            ]
            for engine in engines:
                session.engines.append(await stack.enter_async_context(engine))
            done = await asyncio.gather(*(e.run(items) for e in engines))
        return dict(zip(ARMS, done, strict=True))

    def _observers(self, model: str, arm: str) -> list[RunObserver]:
        """An arm's spans (--otel), named for its arm."""
        tracing = self.session.tracing
        if tracing is None:
            return []
        return [tracing.observer(self.spec.provider.kind, model, f"{self.config.method}-{arm}")]
