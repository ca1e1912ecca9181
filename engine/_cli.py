"""The `ttc` command: `ttc run` and `ttc compare`.

This is the only place that starts an event loop (`asyncio.run`); the library never does.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import orjson

from ttc.engine._config import METHODS, NEIGHBOUR_MODES, RunConfig
from ttc.engine._engine import SIM_NOTE, Engine, RunResult
from ttc.engine._errors import ConfigError, DataError
from ttc.engine._journal import read_journal
from ttc.engine._report import compare_table, plot_coverage, round_row, round_table
from ttc.engine._types import Item, Provider, Sampling, Suite

log = logging.getLogger("ttc")

SUITES = ("reasoning_gym", "math500", "minerva", "gpqa", "livecodebench", "custom")
PROVIDERS = ("sim",)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad value is one line naming the flag, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ttc: error: {message}\n")


def _number(
    kind: type[int] | type[float], low: float, inclusive: bool = True, high: float | None = None
) -> Callable[[str], Any]:
    word = "an integer" if kind is int else "a number"
    bound = f">= {low:g}" if inclusive else f"> {low:g}"
    if high is not None:
        bound += f" and <= {high:g}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {word} {bound}, got {text!r}") from None
        # Written so that NaN, which fails every comparison, is refused too.
        in_range = value >= low if inclusive else value > low
        if high is not None:
            in_range = in_range and value <= high
        if not (in_range and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {word} {bound}, got {text!r}")
        return value

    return parse


def _add_suite(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--suite", choices=SUITES, default="reasoning_gym", help="task suite")
    g.add_argument("--data", type=Path, help="the suite's data file (all suites but reasoning_gym)")
    g.add_argument("--suite-config", type=Path, help="JSON/TOML config of a custom suite")
    g.add_argument(
        "--per-task",
        type=_number(int, 1),
        default=100,
        help="Reasoning Gym problems per task (default 100: the paper's 400)",
    )
    g.add_argument(
        "--lcb-start",
        type=_date,
        default="2024-10-05",
        help="LiveCodeBench: first release date (default: the paper's window)",
    )
    g.add_argument(
        "--lcb-end",
        type=_date,
        default="2025-01-04",
        help="LiveCodeBench: last release date, included",
    )


def _date(text: str) -> str:
    import datetime

    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}") from None
    return text


def _add_common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("test set")
    _add_suite(g)
    g.add_argument("--limit", type=_number(int, 1), help="use only the first N questions")
    g = p.add_argument_group("Algorithm 1")
    g.add_argument("--rounds", "-R", type=_number(int, 1), default=4, help="total rounds R")
    g.add_argument("--warmup", type=_number(int, 0), default=1, help="warm-up rounds R_warm")
    g.add_argument("-k", type=_number(int, 1), default=1, help="samples per question per round")
    g.add_argument("-p", type=_number(int, 0), default=3, help="neighbours per prompt P")
    g.add_argument(
        "--gamma",
        type=_number(float, 0, inclusive=False),
        default=1.0,
        help="elimination threshold γ",
    )
    g.add_argument("--seed", type=int, default=0, help="run seed (sampling seeds, rand, sim)")
    g.add_argument(
        "--neighbours",
        choices=NEIGHBOUR_MODES,
        default="solved",
        help="solved: top-P among solved (default); fixed: fixed once among all",
    )
    g.add_argument("--embedder", choices=("auto", "minilm", "lexical"), default="auto")
    g = p.add_argument_group("provider and limits")
    g.add_argument("--provider", choices=PROVIDERS, default="sim")
    g.add_argument("--concurrency", type=_number(int, 1), default=64, help="requests in flight")
    g.add_argument("--rpm", type=_number(float, 0, inclusive=False), help="requests per minute")
    g.add_argument("--tpm", type=_number(float, 0, inclusive=False), help="tokens per minute")
    g.add_argument(
        "--timeout",
        type=_number(float, 0, inclusive=False),
        default=300.0,
        help="seconds per attempt",
    )
    g.add_argument("--max-attempts", type=_number(int, 1), default=6, help="attempts per sample")
    g.add_argument("--workers", type=_number(int, 0), default=2, help="verifier processes")
    g.add_argument("--temperature", type=_number(float, 0), help="sampling temperature")
    g.add_argument("--top-p", type=_number(float, 0, inclusive=False, high=1), help="nucleus top_p")
    g.add_argument("--top-k", type=_number(int, 1), help="top_k")
    g.add_argument("--max-tokens", type=_number(int, 1), help="output token limit per request")
    g = p.add_argument_group("sim provider (offline; measures the machinery, not the method)")
    g.add_argument(
        "--sim-latency",
        type=_number(float, 0),
        default=0.0,
        help="median latency in seconds (default 0: no waiting)",
    )
    g.add_argument(
        "--sim-ability", type=_number(float, -math.inf), default=0.0, help="logit offset of success"
    )
    g.add_argument(
        "--sim-thinking",
        type=_number(float, 0),
        default=0.0,
        help="thinking tokens per output token",
    )
    p.add_argument("--out", type=Path, help="run directory (default: runs/<timestamp>-<method>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run in --out: send only the samples it has no response for",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no per-round log lines")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ttc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run one method over a test set")
    run.add_argument("--method", choices=METHODS, default="adpt")
    _add_common(run)
    cmp = sub.add_parser("compare", help="run unif/elim/rand/adpt sharing one warm-up")
    _add_common(cmp)
    ver = sub.add_parser(
        "verify", help="judge responses produced elsewhere with a suite's verifier"
    )
    _add_suite(ver.add_argument_group("test set"))
    ver.add_argument(
        "--responses",
        type=Path,
        required=True,
        help='JSONL, one {"id": ..., "response": ...} per line',
    )
    ver.add_argument(
        "--out", type=Path, help="verdicts JSONL (default: <responses>.verdicts.jsonl)"
    )
    ver.add_argument("--workers", type=_number(int, 0), default=2, help="verifier processes")
    ver.add_argument(
        "--gamma",
        type=_number(float, 0, inclusive=False, high=1),
        default=1.0,
        help="score at which a response passes",
    )
    ver.add_argument("--quiet", "-q", action="store_true")
    return parser


def _config(args: argparse.Namespace, method: str) -> RunConfig:
    sampling = Sampling(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_output_tokens=args.max_tokens,
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
        sampling=sampling,
    )


def _make_suite(args: argparse.Namespace) -> Suite:
    from ttc.adapters._suites import SuiteOptions, make_suite

    options = SuiteOptions(
        per_task=args.per_task,
        suite_config=args.suite_config,
        start=args.lcb_start,
        end=args.lcb_end,
    )
    return make_suite(args.suite, args.data, options)


def _suite(args: argparse.Namespace) -> tuple[Suite, list[Item]]:
    suite = _make_suite(args)
    items = suite.items()
    if args.limit is not None:
        items = items[: args.limit]
    return suite, items


async def cmd_verify(args: argparse.Namespace) -> int:
    from ttc.engine._rescore import rescore

    suite = _make_suite(args)
    out = args.out or args.responses.with_suffix(".verdicts.jsonl")
    summary = await rescore(suite, args.responses, out, workers=args.workers, gamma=args.gamma)
    share = summary.passed / summary.judged if summary.judged else 0.0
    print(
        f"{summary.judged} responses judged by the {suite.name} verifier: "
        f"{summary.passed} passed ({100 * share:.1f}%); verdicts: {summary.out}"
    )
    return 0


def _provider(args: argparse.Namespace, suite: Suite, items: Sequence[Item]) -> Provider:
    from ttc.adapters import SimConfig, SimProvider

    cfg = SimConfig(
        seed=args.seed,
        ability=args.sim_ability,
        latency_s=args.sim_latency,
        thinking_ratio=args.sim_thinking,
    )
    return SimProvider(suite, items, cfg)


def _default_out(label: str) -> Path:
    base = Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    path, i = base, 1
    while path.exists():
        i += 1
        path = base.with_name(f"{base.name}-{i}")
    return path


async def _run_one(
    args: argparse.Namespace,
    method: str,
    out: Path,
    suite: Suite,
    items: list[Item],
    resume: bool = False,
) -> RunResult:
    config = _config(args, method)
    provider = _provider(args, suite, items)
    try:
        async with Engine(
            provider, suite, config, out_dir=out, embedder=args.embedder, resume=resume
        ) as engine:
            return await engine.run(items)
    finally:
        await provider.aclose()


def _print_result(result: RunResult, label: str, simulated: bool) -> None:
    print(f"\n{label}: {result.n} questions, {result.wall_s:.1f} s")
    print(round_table([round_row(s) for s in result.rounds]))
    u = result.usage
    print(
        f"coverage {100 * result.coverage:.1f}%  ({result.solved}/{result.n});  tokens: "
        f"{u.input_tokens:,} input, {u.output_tokens:,} output, {u.thinking_tokens:,} thinking"
    )
    print(f"run directory: {result.out_dir}")
    if simulated:
        print(f"note: {SIM_NOTE}")


async def cmd_run(args: argparse.Namespace) -> int:
    suite, items = _suite(args)
    out = _out_dir(args, args.method)
    result = await _run_one(args, args.method, out, suite, items, resume=args.resume)
    _print_result(result, f"{args.method} on {suite.name}", args.provider == "sim")
    return 0


async def cmd_compare(args: argparse.Namespace) -> int:
    suite, items = _suite(args)
    out = _out_dir(args, "compare")
    if not args.resume:
        _require_empty(out)
    runs: dict[str, list[dict[str, Any]]] = {}
    # elim runs first; its warm-up samples are then shared with every other method, which
    # replays them from its journal instead of sending them again (same seed, same prompts).
    order = ["elim", "unif", "rand", "adpt"]
    for method in order:
        if method != "elim" and not (out / method / "journal.jsonl").exists():
            _share_warmup(
                out / "elim" / "journal.jsonl", out / method / "journal.jsonl", args.warmup
            )
        result = await _run_one(args, method, out / method, suite, items, resume=True)
        runs[method] = [round_row(s) for s in result.rounds]
        log.info("%s: coverage %.1f%%", method, 100 * result.coverage)
    runs = {m: runs[m] for m in METHODS}
    table = compare_table(runs)
    simulated = args.provider == "sim"
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


def _out_dir(args: argparse.Namespace, label: str) -> Path:
    if args.resume and args.out is None:
        raise ConfigError("--resume: name the run directory with --out")
    out: Path = args.out or _default_out(label)
    args.out = out  # for the resume hint if the run is interrupted
    return out


def _require_empty(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out: {out} is not empty; pick a new directory")


def _share_warmup(src: Path, dst: Path, warmup_rounds: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        orjson.dumps(ev)
        for ev in read_journal(src)
        if ev["ev"] == "sample" and int(ev["round"]) <= warmup_rounds
    ]
    dst.write_bytes(b"".join(line + b"\n" for line in lines))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("ttc").setLevel(logging.WARNING if args.quiet else logging.INFO)
    commands = {"run": cmd_run, "compare": cmd_compare, "verify": cmd_verify}
    try:
        return asyncio.run(commands[args.command](args))
    except (ConfigError, DataError) as exc:
        print(f"ttc: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"ttc: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        resumable = args.command in ("run", "compare") and args.out
        hint = f"; go on with: ttc {args.command} --resume --out {args.out}" if resumable else ""
        print(f"ttc: interrupted{hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
