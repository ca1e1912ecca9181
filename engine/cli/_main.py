"""The `ttc` command line: signals and `main`; the flags are in _parser, the commands in
_commands (run, compare, resume), _tools (verify, report, serve) and _batch.

This is the only place that starts an event loop (`asyncio.run`); the library never does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import types
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ttc.engine import ConfigError, DataError, StopKind, TtcError, VerifierError, WriteError
from ttc.engine.cli._parser import build_parser, command_of
from ttc.engine.cli._spec import RunSpec
from ttc.engine.cli._usage import ttc_command

if TYPE_CHECKING:
    from ttc.engine.cli._commands import Session

log = logging.getLogger("ttc")

# The commands that run an engine: they take a RunSpec, and Ctrl-C stops them gracefully.
RUNS = ("run", "compare")


def _commands() -> types.ModuleType:
    """The run commands' module, loaded when a command needs it: `ttc batch` and the tools do
    not pay for the engine's imports."""
    from ttc.engine.cli import _commands as commands

    return commands


def _on_signals(grace_s: float, session: Session) -> None:
    """First Ctrl-C (or SIGTERM): stop dispatching, let requests in flight finish for up to
    `grace_s`, write everything down. Second Ctrl-C: stop at once. Either way the run directory
    stays resumable."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    presses = 0

    def first() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            task.cancel()
            return
        session.stop("interrupted")
        print(
            f"\nttc: stopping: no new requests; waiting up to {grace_s:g} s for those in "
            "flight (Ctrl-C again to stop at once)",
            file=sys.stderr,
        )
        loop.call_later(grace_s, cancel_if_running)

    def cancel_if_running() -> None:
        # Past the grace period, cut off requests still in flight; a run already writing
        # its results is left to finish them.
        if session.running:
            task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, first)


async def _dispatch(args: argparse.Namespace, spec: RunSpec | None) -> int:
    if spec is not None:
        commands = _commands()
        session = commands.Session()
        _on_signals(spec.grace_s, session)
        if spec.verifier_workers == 0:  # allowed, but never in silence
            log.info(
                "--workers 0: responses are judged in this process, on the event loop's thread "
                "(fine for math, GPQA and Reasoning Gym; slow for code)"
            )
        if args.command == "ablate":
            from ttc.engine.cli._ablate import cmd_ablate

            return await cmd_ablate(spec, session, args)
        runs = {"run": commands.cmd_run, "compare": commands.cmd_compare}
        code: int = await runs[args.command](spec, session)
        return code
    # batch installs its own Ctrl-C handling (it has no engine to stop). Each tool's module is
    # loaded alone: `ttc batch` does not load the suites `ttc verify` needs.
    tool: Callable[[argparse.Namespace], Awaitable[int]]
    if args.command == "batch":
        from ttc.engine.cli._batch import cmd_batch as tool
    elif args.command == "export":
        from ttc.engine.cli._export import cmd_export as tool
    elif args.command == "ctl":
        from ttc.engine.cli._control import cmd_ctl as tool
    else:
        from ttc.engine.cli import _tools

        tool = {
            "verify": _tools.cmd_verify,
            "report": _tools.cmd_report,
            "serve": _tools.cmd_serve,
        }[args.command]
    return await tool(args)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]] | int:
    """The parsed flags and the command line; for `resume`, the command line that made the run
    with the extra flags on top, in its directory (`ablate`: its own flags, with that command
    line as `args.stored`). An int: the exit code of a refusal."""
    parser = build_parser(command_of(argv))
    if command_of(argv) == "ablate":  # its own flags; the others change the run's (as resume's)
        args, extra = parser.parse_known_args(argv)
        stored = _stored_run(args.run_dir, extra, "ablate")
        if isinstance(stored, int):
            return stored
        args.stored, args.stored_argv = stored
        return args, argv
    args = parser.parse_args(argv)
    if args.command != "resume":
        return args, argv
    return _stored_run(args.run_dir, args.extra)


def _stored_run(
    run_dir: Path, extra: list[str], command: str = "resume"
) -> tuple[argparse.Namespace, list[str]] | int:
    """The command line that made the run in `run_dir`, with `extra` on top and --resume,
    parsed, in the run's directory; an int: the exit code of a refusal (said on stderr)."""
    commands = _commands()
    try:
        argv, cwd = commands.resume_argv(run_dir, extra)
    except (ConfigError, DataError) as exc:
        print(f"ttc: error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser(command_of(argv))  # the stored run's command: run or compare
    stored = parser.parse_args(commands.resume_argv(run_dir, [])[0])
    given = parser.parse_args([argv[0], *extra])
    refusal = commands.untrusted_settings(run_dir, stored, given, parser.parse_args([argv[0]]))
    if refusal is not None:
        print(f"ttc: error: {refusal}", file=sys.stderr)
        return 2
    if Path(cwd).is_dir():
        os.chdir(cwd)
    resumed = parser.parse_args(argv)
    withheld = commands.withheld_credential(resumed)
    if withheld is not None:
        print(
            f"ttc: error: {withheld}: the run's URL held a credential, which is never stored; "
            f"give it again: {ttc_command()} {command} {run_dir} {withheld} URL",
            file=sys.stderr,
        )
        return 2
    return resumed, argv


def first_write_error(exc: BaseException) -> WriteError | None:
    """The first write that failed behind `exc`: itself, one in its group, or one that an error
    while cleaning up interrupted (a full disk fails the journal first, then the summary)."""
    found = first_error(exc, WriteError)
    return found if isinstance(found, WriteError) else None


def first_error(
    exc: BaseException, kinds: type[TtcError] | tuple[type[TtcError], ...]
) -> TtcError | None:
    """The first error of `kinds` behind `exc`: itself, one in its group (a task's), or one that
    an error while cleaning up interrupted."""
    found: TtcError | None = None
    todo, seen = [exc], set()
    while todo:
        error = todo.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, kinds):
            found = error  # the deeper in the context chain, the earlier it failed
        if isinstance(error, BaseExceptionGroup):
            todo.extend(error.exceptions)
        if error.__context__ is not None:
            todo.append(error.__context__)
    return found


def _go_on(args: argparse.Namespace, spec: RunSpec | None) -> str:
    """How to go on after a failed write: nothing written before it is lost."""
    if args.command == "ablate":
        return f"go on with: {ttc_command()} ablate {args.run_dir}"
    if spec is not None and spec.out is not None:
        return f"go on with: {ttc_command()} resume {spec.out}"
    return "run the same command again (it resumes from its journal)"


def _spec_of(args: argparse.Namespace) -> RunSpec | None:
    """The RunSpec of a command that runs engines: its own, or (`ablate`) the run's: its
    provider, limits and cache."""
    if args.command == "ablate":
        return RunSpec.from_args(args.stored, [a for a in args.stored_argv if a != "--resume"])
    return RunSpec.from_args(args, args.argv) if args.command in RUNS else None


def _interrupted_hint(args: argparse.Namespace, spec: RunSpec | None) -> str:
    """How to go on after Ctrl-C, when there is something to go on with."""
    if args.command == "ablate":
        return f"; {_go_on(args, spec)}"
    # A directory named by default is named in the hint once the run has made it.
    out = None if spec is None else spec.out
    resumable = out is not None and (args.out is not None or out.exists())
    return f"; go on with: {ttc_command()} resume {out}" if resumable else ""


# The cyclic collector's young generation, in container allocations (Python's default: 700).
# At zero latency a request allocates some forty containers, so at 700 the collector ran about
# a thousand times per 20,000 requests, each time moving the requests in flight to an older
# generation, whose growth then set off full collections over the whole heap: 0.5-0.8 s of CPU
# per 20,000 requests, a tenth of `ttc batch`'s and of a run's (gc.callbacks, with
# benchmarks/client_overhead.py's server). At 10,000 it runs some 90 times, each collection
# 2-3 ms, and almost nothing is promoted. The process is the command's own; a host embedding
# the engine keeps its settings (docs/library.md says how to do the same).
YOUNG_GENERATION = 10_000


def tune_collector() -> None:
    """The collector as `ttc` runs it: the start-up heap (modules, the parser) frozen out of
    every collection, and a larger young generation (`YOUNG_GENERATION`)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, old)


def console() -> int:
    """The `ttc` command as the console script and `python -m ttc.engine.cli` run it: in a
    process of its own, so with the collector tuned (`tune_collector`)."""
    tune_collector()
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """`ttc`: parses the command line, runs the command, returns its exit code."""
    parsed = _parse(list(sys.argv[1:] if argv is None else argv))
    if isinstance(parsed, int):
        return parsed
    args, argv = parsed
    args.argv = [a for a in argv if a != "--resume"]
    spec = _spec_of(args)
    # Over a live status line, a log line first clears it; the next redraw puts it back below.
    clear = "\r\x1b[K" if spec is not None and spec.live else ""
    logging.basicConfig(format=clear + "%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("ttc").setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        return asyncio.run(_dispatch(args, spec))
    except (ConfigError, DataError) as exc:
        print(f"ttc: error: {exc}", file=sys.stderr)
        return 2
    except VerifierError as exc:  # the run stopped (summary.json says why), resumable
        print(f"ttc: error: {exc}; then {_go_on(args, spec)}", file=sys.stderr)
        return StopKind.FAILED.exit_code
    except (WriteError, BaseExceptionGroup) as exc:
        error = first_write_error(exc)
        bad_input = first_error(exc, (ConfigError, DataError)) if error is None else None
        if bad_input is not None:  # raised in a task: the same one line as anywhere else
            print(f"ttc: error: {bad_input}", file=sys.stderr)
            return 2
        if error is None:
            raise
        print(
            f"ttc: error: {error}; free space (or fix the cause), then {_go_on(args, spec)}",
            file=sys.stderr,
        )
        return int(_commands().EXIT_WRITE)
    except OSError as exc:
        print(f"ttc: error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"ttc: interrupted{_interrupted_hint(args, spec)}", file=sys.stderr)
        return StopKind.INTERRUPTED.exit_code
