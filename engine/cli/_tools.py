"""The commands around runs that start no engine: `ttc verify` (judge responses made elsewhere),
`ttc report` (tables and a plot of run directories) and `ttc serve` (the sim model behind a
local OpenAI- and Gemini-compatible API), and their flags."""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from ttc.engine import ConfigError, DataError
from ttc.engine.cli._parser import add_limit, add_suite
from ttc.engine.cli._provider_flags import add_workers
from ttc.engine.cli._spec import SuiteSpec
from ttc.engine.cli._usage import share
from ttc.engine.cli._wiring import make_suite, suite_and_items

# The suite `ttc verify` judges with when --suite is not given (it says so).
VERIFY_SUITE = "reasoning_gym"


def add_verify_arguments(ver: argparse.ArgumentParser) -> None:
    """The flags of `ttc verify`."""
    add_suite(ver.add_argument_group("test set"), suite=None)
    ver.add_argument(
        "--responses",
        type=Path,
        required=True,
        help='JSONL, one {"id": ..., "response": ...} per line',
    )
    ver.add_argument(
        "--out", type=Path, help="verdicts JSONL (default: <responses>.verdicts.jsonl)"
    )
    add_workers(ver)
    ver.add_argument("--gamma", type=share, default=1.0, help="score at which a response passes")
    ver.add_argument("--quiet", "-q", action="store_true", help="no log lines")
    ver.set_defaults(limit=None)  # every line is judged


def add_report_arguments(rep: argparse.ArgumentParser) -> None:
    """The flags of `ttc report`."""
    rep.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    rep.add_argument("--plot", type=Path, help="write the coverage-vs-output-tokens plot here")
    rep.add_argument(
        "--timeline",
        type=Path,
        help="write the run's timeline here: requests and tokens per minute against the limits, "
        "retries and 429s, in flight against the adaptive cap (one run directory)",
    )
    rep.add_argument("--quiet", "-q", action="store_true", help="no log lines")


def add_serve_arguments(srv: argparse.ArgumentParser) -> None:
    """The flags of `ttc serve`: the test set here, the server's in the simulator's package."""
    from ttc.adapters.sim import add_serve_arguments as add_server_arguments

    g = srv.add_argument_group("test set whose prompts the sim model recognises")
    add_suite(g)
    add_limit(g)
    add_server_arguments(srv)
    srv.add_argument("--quiet", "-q", action="store_true", help="no log lines")


async def cmd_verify(args: argparse.Namespace) -> int:
    """`ttc verify --responses FILE`: one verdict line per response line."""
    from ttc.engine.cli._rescore import rescore

    # Without --suite, the suite assumed is said in the summary, and in an error, which may come
    # of it (ids of another suite).
    assumed = " (no --suite given)" if args.suite is None else ""
    if args.suite is None and args.data is not None:
        # The default suite generates its questions: with a file, the suite it holds is missing.
        raise ConfigError(
            f"--suite: --data {args.data} is given but no --suite: name the suite whose "
            "questions it holds (math500, minerva, gpqa, livecodebench, custom)"
        )
    args.suite = args.suite or VERIFY_SUITE
    suite = make_suite(SuiteSpec.from_args(args))
    out = args.out or args.responses.with_suffix(".verdicts.jsonl")
    try:
        summary = await rescore(suite, args.responses, out, workers=args.workers, gamma=args.gamma)
    except DataError as exc:
        if not assumed:
            raise
        raise DataError(
            f"{exc}; judged as {suite.name}{assumed}: name the suite with --suite"
        ) from exc
    share = summary.passed / summary.judged if summary.judged else 0.0
    print(
        f"{summary.judged} responses judged by the {suite.name} verifier{assumed}: "
        f"{summary.passed} passed ({100 * share:.1f}%); verdicts: {summary.out}"
    )
    return 0


async def cmd_report(args: argparse.Namespace) -> int:
    """`ttc report RUN_DIR...`: per-round tables, and a plot with --plot."""
    from ttc.engine.report._runreport import report

    if args.timeline is not None:
        from ttc.engine.report._timeline import timeline

        if len(args.run_dirs) != 1:
            raise ConfigError("--timeline: name one run directory (its own timeline)")
        note = timeline(args.run_dirs[0], args.timeline)
    print(report(args.run_dirs, args.plot))
    if args.plot is not None:
        print(f"plot: {args.plot}")
    if args.timeline is not None:
        print(note)
    return 0


async def cmd_serve(args: argparse.Namespace) -> int:
    """`ttc serve`: until Ctrl-C or SIGTERM, which end it cleanly (exit 0)."""
    from ttc.adapters.sim import SimServer, options_from_args, serve_forever

    options = options_from_args(args)
    suite, items = suite_and_items(SuiteSpec.from_args(args))

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
