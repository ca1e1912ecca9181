"""The commands around runs that start no engine: `ttc verify` (judge responses made elsewhere),
`ttc report` (tables and a plot of run directories) and `ttc serve` (the sim model behind a
local OpenAI- and Gemini-compatible API)."""

from __future__ import annotations

import argparse
import asyncio
import signal

from ttc.engine.cli._spec import SuiteSpec
from ttc.engine.cli._wiring import make_suite, suite_and_items


async def cmd_verify(args: argparse.Namespace) -> int:
    """`ttc verify --responses FILE`: one verdict line per response line."""
    from ttc.engine.cli._rescore import rescore

    suite = make_suite(SuiteSpec.from_args(args))
    out = args.out or args.responses.with_suffix(".verdicts.jsonl")
    summary = await rescore(suite, args.responses, out, workers=args.workers, gamma=args.gamma)
    share = summary.passed / summary.judged if summary.judged else 0.0
    print(
        f"{summary.judged} responses judged by the {suite.name} verifier: "
        f"{summary.passed} passed ({100 * share:.1f}%); verdicts: {summary.out}"
    )
    return 0


async def cmd_report(args: argparse.Namespace) -> int:
    """`ttc report RUN_DIR...`: per-round tables, and a plot with --plot."""
    from ttc.engine.cli._runreport import report

    print(report(args.run_dirs, args.plot))
    if args.plot is not None:
        print(f"plot: {args.plot}")
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
