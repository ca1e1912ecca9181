"""What `ttc run`, `ttc compare`, `ttc resume`, `ttc verify` and `ttc report` do.

Exit codes: 0 done; 2 bad input; 3 stopped by a budget (resumable); 4 stopped because the provider
refuses the account (a bad key, an exhausted quota) or every request fails, the policy model's or
a role model's (resumable); 130 interrupted (resumable).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ttc.engine import EngineOptions, StopReason
from ttc.engine._config import METHODS, RunConfig
from ttc.engine._engine import Engine
from ttc.engine._errors import ConfigError, DataError
from ttc.engine._journal import read_journal
from ttc.engine._prices import parse_price
from ttc.engine._report import compare_table, plot_coverage, round_row, round_table
from ttc.engine._result import RunResult
from ttc.engine._rundir import matched_output_tokens, output_tokens_of
from ttc.engine._runinfo import SIM_NOTE
from ttc.engine._state import RunState
from ttc.engine._types import Embedder, Item, Provider, Sampling, Suite
from ttc.engine.cli._progress import Progress

log = logging.getLogger("ttc")

EXIT_BUDGET = 3
EXIT_PROVIDER = 4
EXIT_INTERRUPTED = 130

# The engines of the running command, so that Ctrl-C can ask each of them to stop (the exit
# code comes from each run's typed stop reason, `RunResult.stopped`, not from here).
ACTIVE: list[Engine] = []


def config_from(
    args: argparse.Namespace,
    method: str,
    *,
    suite: Suite | None = None,
    items: Sequence[Item] | None = None,
    out: Path | None = None,
) -> RunConfig:
    """The run's config from the command line (`suite`, `items` and `out`: see method_options)."""
    sampling = Sampling(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_output_tokens=args.max_tokens,
        thinking_budget=args.thinking_budget,
        reasoning_effort=args.reasoning_effort,
        verbosity=args.verbosity,
    )
    return RunConfig(
        rounds=args.rounds,
        warmup_rounds=args.warmup,
        k=args.k,
        p=args.p,
        gamma=args.gamma,
        seed=args.seed,
        method=method,
        neighbours=args.neighbours,
        concurrency=args.concurrency,
        rpm=args.rpm,
        tpm=args.tpm,
        timeout_s=args.timeout,
        max_attempts=args.max_attempts,
        verifier_workers=args.workers,
        max_cost_usd=args.max_cost,
        max_output_tokens=args.max_output_tokens,
        sampling=sampling,
        **method_options(args, suite=suite, items=items, out=out),
    )


def method_options(
    args: argparse.Namespace,
    *,
    suite: Suite | None = None,
    items: Sequence[Item] | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """The method flags (judge, noise, consensus, few-shot file, matched budget) as config.

    `--match-tokens RUN_DIR` becomes that run's output tokens, checked to be on `suite`'s `items`
    when given. A resumed run (`--resume`, `out` holding its config.json) keeps the budget it
    started with: RUN_DIR is not read again (it may have grown, moved or gone since).
    """
    fewshot = getattr(args, "fewshot", None)
    return {
        "judge": getattr(args, "judge", None),
        "judge_threshold": getattr(args, "judge_threshold", 0.7),
        "judge_temperature": getattr(args, "judge_temperature", None),
        "noise": getattr(args, "noise", 0.0),
        "consensus": getattr(args, "consensus", 0.75),
        "fewshot": None if fewshot is None else str(fewshot),
        "match_tokens": matched_budget(args, suite, items, out),
    }


def matched_budget(
    args: argparse.Namespace,
    suite: Suite | None,
    items: Sequence[Item] | None,
    out: Path | None,
) -> int | None:
    """--match-tokens as output tokens: the stored value on resume, else the named run's."""
    matched = getattr(args, "match_tokens", None)
    if matched is None:
        return None
    out = out if out is not None else getattr(args, "out", None)
    if getattr(args, "resume", False) and out is not None:
        stored = stored_config(Path(out)).get("match_tokens")
        if stored is not None:
            return int(stored)
    if suite is None or items is None:
        return output_tokens_of(Path(matched))
    return matched_output_tokens(Path(matched), suite.name, items, args.seed)


def stored_config(out: Path) -> dict[str, Any]:
    """The `config` of the run directory `out`, or {} when it has none (yet)."""
    try:
        data = orjson.loads((out / "config.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    config = data.get("config") if isinstance(data, dict) else None
    return config if isinstance(config, dict) else {}


def role_provider_from(
    args: argparse.Namespace, role: str, suite: Suite, items: Sequence[Item]
) -> Provider:
    """The model of a role besides the policy: `judge` (the reward model, --judge-model) or
    `difficulty` (da's rater, --difficulty-model): `sim` (the offline stand-in), or
    `openai:MODEL` / `gemini:MODEL`, which use the run's --base-url and --api-key-env when the
    run's --provider is the same kind (e.g. one vLLM server for both), else the vendor's API."""
    flag = {"judge": "judge_model", "difficulty": "difficulty_model"}[role]
    name = getattr(args, flag, None) or "sim"
    if name != "sim":
        kind, _, model = name.partition(":")
        if kind not in ("openai", "gemini") or not model:
            raise ConfigError(
                f"--{flag.replace('_', '-')}: expected sim, openai:MODEL or gemini:MODEL, "
                f"got {name!r}"
            )
        same = getattr(args, "provider", None) == kind
        return api_provider(
            kind,
            model,
            args.base_url if same else None,
            args.api_key_env if same else None,
        )
    from ttc.adapters.sim._sim import SimConfig, SimDifficulty, SimJudge, SimRoleConfig

    # The policy simulator's seed, so the rater sees the same latent difficulties.
    kind = SimJudge if role == "judge" else SimDifficulty
    return kind(suite, items, SimRoleConfig(seed=args.seed), SimConfig(seed=args.seed))


def make_suite_from(args: argparse.Namespace) -> Suite:
    from ttc.adapters.suites._suites import SuiteOptions, make_suite

    options = SuiteOptions(
        per_task=args.per_task,
        suite_config=args.suite_config,
        start=args.lcb_start,
        end=args.lcb_end,
    )
    return make_suite(args.suite, args.data, options)


def suite_and_items(args: argparse.Namespace) -> tuple[Suite, list[Item]]:
    suite = make_suite_from(args)
    items = suite.items()
    if args.limit is not None:
        items = items[: args.limit]
    return suite, items


def provider_from(args: argparse.Namespace, suite: Suite, items: Sequence[Item]) -> Provider:
    """The provider `--provider` names: the offline simulator, or a real API."""
    if args.provider == "sim":
        from ttc.adapters import SimConfig, SimProvider

        cfg = SimConfig(
            seed=args.seed,
            ability=args.sim_ability,
            latency_s=args.sim_latency,
            thinking_ratio=args.sim_thinking,
        )
        return SimProvider(suite, items, cfg)
    return api_provider(args.provider, args.model, args.base_url, args.api_key_env)


def api_provider(
    kind: str, model: str | None, base_url: str | None, api_key_env: str | None
) -> Provider:
    """An OpenAI(-compatible) or Gemini provider; a missing model or key is a ConfigError."""
    from ttc.adapters.providers._http import require_env_name

    if not model:
        raise ConfigError(f"--model: required with --provider {kind}")
    require_env_name(api_key_env, "--api-key-env")
    if kind == "openai":
        from ttc.adapters.providers._openai import OpenAIProvider

        return OpenAIProvider(
            model,
            base_url=base_url or "https://api.openai.com/v1",
            api_key_env=api_key_env or "OPENAI_API_KEY",
        )
    if kind == "gemini":
        from ttc.adapters.providers._gemini import GeminiProvider

        return GeminiProvider(model, base_url=base_url, api_key_env=api_key_env)
    raise ConfigError(f"--provider: unknown provider {kind!r}")


def embedder_from(args: argparse.Namespace) -> Embedder | Callable[[], Embedder]:
    """`--embedder`: an API embedder built now, or a factory the engine calls when the method needs
    vectors (after the run's log is attached, so "auto"'s fallback warning lands in run.log)."""
    from ttc.adapters.embedders._embedders import make_embedder

    if args.embedder.partition(":")[0] in ("openai", "gemini"):
        return make_embedder(args.embedder, base_url=args.embed_base_url)
    if args.embedder not in ("auto", "minilm", "lexical"):
        make_embedder(args.embedder)  # raises the ConfigError naming --embedder
    name = str(args.embedder)
    return lambda: make_embedder(name, log=logging.getLogger("ttc"))


def cache_path(args: argparse.Namespace) -> Path:
    if args.cache is not None:
        return Path(args.cache)
    root = os.environ.get("TTC_CACHE_DIR") or Path.home() / ".cache" / "ttc"
    return Path(root) / "responses.sqlite3"


def default_out(label: str) -> Path:
    base = Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    path, i = base, 1
    while path.exists():
        i += 1
        path = base.with_name(f"{base.name}-{i}")
    return path


def out_dir(args: argparse.Namespace, label: str) -> Path:
    if args.resume and args.out is None:
        raise ConfigError("--resume: name the run directory with --out")
    out: Path = args.out or default_out(label)
    args.out = out  # for the resume hint if the run is interrupted
    return out


async def run_one(
    args: argparse.Namespace,
    method: str,
    out: Path,
    suite: Suite,
    items: list[Item],
    resume: bool = False,
) -> RunResult:
    from ttc.engine._cache import CachingProvider, ResponseCache

    config = config_from(args, method, suite=suite, items=items, out=out)
    provider = provider_from(args, suite, items)
    cache = None if args.no_cache else ResponseCache(cache_path(args))
    sending: Provider = provider if cache is None else CachingProvider(provider, cache)
    roles = {role: role_provider_from(args, role, suite, items) for role in config.roles}
    price = parse_price(args.price) if args.price else None
    progress = Progress(live=args.live)
    invocation = {"argv": args.argv, "cwd": os.getcwd()}
    try:
        engine = Engine(
            sending,
            suite,
            config,
            out_dir=out,
            embedder=embedder_from(args),
            resume=resume,
            roles={r: p if cache is None else CachingProvider(p, cache) for r, p in roles.items()},
            options=EngineOptions(price=price, observer=progress, invocation=invocation),
        )
        ACTIVE.append(engine)
        async with engine:
            result = await engine.run(items)
    finally:
        if cache is not None:
            cache.close()
        await provider.aclose()
        for role_provider in roles.values():
            await role_provider.aclose()
    if isinstance(sending, CachingProvider):
        print(f"cache: {sending.misses} requests sent, {sending.hits} answered from the cache")
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
    if engine is not None and getattr(engine.provider, "simulated", False):
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
    print(f"stopped: {stopped}; go on with: ttc resume {out}")
    return stopped.exit_code


async def cmd_run(args: argparse.Namespace) -> int:
    suite, items = suite_and_items(args)
    out = out_dir(args, args.method)
    result = await run_one(args, args.method, out, suite, items, resume=args.resume)
    print_result(result, f"{args.method} on {suite.name}", ACTIVE[-1])
    return stop_code(result.stopped, out)


async def cmd_compare(args: argparse.Namespace) -> int:
    suite, items = suite_and_items(args)
    out = out_dir(args, "compare")
    if not args.resume:
        require_empty(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "invocation.json").write_bytes(orjson.dumps({"argv": args.argv, "cwd": os.getcwd()}))
    runs: dict[str, list[dict[str, Any]]] = {}
    # elim runs first; its warm-up samples are then shared with every other method, which
    # replays them from its journal instead of sending them again (same seed, same prompts).
    for method in ("elim", "unif", "rand", "adpt"):
        if method != "elim" and not (out / method / "journal.jsonl").exists():
            share_warmup(out / "elim" / "journal.jsonl", out / method / "journal.jsonl",
                         args.warmup)  # fmt: skip
        result = await run_one(args, method, out / method, suite, items, resume=True)
        runs[method] = [round_row(s) for s in result.rounds]
        log.info("%s: coverage %.1f%%", method, 100 * result.coverage)
        code = stop_code(result.stopped, out)
        if code:
            return code
    runs = {m: runs[m] for m in METHODS}
    table = compare_table(runs)
    simulated = bool(getattr(ACTIVE[-1].provider, "simulated", False))
    title = f"{suite.name}, {len(items)} questions, seed {args.seed}"
    if simulated:
        title += "\nsimulated (sim provider): measures the machinery, not the method"
    plot_coverage(runs, out / "coverage_vs_tokens.png", title)
    (out / "compare.txt").write_text(table + "\n" + (f"note: {SIM_NOTE}\n" if simulated else ""))
    (out / "compare.json").write_bytes(orjson.dumps({"runs": runs, "simulated": simulated}))
    print(table)
    print(f"plot: {out / 'coverage_vs_tokens.png'}")
    if simulated:
        print(f"note: {SIM_NOTE}")
    return 0


def require_empty(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out: {out} is not empty; pick a new directory")


def share_warmup(src: Path, dst: Path, warmup_rounds: int) -> None:
    """Copies the warm-up samples, their reward model ratings and their verdicts of one method's
    journal to another's: the warm-up is neither sent nor judged again."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        orjson.dumps(ev)
        for ev in read_journal(src)
        if ev["ev"] in ("sample", "judge", "verdict") and int(ev["round"]) <= warmup_rounds
    ]
    dst.write_bytes(b"".join(line + b"\n" for line in lines))


def resume_argv(run_dir: Path, extra: Sequence[str]) -> tuple[list[str], str]:
    """The command line that made `run_dir`, with `extra` flags on top and --resume."""
    for name in ("config.json", "invocation.json"):
        path = run_dir / name
        if path.is_file():
            data = orjson.loads(path.read_bytes())
            invocation = data.get("invocation", data) if name == "config.json" else data
            if isinstance(invocation, dict) and isinstance(invocation.get("argv"), list):
                argv = [str(a) for a in invocation["argv"]]
                cwd = str(invocation.get("cwd") or os.getcwd())
                return [*argv, *extra, "--resume", "--out", str(run_dir.resolve())], cwd
    raise DataError(f"{run_dir}: not a run directory made by `ttc run` or `ttc compare`")


async def cmd_verify(args: argparse.Namespace) -> int:
    from ttc.engine.cli._rescore import rescore

    suite = make_suite_from(args)
    out = args.out or args.responses.with_suffix(".verdicts.jsonl")
    summary = await rescore(suite, args.responses, out, workers=args.workers, gamma=args.gamma)
    share = summary.passed / summary.judged if summary.judged else 0.0
    print(
        f"{summary.judged} responses judged by the {suite.name} verifier: "
        f"{summary.passed} passed ({100 * share:.1f}%); verdicts: {summary.out}"
    )
    return 0


async def cmd_report(args: argparse.Namespace) -> int:
    from ttc.engine.cli._runreport import report

    print(report(args.run_dirs, args.plot))
    if args.plot is not None:
        print(f"plot: {args.plot}")
    return 0


async def cmd_serve(args: argparse.Namespace) -> int:
    from ttc.adapters.sim._serve import SimServer, options_from_args, serve_forever

    options = options_from_args(args)
    suite, items = suite_and_items(args)

    def ready(server: SimServer) -> None:
        limits = [
            f"{name} {value:g}"
            for name, value in (("rpm", options.rpm), ("tpm", options.tpm))
            if value is not None
        ]
        print(
            f"ttc serve: listening on {server.url} ({len(items)} {suite.name} questions; "
            f"OpenAI base_url {server.base_url_openai}; "
            f"limits: {', '.join(limits) or 'none'}; window {options.window:g} s)",
            flush=True,
        )

    # Ctrl-C or SIGTERM ends the server cleanly (exit 0): a timer-free stop from the loop
    # itself, never an exception raised wherever the signal happens to land.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await serve_forever(options, suite, items, on_ready=ready, stop=stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return 0
