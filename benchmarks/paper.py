"""Reproduces the paper's experiments: methods × suites × seeds, then its tables and figures.

    python benchmarks/paper.py --out DIR [--suites S,...] [--methods M,...|all] [--seeds 0,1]
        [--provider sim|openai|gemini --model M --base-url URL --api-key-env VAR]
        [--limit N|all] [--rounds 4] [--temperature T --top-p P --top-k K --max-tokens N
        --thinking-budget N --reasoning-effort E --verbosity V] [--price IN,OUT[,THINK]]
        [--batch [--batch-discount D --batch-fallback batch|sync --batch-poll S]]

Every run goes through the Engine library API in one event loop, one after another, into its
own run directory `DIR/<suite>/seed<k>/<method>/`. Per (suite, seed) the methods share one
warm-up (see `_paper_grid`); `unif` and `da` match the output tokens of `--match-to` (the
paper: elim). Running the same command again reuses finished runs and resumes unfinished ones.
With `--batch` (openai, gemini) every run's rounds go through the provider's Batch API, as
`ttc run --batch` sends them: half price, each round waiting for its batches.

Decoding defaults to the paper's (Appendix A): temperature 0.3, top_p 0.9, top_k 40 where the
model takes them; output limits 65,536 (Gemini) and 32,768 (GPT); OpenAI reasoning models
(gpt-5*, o*) get no temperature/top_p/top_k and reasoning effort and verbosity medium. A flag
overrides a default; `default` leaves the parameter to the provider. With `sim`, every suite is
cut to a small prefix by default so that the whole grid runs offline in minutes.

Writes DIR/results.md and DIR/results.json (final-round coverage and accuracy, mean ± std over
seeds, adpt's gains, and every table of the paper in its shape: `_paper_shapes`),
DIR/final_coverage.png, and per suite DIR/<suite>/
coverage_per_round.png, coverage_vs_output_tokens.png and tokens_per_round.png; prints one JSON
line. With `sim`, every output says it is simulated: it measures the machinery, not the method.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _paper_grid import Grid, Outcome, ProviderFactory
from _paper_plan import (
    DATA_DIR,
    FIXTURE,
    LCB_FIXTURE,
    MATCHED,
    GridOptions,
    data_sources,
    read_summary,
)
from _paper_report import SIM_BANNER, Run, by_suite, write_figures, write_tables
from _paper_shapes import cross_model

from ttc.adapters import SimProvider
from ttc.engine import METHODS, PRESETS, ConfigError, DataError, Item, Sampling
from ttc.engine.cli import SuiteSpec, add_batch_flags, batch_spec, parse_limit, suite_and_items
from ttc.engine.journal import items_sha256

SUITES = ("reasoning_gym", "math500", "minerva", "gpqa", "livecodebench")
# Named with --suites only: the failure-mode test set of Table 7 (LiveCodeBench, MATH-500, GPQA).
EXTRA_SUITES = ("mixed",)
# With `sim`: questions per suite by default (the first N; Reasoning Gym interleaves its tasks).
SIM_LIMITS: dict[str, int | None] = {
    "reasoning_gym": 100,
    "math500": 100,
    "minerva": 40,
    "gpqa": 100,
    "livecodebench": 40,  # the whole fixture (7); of the Hub's window, 40: each answer is run
    "mixed": None,  # 60 questions (47 with the LiveCodeBench fixture)
}
PAPER_SAMPLING = {"temperature": 0.3, "top_p": 0.9, "top_k": 40}
MAX_TOKENS = {"gemini": 65_536, "openai": 32_768}
REASONING_MODEL = re.compile(r"^(gpt-5|o\d)")
# A decoding flag not given: the paper's value (not a string: argparse would parse it).
UNSET: Any = object()


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _decoding(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float | None:
        if text == "default":
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number or 'default', got {text!r}"
            ) from None

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/paper.py", description=(__doc__ or "").splitlines()[0]
    )
    p.add_argument("--out", type=Path, required=True, help="the grid's directory (re-run: resume)")
    p.add_argument("--suites", default=",".join(SUITES), help=f"comma list of {', '.join(SUITES)}"
                   f" (default: all five), or {', '.join(EXTRA_SUITES)}")  # fmt: skip
    p.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma list of {', '.join(PRESETS)}, or `all` (default: the main four)",
    )
    p.add_argument("--seeds", default="0,1", help="comma list of run seeds (the paper: 4 seeds)")
    p.add_argument("--cross-model", default="", metavar="DIR,...",
                   help="other grids' --out (other models): Figure 1's table averages over "
                   "them too")  # fmt: skip
    g = p.add_argument_group("test sets")
    g.add_argument("--limit", help="first N questions of every suite, or `all` (default: all; "
                   "with sim: 100 per suite)")  # fmt: skip
    g.add_argument("--per-task", type=int, default=100, help="Reasoning Gym problems per task")
    g.add_argument("--data-dir", type=Path, default=DATA_DIR,
                   help="math500, minerva, gpqa files (default: $TTC_DATA_DIR, else ../shared/data "
                   "beside the project; as `ttc run` looks)")  # fmt: skip
    g.add_argument("--hub", action="store_true", help="a suite with no file (no --lcb-data): "
                   "the Hugging Face Hub's copy; without it nothing is downloaded")  # fmt: skip
    g.add_argument("--lcb-data", type=Path, help="LiveCodeBench JSONL (default with --hub: the "
                   f"Hub's, in the window; `{FIXTURE}` or sim without --hub: a 7-problem "
                   "fixture)")  # fmt: skip
    g.add_argument("--lcb-start", default="2024-10-05", help="LiveCodeBench: first release date")
    g.add_argument("--lcb-end", default="2025-01-04", help="LiveCodeBench: last release date")
    g = p.add_argument_group("Algorithm 1 and the methods")
    g.add_argument("--rounds", "-R", type=int, default=4)
    g.add_argument("--warmup", type=int, default=1)
    g.add_argument("-k", type=int, default=1)
    g.add_argument("-p", type=int, default=3)
    g.add_argument("--gamma", type=float, default=1.0)
    g.add_argument("--neighbours", default="solved")
    g.add_argument("--judge", help="truth, reward or consensus, for every method")
    g.add_argument("--judge-threshold", type=float, default=0.7)
    g.add_argument("--judge-model", default="sim", help="sim, openai:MODEL or gemini:MODEL")
    g.add_argument("--difficulty-model", default="sim", help="da's rater: as --judge-model")
    g.add_argument("--judge-temperature", type=float, help="the role models' temperature")
    g.add_argument("--noise", type=float, default=0.0, help="flip verdicts (the paper: 0.05)")
    g.add_argument("--consensus", type=float, default=0.75)
    g.add_argument("--fewshot", type=Path, help="fixed-icl's few-shot JSONL")
    g.add_argument(
        "--match-to",
        choices=("elim", "adpt", "none"),
        default="elim",
        help="unif and da match this method's output tokens (the paper: elim)",
    )
    g.add_argument("--embedder", default="auto", help="auto, minilm, lexical, gemini, openai")
    g = p.add_argument_group("provider, decoding and limits")
    g.add_argument("--provider", choices=("sim", "openai", "gemini"), default="sim")
    g.add_argument("--model")
    g.add_argument("--base-url")
    g.add_argument("--api-key-env")
    g.add_argument("--temperature", type=_decoding(float), default=UNSET)
    g.add_argument("--top-p", type=_decoding(float), default=UNSET)
    g.add_argument("--top-k", type=_decoding(int), default=UNSET)
    g.add_argument("--max-tokens", type=_decoding(int), default=UNSET)
    g.add_argument("--thinking-budget", type=_decoding(int), default=UNSET)
    g.add_argument("--reasoning-effort", default=UNSET)
    g.add_argument("--verbosity", default=UNSET)
    g.add_argument("--concurrency", type=int, default=64)
    g.add_argument("--rpm", type=float)
    g.add_argument("--tpm", type=float)
    g.add_argument("--timeout", type=float, default=300.0)
    g.add_argument("--max-attempts", type=int, default=6)
    g.add_argument("--workers", type=int, default=2, help="verifier processes")
    g.add_argument(
        "--price",
        metavar="IN,OUT[,THINK]",
        help="USD per million tokens (the list price; default: the price table's)",
    )
    g.add_argument("--cache", type=Path, help="response cache (default: DIR/responses.sqlite3)")
    g.add_argument("--no-cache", action="store_true")
    g = p.add_argument_group("sim provider (measures the machinery, not the method)")
    g.add_argument("--sim-ability", type=float, default=0.0)
    g.add_argument("--sim-thinking", type=float, default=0.0)
    g.add_argument("--sim-latency", type=float, default=0.0)
    g.add_argument("--sim-icl-gain", type=float, default=1.0, help="0: demonstrations never help")
    add_batch_flags(p)
    return p


def paper_sampling(args: argparse.Namespace) -> Sampling:
    """Appendix A's decoding for this provider and model, with the flags given on top."""
    reasoning = args.provider == "openai" and bool(REASONING_MODEL.match(args.model or ""))
    paper: dict[str, Any] = {} if reasoning else dict(PAPER_SAMPLING)
    if reasoning:
        paper.update(reasoning_effort="medium", verbosity="medium")
    paper["max_output_tokens"] = MAX_TOKENS.get(args.provider)
    given = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "max_output_tokens": args.max_tokens,
        "thinking_budget": args.thinking_budget,
        "reasoning_effort": args.reasoning_effort,
        "verbosity": args.verbosity,
    }
    values = {k: paper.get(k) if v is UNSET else v for k, v in given.items()}
    for key in ("reasoning_effort", "verbosity"):
        if values[key] == "default":
            values[key] = None
    return Sampling(**values)


def _names(text: str, flag: str, known: Sequence[str], word: str) -> tuple[str, ...]:
    """A comma list of names, each one of `known` (`all` for --methods)."""
    names = tuple(known if flag == "--methods" and text == "all" else _list(text))
    for name in names:
        if name not in known:
            raise ConfigError(f"{flag}: unknown {word} {name!r}; choose from {', '.join(known)}")
    return names


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in _list(text))
    except ValueError:
        raise ConfigError(f"--seeds: expected a comma list of integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: expected distinct integers, got {text!r}")
    return seeds


def _limits(text: str | None, provider: str) -> dict[str, int | None]:
    """--limit per suite: the sim's small defaults, every question, or the first N."""
    if text is None:
        return dict(SIM_LIMITS) if provider == "sim" else dict.fromkeys((*SUITES, *EXTRA_SUITES))
    try:
        return dict.fromkeys(
            (*SUITES, *EXTRA_SUITES), parse_limit(text)
        )  # as `ttc run --limit` reads it
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--limit: {exc}") from None


def options_from(args: argparse.Namespace, argv: Sequence[str]) -> GridOptions:
    """The grid's options from its flags; every method's settings checked before anything runs."""
    suites = _names(args.suites, "--suites", (*SUITES, *EXTRA_SUITES), "suite")
    methods = _names(args.methods, "--methods", PRESETS, "method")
    if not suites or not methods:
        raise ConfigError("--suites and --methods: name at least one of each")
    if args.judge == "consensus" and "adpt" in methods and "sc" in methods:
        # adpt judged by consensus is sc: the same strategy, so the same samples and rows.
        raise ConfigError(
            "--methods: with --judge consensus adpt is judged by consensus too, which is sc "
            "(the same strategy: identical rows); name sc alone for Ours (SC), as "
            "docs/paper.md's self-consistency ablation does, or drop --judge consensus"
        )
    matched = any(m in MATCHED for m in methods)
    if args.match_to != "none" and matched and args.match_to not in methods:
        raise ConfigError(
            f"--match-to {args.match_to}: unif and da match its output tokens, so it must be "
            "in --methods (or give --match-to none)"
        )
    seeds = _seeds(args.seeds)
    limits = _limits(args.limit, args.provider)
    if args.batch and args.provider == "sim":
        raise ConfigError(
            "--batch: the sim provider has no Batch API; use --provider openai or gemini (a "
            "rehearsal: `ttc serve`, then --provider openai --base-url URL --model sim)"
        )
    cache = None if args.no_cache else (args.cache or args.out / "responses.sqlite3")
    opts = GridOptions(
        suites=suites,
        methods=methods,
        seeds=seeds,
        out=args.out,
        sampling=paper_sampling(args),
        limits=limits,
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        per_task=args.per_task,
        data_dir=args.data_dir,
        hub=args.hub,
        lcb_data=args.lcb_data,
        lcb_start=args.lcb_start,
        lcb_end=args.lcb_end,
        rounds=args.rounds,
        warmup=args.warmup,
        k=args.k,
        p=args.p,
        gamma=args.gamma,
        neighbours=args.neighbours,
        judge=args.judge,
        judge_threshold=args.judge_threshold,
        judge_model=args.judge_model,
        difficulty_model=args.difficulty_model,
        judge_temperature=args.judge_temperature,
        noise=args.noise,
        consensus=args.consensus,
        fewshot=args.fewshot,
        match_to=args.match_to,
        embedder=args.embedder,
        workers=args.workers,
        concurrency=args.concurrency,
        rpm=args.rpm,
        tpm=args.tpm,
        timeout_s=args.timeout,
        max_attempts=args.max_attempts,
        sim_ability=args.sim_ability,
        sim_thinking=args.sim_thinking,
        sim_latency=args.sim_latency,
        sim_icl_gain=args.sim_icl_gain,
        cache=cache,
        price=args.price,
        batch=batch_spec(args),
        cross=tuple(Path(d) for d in _list(args.cross_model)),
        argv=tuple(argv),
    )
    cross_model(opts.cross)  # another grid's results.json is read before anything runs
    for method in methods:  # every method's settings are checked before anything runs
        opts.config(method, seeds[0], 1)
    return opts


def report(opts: GridOptions, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The tables and figures of every finished run; returns the outputs' paths."""
    runs = []
    for o in outcomes:
        if o.status != "skipped" and o.stopped is None:
            summary = read_summary(o.path)
            if summary.get("complete"):
                runs.append(Run(o.suite, o.method, o.seed, summary, o.path))
    if not runs:
        return {}
    header = header_of(opts, runs)
    header["suite_labels"] = fixture_names(outcomes)
    labels = {
        m: f"{m} (matched to {opts.match_to}'s output tokens)"
        for m in MATCHED
        if opts.match_to != "none"
    }
    suites = by_suite(runs, opts.methods)
    md, js = write_tables(suites, opts.methods, header, opts.out, cross_model(opts.cross))
    figures = write_figures(suites, opts.out, header, labels, opts.methods)
    return {"results_md": str(md), "results_json": str(js), "figures": figures}


def fixture_names(outcomes: Sequence[Outcome]) -> dict[str, str]:
    """The suites whose runs ran on the LiveCodeBench test fixture (or its first N problems), as
    their config.json's test-set checksum says: tables and figures call them a fixture."""
    names: dict[str, str] = {}
    for o in outcomes:
        if o.suite not in ("livecodebench", "mixed") or o.status == "skipped" or o.suite in names:
            continue
        config = orjson.loads((o.path / "config.json").read_bytes())
        if o.suite == "mixed":
            lcb = config.get("invocation", {}).get("data", {}).get("sources", {})
            if lcb.get("livecodebench", {}).get("file") == str(LCB_FIXTURE):
                names[o.suite] = "Mixed (LiveCodeBench fixture, MATH-500, GPQA)"
            continue
        n = int(config.get("items", 0))
        if config.get("items_sha256") == items_sha256(_fixture_items()[:n]):
            names[o.suite] = f"livecodebench fixture ({n} problems)"
    return names


def _fixture_items() -> list[Item]:
    spec = SuiteSpec(name="livecodebench", data=LCB_FIXTURE, lcb_start=None, lcb_end=None)
    return suite_and_items(spec)[1]


def header_of(opts: GridOptions, runs: Sequence[Run]) -> dict[str, Any]:
    simulated = any(bool(r.summary.get("simulated")) for r in runs)
    header: dict[str, Any] = {
        "simulated": simulated,
        "provider": opts.provider,
        # The simulator's model name carries a digest of its knobs (the seed too): drop it.
        "model": str(runs[0].summary.get("model", opts.model)).split("@")[0],
        "seeds": list(opts.seeds),
        "rounds": opts.rounds,
        "k": opts.k,
        # --judge for every method (None: each method's own), for the panels' titles.
        "judge": opts.judge,
        "decoding": dataclasses.asdict(opts.sampling),
        "matched": (
            f"unif and da match {opts.match_to}'s output tokens" if opts.match_to != "none" else ""
        ),
    }
    costs = [r.summary.get("total_cost_usd", r.summary.get("cost_usd")) for r in runs]
    header["cost_usd"] = None if None in costs else round(sum(float(c) for c in costs), 6)
    if opts.batch is not None:
        off = 0.5 if opts.batch.discount is None else opts.batch.discount
        header["batch"] = f"the Batch API's tokens at the batch rate, {100 * off:g}% off list"
    if simulated:
        header["note"] = SIM_BANNER
    return header


async def run(
    opts: GridOptions, make_provider: ProviderFactory | None = None, *, signals: bool = False
) -> dict[str, Any]:
    """Runs the grid and writes its outputs; returns the JSON line's content."""
    started = time.perf_counter()
    grid = Grid(opts, make_provider)
    if signals:
        _on_signals(grid)
    outcomes = await grid.run()
    outputs = report(opts, outcomes)
    done = [o for o in outcomes if o.status != "skipped"]
    line: dict[str, Any] = {
        "benchmark": "paper",
        "simulated": opts.simulated,
        "suites": list(opts.suites),
        "methods": list(opts.methods),
        "seeds": list(opts.seeds),
        "provider": opts.provider,
        "model": SimProvider.model if opts.simulated else opts.model,
        "runs": len(done),
        "runs_ran": sum(o.status == "ran" for o in done),
        "runs_reused": sum(o.status == "complete" for o in done),
        "skipped": [f"{o.suite}/seed{o.seed}/{o.method}: {o.why}" for o in outcomes if o.why],
        "warmup_shared": sorted({f"{o.method}<-{o.warmup_from}" for o in done if o.warmup_from}),
        "requests": sum(o.requests for o in done),
        "sent": sum(o.sent for o in done),
        "cost_usd": total_cost(outcomes),
        "decoding": dataclasses.asdict(opts.sampling),
        "limits": {s: opts.limits.get(s) for s in opts.suites},
        "data": data_sources(outcomes),
        "wall_s": round(time.perf_counter() - started, 1),
        "out": str(opts.out),
        "outputs": outputs,
        "stopped": None if grid.stopping is None else grid.stopping.message,
        # 0, or the exit code of the reason the grid stopped (3 budget, 4 provider, 130 Ctrl-C).
        "exit_code": 0 if grid.stopping is None else grid.stopping.exit_code,
    }
    if opts.simulated:
        line["note"] = SIM_BANNER
    return line


def total_cost(outcomes: Sequence[Outcome]) -> float | None:
    """What the grid's runs cost (USD, at the models' prices, role models included), or None if
    a price is unknown."""
    total = 0.0
    for o in outcomes:
        if o.status != "skipped":
            summary = read_summary(o.path)
            cost = summary.get("total_cost_usd", summary.get("cost_usd"))
            if cost is None:
                return None
            total += float(cost)
    return round(total, 4)


def _on_signals(grid: Grid) -> None:
    """First Ctrl-C: the running run stops dispatching and is written down (resumable), no new
    run starts. Second: stop at once."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    presses = 0

    def on_signal() -> None:
        nonlocal presses
        presses += 1
        if presses > 1 and task is not None:
            task.cancel()
            return
        print("paper: stopping; run the same command again to go on", file=sys.stderr)
        grid.stop("interrupted")

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        opts = options_from(args, argv)
        line = asyncio.run(run(opts, signals=True))
    except (ConfigError, DataError) as exc:
        print(f"paper: error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("paper: interrupted; run the same command again to go on", file=sys.stderr)
        return 130
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    return int(line["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
