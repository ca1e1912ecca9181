"""What the compact journal costs against a plain one, on one run directory: its size, the
journal reads of a resume, `ttc report`, and the writer's CPU per line. Prints one JSON line.

    python benchmarks/memory_100k.py --questions 100000 --keep /tmp/run100k
    python benchmarks/journal_cost.py /tmp/run100k [--repeat 3]

Both forms hold the same lines: the run directory's journal (compact, as a run writes it) and a
plain copy of it made here (`journal_text`, as every journal before was written), in a copy of
the run directory. For each form, alternating, `--repeat` times (the median is reported):
- `resume_read_s`: the journal reads a resume makes before it sends anything: its samples
  (`completed_samples`), and two passes over every line (the sessions' wall clock and the
  difficulty ratings: `read_journal`, `read_events` of one kind);
- `report_s`: `ttc report RUN_DIR -q` in a process of its own (its start-up included);
- `write_cpu_us_per_line`: every line appended again through `Journal` (as events) and closed:
  CPU of the whole process (the writer thread's compression included) per line, and of the
  appending thread alone (the event loop's, in a run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ttc.engine.journal import (
    DifficultyRated,
    Journal,
    completed_samples,
    decode,
    journal_text,
    read_events,
    read_journal,
)


def resume_reads(path: Path) -> None:
    completed_samples(path)
    for _ in read_journal(path):
        pass
    for _ in read_events(path, frozenset({DifficultyRated.KIND})):
        pass


def report(run_dir: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "ttc.engine.cli", "report", str(run_dir), "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def rewrite(source: Path, out: Path, *, compact: bool) -> dict[str, float]:
    """Every event of `source` appended again to `out`: CPU per line (process, this thread)."""
    events = [decode(fields) for fields in read_journal(source)]
    cpu, mine = time.process_time(), time.thread_time()
    with Journal(out, compact=compact) as journal:
        for event in events:
            journal.append(event)
    cpu, mine = time.process_time() - cpu, time.thread_time() - mine
    return {
        "process": round(cpu / len(events) * 1e6, 2),
        "appending_thread": round(mine / len(events) * 1e6, 2),
    }


def timed(fn: Callable[[Path], Any], arg: Path) -> float:
    started = time.perf_counter()
    fn(arg)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    compact_dir: Path = args.run_dir
    with tempfile.TemporaryDirectory(prefix="ttc-journal-cost-") as tmp:
        plain_dir = Path(tmp) / "plain"
        shutil.copytree(compact_dir, plain_dir, ignore=shutil.ignore_patterns("journal.jsonl"))
        with (plain_dir / "journal.jsonl").open("wb") as fh:
            for raw in journal_text(compact_dir / "journal.jsonl"):
                fh.write(raw)
        dirs = {"compact": compact_dir, "plain": plain_dir}
        reads: dict[str, list[float]] = {form: [] for form in dirs}
        reports: dict[str, list[float]] = {form: [] for form in dirs}
        for _ in range(args.repeat):
            for form, run_dir in dirs.items():
                reads[form].append(timed(resume_reads, run_dir / "journal.jsonl"))
                reports[form].append(timed(report, run_dir))
        writes = {
            form: rewrite(run_dir / "journal.jsonl", Path(tmp) / f"{form}.jsonl", compact=c)
            for (form, run_dir), c in zip(dirs.items(), (True, False), strict=True)
        }
        sizes = {form: (d / "journal.jsonl").stat().st_size for form, d in dirs.items()}
        lines = sum(1 for _ in journal_text(compact_dir / "journal.jsonl"))
    line = {
        "benchmark": "journal_cost",
        "run_dir": str(compact_dir),
        "lines": lines,
        "journal_mb": {form: round(size / 2**20, 1) for form, size in sizes.items()},
        "ratio": round(sizes["plain"] / sizes["compact"], 2),
        "resume_read_s": {form: round(statistics.median(v), 2) for form, v in reads.items()},
        "report_s": {form: round(statistics.median(v), 2) for form, v in reports.items()},
        "write_cpu_us_per_line": writes,
        "repeat": args.repeat,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
