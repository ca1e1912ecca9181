"""What `ttc run`, `ttc compare` and `ttc resume` do (verify, report and serve: _tools).

Exit codes: 0 done; 2 bad input; 3 stopped by a budget (resumable); 4 stopped because the provider
refuses the account (a bad key, an exhausted quota) or every request fails, the policy model's or
a role model's, or the run ended with samples that failed for good (resumable); 75 a file of the
run could not be written, e.g. a full disk (resumable); 130 interrupted (resumable).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import stat
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ttc.engine import StopKind, StopReason, Verifiers
from ttc.engine._util import redact_argv, withheld
from ttc.engine._util._records import read_json
from ttc.engine.cli._batchmode import batch_price
from ttc.engine.cli._control import SOCKET
from ttc.engine.cli._controlrun import ControlledRun
from ttc.engine.cli._executor import verifiers_for
from ttc.engine.cli._metrics import metrics_served
from ttc.engine.cli._otel import Tracing, traced
from ttc.engine.cli._progress import Progress
from ttc.engine.cli._sharedflags import shared_quota
from ttc.engine.cli._spec import RunSpec
from ttc.engine.cli._usage import ttc_command
from ttc.engine.cli._wiring import (
    make_engine,
    run_config,
    stored_config,
    suite_and_items,
    wire,
)
from ttc.engine.contract._config import PRESETS
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Item, Suite, Usage
from ttc.engine.journal._frames import compact
from ttc.engine.journal._journal import read_journal
from ttc.engine.journal._lock import LOCK_NAME, RunLock
from ttc.engine.journal._rundir import RunDir, round_row, write_atomic
from ttc.engine.report._intervals import covered_rounds, interval_table, paired_table
from ttc.engine.report._plots import plot_coverage
from ttc.engine.report._tables import compare_table, round_table
from ttc.engine.run._engine import Engine
from ttc.engine.run._observer import RunObserver
from ttc.engine.run._result import RunResult
from ttc.engine.run._runinfo import SIM_NOTE, require_journal, run_begun
from ttc.engine.run._worstcase import plan_cost
from ttc.engine.send._prices import flex_price_for, parse_price, price_for
from ttc.engine.send._shared import SharedQuota
from ttc.engine.strategy._strategy import preset

if TYPE_CHECKING:
    from ttc.engine.cli._prometheus import Metrics

log = logging.getLogger("ttc")

EXIT_BUDGET = StopKind.BUDGET.exit_code
EXIT_PROVIDER = StopKind.PROVIDER.exit_code
EXIT_INTERRUPTED = StopKind.INTERRUPTED.exit_code
# A file of the run could not be written (a full disk): resumable once the cause is gone.
EXIT_WRITE = 75
# The methods `ttc compare` runs, in order: elim first, whose warm-up the others share.
COMPARED = ("elim", "unif", "rand", "adpt")


@dataclass
class Session:
    """The engines one command has started, so that Ctrl-C can ask each of them to stop (the
    exit code comes from each run's typed stop reason, `RunResult.stopped`, not from here)."""

    engines: list[Engine] = field(default_factory=list)
    # Why the command was told to stop (no further run begins), if it was.
    stopping: StopReason | None = None
    # Its live metrics (--metrics-port), which each of its runs counts into.
    metrics: Metrics | None = None
    # The verifier pool its runs share (--executor ray); None: each engine builds its own.
    verifiers: Verifiers | None = None
    # Its spans (--otel), under which each of its runs traces its own.
    tracing: Tracing | None = None
    # The rate limits its runs take from Redis (--shared-limits); None: each its own.
    shared: SharedQuota | None = None

    def stop(self, why: str) -> None:
        """Every engine stops dispatching; requests in flight finish and are recorded."""
        self.stopping = self.stopping or StopReason.interrupted(why)
        for engine in self.engines:
            engine.stop(why)

    @property
    def running(self) -> bool:
        """Whether an engine is still running its rounds (not writing its results)."""
        return any(engine.running for engine in self.engines)


def compared(spec: RunSpec) -> tuple[str, ...]:
    """The methods `ttc compare` runs, in order (--methods): elim first, whose warm-up the
    others share (without elim, the first named shares its own)."""
    methods = spec.methods or COMPARED
    return tuple(sorted(methods, key=lambda m: m != "elim"))


def shared_quota_of(spec: RunSpec) -> AbstractAsyncContextManager[SharedQuota | None]:
    """The quota --shared-limits names for the policy model (None without it)."""
    from ttc.adapters.providers import VENDOR_URLS

    p = spec.provider
    # A quota's key names the URL requests go to: the vendor's where none is given, so that
    # `ttc run` and `ttc batch` on one model find the same quota whether or not they spell it.
    url = p.base_url or VENDOR_URLS.get(p.kind)
    return shared_quota(spec.shared_limits, spec.quota_name, p.kind, url, p.model)


def out_dir(spec: RunSpec) -> Path:
    """The run directory: --out, or the one named by default; --resume needs --out."""
    if spec.out is None:
        raise ConfigError("--resume: name the run directory with --out")
    return spec.out


async def run_one(
    spec: RunSpec,
    method: str,
    out: Path,
    suite: Suite,
    items: list[Item],
    session: Session,
    resume: bool = False,
) -> RunResult:
    """One method's run over `items` into `out`, wired from `spec`; prints the cache's tally."""
    config = run_config(spec, method, suite=suite, items=items, out=out)
    async with wire(spec, config, suite, items) as wired:
        progress = Progress(live=spec.live)
        invocation = {"argv": redact_argv(spec.argv), "cwd": os.getcwd()}
        invocation |= spec.executor.describe()
        metrics = session.metrics
        models = {"policy": wired.provider.model} | {r: p.model for r, p in wired.roles.items()}
        observers: list[RunObserver] = []
        if metrics is not None:
            observers.append(metrics.run_observer(method, models))
        if session.tracing is not None:
            kind = spec.provider.kind
            observers.append(session.tracing.observer(kind, wired.provider.model, method))
        control = ControlledRun(out / SOCKET, progress.counts)  # `ttc ctl`
        observers.append(control)
        engine = make_engine(
            config,
            wired,
            out=out,
            resume=resume,
            progress=progress,
            invocation=invocation,
            observers=observers,
            verifiers=session.verifiers,
        )
        if metrics is not None:
            metrics.watch(method, engine.limiter, config.rpm, config.tpm, engine.cache)
        if session.shared is not None:
            engine.limiter.share(session.shared)
        control.engine = engine
        session.engines.append(engine)
        async with engine:
            result = await engine.run(items)
    if engine.cache is not None:
        cache = engine.cache
        # `ttc compare` prints one a method: each says whose it is.
        whose = f" ({method})" if spec.method is None else ""
        print(f"cache{whose}: {cache.misses} requests sent, {cache.hits} answered from the cache")
    return result


def print_result(result: RunResult, label: str, engine: Engine | None) -> None:
    print(f"\n{label}: {result.n} questions, {result.wall_s:.1f} s")
    print(round_table([round_row(s) for s in result.rounds]))
    u = result.usage
    cost = engine.cost(u) if engine is not None else None
    cost_text = f"; cost ${cost:.4f}" if cost is not None else ""
    print(
        f"coverage {100 * result.coverage:.1f}%  ({result.covered}/{result.n});  accuracy "
        f"{100 * result.accuracy:.1f}%  ({result.accurate}/{result.n});  tokens: "
        f"{u.input_tokens:,} input, {u.output_tokens:,} output, {u.thinking_tokens:,} thinking"
        f"{cost_text}"
    )
    roles = (
        "" if engine is None or result.state is None else role_totals(engine, result.state, cost)
    )
    if roles:
        print(roles)
    print(f"run directory: {result.out_dir}")
    if result.simulated:  # however the answers came: live, the response cache, the journal
        print(f"note: {SIM_NOTE}")


def role_totals(engine: Engine, state: RunState, policy_cost: float | None) -> str:
    """One line per role model (tokens and cost), then the total cost; "" without roles."""
    lines = []
    costs = engine.role_costs(state)
    for role, u in engine.role_usage(state).items():
        cost = costs.get(role)
        lines.append(
            f"{role} model {engine.roles[role].model}: tokens {u.input_tokens:,} input, "
            f"{u.output_tokens:,} output, {u.thinking_tokens:,} thinking; "
            + ("cost unknown (no price)" if cost is None else f"cost ${cost:.4f}")
        )
    if lines:
        role_cost = engine.role_cost(state)
        if policy_cost is not None and role_cost is not None:
            lines.append(f"total cost, policy and role models: ${policy_cost + role_cost:.4f}")
    return "\n".join(lines)


def stop_code(stopped: StopReason | None, out: Path) -> int:
    """The exit code of a run that ended early (its stop reason's), with a message; else 0."""
    if stopped is None:
        return 0
    print(f"stopped: {stopped}; go on with: {ttc_command()} resume {out}")
    return stopped.exit_code


def end_code(result: RunResult, out: Path) -> int:
    """The exit code of a run: its stop reason's, else EXIT_PROVIDER if samples failed for good
    (a line names the commonest cause), else 0; each with the command that goes on."""
    if result.stopped is not None or result.failed is None:
        return stop_code(result.stopped, out)
    print(f"ttc: {result.failed}; send them again with: {ttc_command()} resume {out}")
    return EXIT_PROVIDER


async def cmd_run(spec: RunSpec, session: Session) -> int:
    """`ttc run`: one method; the exit code says whether and why it stopped early."""
    assert spec.method is not None
    suite, items = suite_and_items(spec.suite)
    if spec.dry_run:
        return await dry_run(spec, spec.method, suite, items)
    out = out_dir(spec)
    with metrics_served(spec.metrics_port, spec.metrics_addr) as session.metrics:
        async with (
            traced(spec.otel, "run") as session.tracing,
            shared_quota_of(spec) as session.shared,
            verifiers_for(spec.executor, suite, spec.verifier_workers) as session.verifiers,
        ):
            result = await run_one(spec, spec.method, out, suite, items, session, spec.resume)
    print_result(result, f"{spec.method} on {suite.name}", session.engines[-1])
    return end_code(result, out)


async def dry_run(spec: RunSpec, method: str, suite: Suite, items: list[Item]) -> int:
    """`ttc run --dry-run`: the plan's worst-case cost, round by round; nothing is sent or
    written."""
    config = run_config(spec, method, suite=suite, items=items)
    # No provider is built (no key is needed): the price is the one the run would have.
    model = spec.provider.model or spec.provider.kind
    price = parse_price(spec.price) if spec.price else None
    if price is None and spec.provider.service_tier == "flex":
        price = flex_price_for(model)
    price = price_for(model, batch_price(price, model, spec.batch))
    strategy = preset(config, suite.name)
    plan = plan_cost(config, suite, items, price, demonstrations=strategy.needs_embeddings)
    for r in plan.rounds:
        print(f"round {r.round}: {_worst_line(r.requests, r.usage, r.cost)}")
    print(
        f"plan ({method}, {len(items)} questions, K={config.k}, {config.rounds} rounds): "
        f"{_worst_line(plan.requests, plan.usage, plan.cost)}"
    )
    if price is None:
        print(f"no known price for {model}: give one with --price INPUT,OUTPUT")
    if not plan.capped:
        out = plan.rounds[0].usage.output_tokens // max(1, plan.rounds[0].requests)
        print(f"no --max-tokens: each request's output is taken as {out:,} tokens, a guess")
    if config.max_cost_usd is not None:
        print(
            f"--max-cost ${config.max_cost_usd:g}: the run stops there (passed by at most one "
            "request's worst case)"
        )
    print("dry run: nothing was sent")
    return 0


def _worst_line(requests: int, usage: Usage, cost: float | None) -> str:
    cost_text = "cost unknown" if cost is None else f"at most ${cost:.4f}"
    return (
        f"{requests:,} requests, at most {usage.input_tokens:,} input and "
        f"{usage.output_tokens + usage.thinking_tokens:,} output tokens, {cost_text}"
    )


async def cmd_compare(spec: RunSpec, session: Session) -> int:
    """`ttc compare`: the main four methods on one warm-up, a table and a plot."""
    if spec.match_run is not None:
        raise ConfigError(
            "--match-tokens: ttc compare takes none; --protocol paper (the default) matches "
            "unif to elim's output tokens"
        )
    suite, items = suite_and_items(spec.suite)
    out = out_dir(spec)
    if not spec.resume:
        require_empty(out)
    for method in compared(spec):
        if spec.resume and run_begun(out / method):  # refused before anything is written
            require_journal(RunDir(out / method))
    with (
        RunLock.of_dir(out),  # one `ttc compare` (or resume) writes it at a time
        metrics_served(spec.metrics_port, spec.metrics_addr) as session.metrics,
    ):
        async with (
            traced(spec.otel, "compare") as session.tracing,
            shared_quota_of(spec) as session.shared,
            verifiers_for(spec.executor, suite, spec.verifier_workers) as session.verifiers,
        ):
            return await _compare(spec, session, suite, items, out)


async def _compare(
    spec: RunSpec, session: Session, suite: Suite, items: list[Item], out: Path
) -> int:
    if not spec.resume:  # a resume goes on with the command line that made the comparison
        invocation = {"argv": redact_argv(spec.argv), "cwd": os.getcwd(), "protocol": spec.protocol}
        write_atomic(out / "invocation.json", orjson.dumps(invocation))
    runs: dict[str, list[dict[str, Any]]] = {}
    simulated = False
    failed: list[str] = []  # each method's samples that failed for good
    # elim runs first; its warm-up samples are then shared with every other method, which
    # replays them from its journal instead of sending them again (same seed, same prompts).
    # A method begun before goes on from its journal (refused if that is gone); one not begun
    # yet starts, from the shared warm-up.
    methods = compared(spec)
    for method in methods:
        if session.stopping is not None:  # Ctrl-C between two runs: the next one never begins
            return stop_code(session.stopping, out)
        begun = run_begun(out / method)
        if method != methods[0] and not begun:
            begun = share_warmup(
                out / methods[0] / "journal.jsonl",
                out / method / "journal.jsonl",
                spec.warmup_rounds,
            )
        # The paper's protocol: unif gets elim's output tokens ("we match the same level of
        # output token to that of Elim"), as `benchmarks/paper.py` does.
        matched = method == "unif" and spec.protocol == "paper" and "elim" in methods
        method_spec = dataclasses.replace(spec, match_run=out / "elim") if matched else spec
        result = await run_one(method_spec, method, out / method, suite, items, session, begun)
        runs[method] = [round_row(s) for s in result.rounds]
        simulated |= result.simulated
        log.info("%s: coverage %.1f%%", method, 100 * result.coverage)
        code = stop_code(result.stopped, out)
        if code:
            return code
        if result.failed is not None:
            failed.append(f"{method}: {result.failed}")
    runs = {m: runs[m] for m in PRESETS if m in runs}
    table = compare_tables(runs, out, len(items))
    title = f"{suite.name}, {len(items)} questions, seed {spec.seed}"
    if simulated:
        title += "\nsimulated (sim provider): measures the machinery, not the method"
    plot_coverage(runs, out / "coverage_vs_tokens.png", title)
    protocol = protocol_line(spec, stored_config(out / "unif").get("match_tokens"))
    note = f"note: {SIM_NOTE}\n" if simulated else ""
    write_atomic(out / "compare.txt", f"{protocol}\n{table}\n{note}".encode())
    write_atomic(
        out / "compare.json",
        orjson.dumps({"runs": runs, "simulated": simulated, "protocol": protocol}),
    )
    print(protocol)
    print(table)
    print(f"plot: {out / 'coverage_vs_tokens.png'}")
    if simulated:
        print(f"note: {SIM_NOTE}")
    if failed:
        print(f"ttc: {'; '.join(failed)}; send them again with: {ttc_command()} resume {out}")
        return EXIT_PROVIDER
    return 0


def compare_tables(runs: dict[str, list[dict[str, Any]]], out: Path, questions: int) -> str:
    """`ttc compare`'s tables: coverage and accuracy per round, each round's coverage with its
    interval over questions, adpt minus each other method on the same questions, and which
    methods are judged with no oracle."""
    table = compare_table(runs)
    firsts = {m: covered_rounds(out / m) for m in runs}
    n_rounds = max((len(r) for r in runs.values()), default=0)
    table += "\n\n" + interval_table(firsts, n_rounds, questions)
    table += "\n\n" + paired_table(firsts, "adpt" if "adpt" in runs else None)
    if judged := judged_note(list(runs)):
        table += f"\n{judged}"
    return table


def protocol_line(spec: RunSpec, matched: int | None) -> str:
    """What `ttc compare` did, in a line: unif's budget (`matched`: elim's output tokens, when
    unif matched them) and the decoding every method used."""
    sampling = {k: v for k, v in dataclasses.asdict(spec.sampling).items() if v is not None}
    decoding = ", ".join(f"{k} {v}" for k, v in sampling.items()) or "the provider's defaults"
    methods = compared(spec)
    if spec.protocol == "paper":
        unif = f"unif matched to elim's {matched or 0:,} output tokens; "
        if "unif" not in methods or "elim" not in methods:
            unif = ""
        return f"protocol: the paper's (section 5, Appendix A): {unif}decoding: {decoding}"
    unif = f"unif samples all {spec.rounds} rounds; " if "unif" in methods else ""
    return f"protocol: none: {unif}decoding: {decoding}"


# The presets judged by the agreement of their answers, with no oracle.
AGREEING = ("sc", "esc", "asc")


def judged_note(methods: Sequence[str]) -> str:
    """The line that says which compared methods are judged with no oracle, or ""."""
    agreeing = [m for m in methods if m in AGREEING]
    if not agreeing:
        return ""
    return (
        f"judged by agreement, no oracle: {', '.join(agreeing)} (their accuracy is their "
        "majority answer's); the others by ground truth; coverage is ground truth for all"
    )


def require_empty(out: Path) -> None:
    if out.exists() and any(p.name != LOCK_NAME for p in out.iterdir()):
        raise ConfigError(f"--out: {out} is not empty; pick a new directory")


def share_warmup(src: Path, dst: Path, warmup_rounds: int) -> bool:
    """Copies the warm-up samples, their reward model ratings and their verdicts of one method's
    journal to another's: the warm-up is neither sent nor judged again. False, and no journal
    written, when there is nothing to share (no warm-up rounds)."""
    lines = [
        orjson.dumps(ev)
        for ev in read_journal(src)
        if ev["ev"] in ("sample", "judge", "verdict") and int(ev["round"]) <= warmup_rounds
    ]
    if not lines:
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dst, compact(b"".join(line + b"\n" for line in lines)))  # as a run writes it
    return True


def resume_argv(run_dir: Path, extra: Sequence[str]) -> tuple[list[str], str]:
    """The command line that made `run_dir`, with `extra` flags on top and --resume."""
    for name in ("config.json", "invocation.json"):
        path = run_dir / name
        if path.is_file():
            data = read_json(path)
            if name == "config.json":  # a run's: refused now if there is nothing to go on from
                require_journal(RunDir(run_dir))
            invocation = data.get("invocation", data) if name == "config.json" else data
            if isinstance(invocation, dict) and isinstance(invocation.get("argv"), list):
                argv = [str(a) for a in invocation["argv"]]
                if name == "invocation.json" and "protocol" not in invocation:
                    argv.extend(["--protocol", "none"])  # a compare made before --protocol
                cwd = str(invocation.get("cwd") or os.getcwd())
                # --base-url may be repeated (replicas): given again, it replaces the run's.
                for flag in REPEATABLE:
                    if without_flag(list(extra), flag) != list(extra):
                        argv = without_flag(argv, flag)
                return [*argv, *extra, "--resume", "--out", str(run_dir.resolve())], cwd
    if not run_dir.exists():
        raise DataError(f"{run_dir}: no such directory (give the run directory `ttc run` made)")
    raise DataError(f"{run_dir}: not a run directory made by `ttc run` or `ttc compare`")


REPEATABLE = ("--base-url",)  # flags that append: on resume, the new ones replace the old

# Where a resumed run sends its requests and its key, and where it verifies (by parsed name: a
# flag may be abbreviated): from the command line, or from the run's stored command line only
# when the directory is this user's (`not_yours`).
SENT_TO = {
    "base_url": "--base-url URL",
    "api_key_env": "--api-key-env NAME",
    "embed_base_url": "--embed-base-url URL",
    "ray_address": "--ray-address ADDRESS",
}


def not_yours(run_dir: Path) -> str | None:
    """Why the command line stored in `run_dir` may be a stranger's (the directory, config.json
    or invocation.json owned by another user, writable by others, or a link), or None."""
    uid, gid = os.geteuid(), os.getegid()
    for path in (run_dir, run_dir / "config.json", run_dir / "invocation.json"):
        try:
            info = path.stat() if path == run_dir else path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            return f"{path} is a symbolic link"
        if info.st_uid != uid:
            return f"{path} is owned by uid {info.st_uid}, not by you (uid {uid})"
        if info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != gid):
            return f"{path} is writable by others"
    return None


def untrusted_settings(
    run_dir: Path,
    stored: argparse.Namespace,
    given: argparse.Namespace,
    defaults: argparse.Namespace,
) -> str | None:
    """The refusal of a resume whose stored command line names an endpoint, a key's variable or
    an executor address that the user did not give again (`given`: the flags of `ttc resume`)
    in a directory that is not theirs; None when there is nothing to refuse."""
    missing = [
        flag
        for dest, flag in SENT_TO.items()
        if getattr(stored, dest, None) != getattr(defaults, dest, None)
        and getattr(given, dest, None) == getattr(defaults, dest, None)
    ]
    why = not_yours(run_dir) if missing else None
    if why is None:
        return None
    return (
        f"{why}: its command line may name a stranger's server, so it is not used for "
        f"{', '.join(f.split()[0] for f in missing)}; give them: {ttc_command()} resume "
        f"{run_dir} {' '.join(missing)}"
    )


def without_flag(argv: list[str], flag: str) -> list[str]:
    """`argv` without `flag VALUE` and `flag=VALUE`, the flag also as argparse takes it
    abbreviated (`--base-u URL`: a stored command line may spell it so)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        name, eq, _ = arg.partition("=")
        spelt = len(name) > 2 and name.startswith("--") and flag.startswith(name)
        if skip:
            skip = False
        elif spelt and not eq:
            skip = True
        elif not spelt:
            out.append(arg)
    return out


def withheld_credential(args: argparse.Namespace) -> str | None:
    """The flag (--base-url, --embed-base-url, --shared-limits) of a resumed command line whose
    URL lost its credential when the run was stored, so it must be given again; None when none
    did."""
    for flag in ("--base-url", "--embed-base-url", "--shared-limits"):
        value = getattr(args, flag[2:].replace("-", "_"), None)
        urls = value if isinstance(value, list) else [value]  # --base-url may be repeated
        if any(isinstance(url, str) and withheld(url) for url in urls):
            return flag
    return None
