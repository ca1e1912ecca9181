"""`ttc export DIR --format inspect|parquet --out FILE`: a run directory (or a `ttc compare`
directory) in a format the field's tools open: an Inspect AI log, or Parquet tables.

The exports themselves are the report layer's (`report/_inspect`, `report/_parquet`); this
module reads the flags and, for an Inspect log, the questions' text: the suite the run was made
with is read again from its stored command line (offline: the data file it read, or the
questions it generates), and when it cannot be (the data file gone), the log names each
question by its id and says so.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ttc.engine import ConfigError, DataError
from ttc.engine._util import read_json
from ttc.engine.cli._spec import SuiteSpec
from ttc.engine.cli._wiring import suite_and_items

log = logging.getLogger("ttc")

FORMATS = ("inspect", "parquet")


def add_export_arguments(exp: argparse.ArgumentParser) -> None:
    """The flags of `ttc export`."""
    exp.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run directory or a `ttc compare` one"
    )
    exp.add_argument(
        "--format",
        choices=FORMATS,
        required=True,
        help="inspect: an Inspect AI log (.eval, or .json) for `inspect view`; parquet: one row "
        "per sample in --out and one per round beside it (RUN.rounds.parquet)",
    )
    exp.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the file to write; of a `ttc compare` directory, an Inspect log per method "
        "(RUN-METHOD.eval), or one Parquet file with a `method` column",
    )
    exp.add_argument("--quiet", "-q", action="store_true", help="no log lines")


def questions_of(run_dir: Path) -> dict[str, tuple[str, str]]:
    """Each question's (text, reference answer) by id, from the suite the run in `run_dir` was
    made with; empty (with a log line saying why) when the suite cannot be read again."""
    from ttc.engine.cli._parser import build_parser, command_of

    try:
        config = read_json(run_dir / "config.json")
        invocation = config.get("invocation") or {}
        argv = [str(a) for a in invocation.get("argv") or []]
        args = build_parser(command_of(argv)).parse_args(argv)
        data = (invocation.get("data") or {}).get("file")
        if data is not None:
            args.data = Path(str(data))  # the file it read, wherever the command was run from
        elif args.data is not None and not args.data.is_absolute():
            args.data = Path(str(invocation.get("cwd") or ".")) / args.data
        _, items = suite_and_items(SuiteSpec.from_args(args))
    except (ConfigError, DataError, OSError, KeyError, TypeError, SystemExit) as exc:
        log.warning(
            "%s: the questions' text could not be read again (%s); the log names them by id",
            run_dir,
            exc,
        )
        return {}
    return {item.id: (item.question, item.reference) for item in items}


def inspect_path(out: Path, method: str) -> Path:
    """Where a `ttc compare` directory's run of `method` goes: RUN.eval -> RUN-METHOD.eval."""
    return out.with_name(f"{out.stem}-{method}{out.suffix}")


async def cmd_export(args: argparse.Namespace) -> int:
    """`ttc export RUN_DIR --format F --out FILE`."""
    from ttc.engine.report._runreport import run_dirs
    from ttc.engine.report._samples import read_samples

    dirs = run_dirs(args.run_dir)
    runs = [read_samples(d) for d in dirs]
    if args.format == "parquet":
        from ttc.engine.report._parquet import write_parquet

        out, rounds, n_samples, n_rounds = write_parquet(runs, args.out)
        print(f"{n_samples} samples: {out}; {n_rounds} rounds: {rounds}")
        return 0
    from ttc.engine.report._inspect import write_inspect

    if args.out.suffix not in (".eval", ".json"):
        raise ConfigError(f"--out {args.out}: an Inspect log is a .eval or a .json file")
    compare = [args.run_dir] != dirs
    for run in runs:
        out = inspect_path(args.out, run.run.method) if compare else args.out
        n = await write_inspect(run, out, questions_of(run.run.path))
        print(f"{run.run.method}: {n} samples: {out}")
    return 0
