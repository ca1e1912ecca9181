"""Peak memory and wall time of a large run: 100,000 (or --questions) questions × 4 rounds.

Generates 100,000 Reasoning Gym questions (or --questions; decimal_arithmetic and
letter_counting, the two tasks that generate fast, half each, interleaved), then runs the whole
engine over them: method `adpt` (warm-up round, then elimination with similar solved
demonstrations), K=1, the lexical embedder (so no model dominates time or memory), two verifier
processes judging with the real reasoning-gym scorers, and a real run directory in a temporary
folder (journal, embedding cache, results, summary). The provider is the offline simulator at
zero latency, so the run is bound by the machinery alone. Prints one JSON line.

    python benchmarks/memory_100k.py [--questions 100000] [--rounds 4] [--index auto]

At 1,000,000 questions `--index auto` is an approximate ivf index (exact search would take tens
of minutes a round); the line records the index used.

Peak RSS is `getrusage(RUSAGE_SELF).ru_maxrss` of this process over the whole benchmark,
question generation included. `peak_rss_children_mb` is `RUSAGE_CHILDREN` after the verifier
pool has shut down: on Linux that is the largest single reaped child, and a child started by
fork + exec (as `spawn` does) keeps the high-water mark of the parent's pages it had at the fork,
so it reads about this process's RSS when the pool started, not what a verifier used. The
verifiers' own peaks are `verifier_hwm_mb` (VmHWM from /proc, read just before the pool shuts
down). `peak_rss_mb_by_phase` is this process's RSS sampled every 0.02 s and split by phase
(`round_t` runs from the end of round t-1 to the end of round t, so it holds the FAISS
additions of round t-1's barrier and round t's retrieval planning; `finish` is results.jsonl
and summary.json); a short spike between two samples can be missed there, never in
`peak_rss_mb`. Simulated: it measures the machinery, never the method.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import re
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters import LexicalEmbedder, ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, Item, RunConfig, RunResult
from ttc.engine.contract import INDEXES, FloatArray

TASKS = ("decimal_arithmetic", "letter_counting")
# The targets set for this 2-core machine: 100,000 questions in 1 GB and 10 minutes, a million in
# 4 GB and an hour (issue 14).
AIMS = {
    100_000: {"peak_rss_mb": 1024, "wall_s": 600},
    1_000_000: {"peak_rss_mb": 4096, "wall_s": 3600},
}
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def maxrss_mb(who: int) -> float:
    """ru_maxrss in MiB (Linux reports kilobytes)."""
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def current_rss_mb() -> float:
    """This process's resident set size now, from /proc/self/statm."""
    with open("/proc/self/statm") as fh:
        return round(int(fh.read().split()[1]) * PAGE_MB, 1)


def children_hwm_mb() -> dict[str, float]:
    """VmHWM (peak RSS) of each live child process, keyed by pid and role."""
    pids: list[str] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += (task / "children").read_text().split()
        except OSError:
            continue
    out: dict[str, float] = {}
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # exited meanwhile
        role = "resource_tracker" if "resource_tracker" in cmdline else "verifier"
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                out[f"{role}:{pid}"] = round(int(line.split()[1]) / 1024, 1)
    return out


class PhaseSampler:
    """Samples this process's RSS in a thread and keeps the peak of each phase.

    Phases move on with the engine's own log lines: the round summary it logs at each round's end.
    """

    def __init__(self, every_s: float = 0.02) -> None:
        self.every_s = every_s
        self.phase = "generation"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()

    def enter(self, phase: str) -> None:
        self.sample()
        self.phase = phase
        self.sample()

    def sample(self) -> None:
        rss = current_rss_mb()
        phase = self.phase
        if rss > self.peaks.get(phase, 0.0):
            self.peaks[phase] = rss

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()


class RoundEnds(logging.Handler):
    """Moves the sampler to the next phase when the engine logs a round's summary line."""

    def __init__(self, sampler: PhaseSampler, rounds: int) -> None:
        super().__init__(logging.INFO)
        self.sampler = sampler
        self.rounds = rounds

    def emit(self, record: logging.LogRecord) -> None:
        # The engine's line: "round 2/4: 66645 active, ...".
        match = re.match(r"round (\d+)/\d+: ", record.getMessage())
        if match is None:
            return
        done = int(match.group(1))
        self.sampler.enter(f"round_{done + 1}" if done < self.rounds else "finish")


class TimedEmbedder:
    """The lexical embedder (what `embedder="lexical"` builds), timing its calls.

    The engine embeds in a worker thread while the warm-up round runs, so the time is the wall
    time of the embedding calls, slowed by whatever else the process does meanwhile.
    """

    def __init__(self) -> None:
        self._inner = LexicalEmbedder()
        self.name = self._inner.name
        self.dim = self._inner.dim
        self.batch_size = self._inner.batch_size
        self.seconds = 0.0
        self.texts = 0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> FloatArray:
        started = time.perf_counter()
        out = self._inner.embed(texts)
        with self._lock:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)
        return out


def generate(questions: int) -> tuple[ReasoningGymSuite, list[Item]]:
    """`questions` items, half of each task, interleaved."""
    suite = ReasoningGymSuite(per_task=math.ceil(questions / len(TASKS)), tasks=TASKS)
    return suite, suite.items()[:questions]


@dataclass
class Measures:
    """What the run records as it goes: RSS at its milestones, the verifiers' high-water marks,
    the per-phase sampler, and the run's result."""

    sampler: PhaseSampler
    rss: dict[str, float]
    children: dict[str, float] = field(default_factory=dict)
    results: list[RunResult] = field(default_factory=list)


async def run(
    suite: ReasoningGymSuite,
    items: list[Item],
    config: RunConfig,
    out: Path,
    embedder: TimedEmbedder,
    measures: Measures,
) -> float:
    """Runs the engine; the result goes into `measures`, the verifiers' start-up time is returned.

    The result is not returned: on Python 3.11 `asyncio.run` builds the repr of its main task's
    result when it restores the SIGINT handler (CPython issue #112559), and the dataclass repr of
    a RunResult spells out every item and record, hundreds of MB at 100,000 questions.
    """
    provider = SimProvider(suite, items, SimConfig(seed=1, latency_s=0.0))
    async with Engine(provider, suite, config, out_dir=out, embedder=embedder) as engine:
        # The verifier processes (a couple of seconds to spawn and import reasoning-gym) are
        # started before the clock starts, as in engine_throughput.
        warm = time.perf_counter()
        await engine.verifiers.ready()
        startup = time.perf_counter() - warm
        measures.rss["verifiers_ready"] = current_rss_mb()
        # set-up, embedding (a thread) and the warm-up round
        measures.sampler.enter("round_1")
        result = await engine.run(items)
        measures.sampler.enter("pool_shutdown")
        measures.rss["run_end"] = current_rss_mb()
        measures.children.update(children_hwm_mb())
    measures.results.append(result)
    return startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--index", choices=INDEXES, default="auto", help="the FAISS index (ttc run --index)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the run directory here and keep it"
    )
    args = parser.parse_args()
    if args.questions < 1 or args.rounds < 1:
        parser.error("--questions and --rounds must be at least 1")
    if not args.quiet:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger("ttc").addHandler(handler)
        logging.getLogger("ttc").setLevel(logging.INFO)

    sampler = PhaseSampler()
    logging.getLogger("ttc").addHandler(RoundEnds(sampler, args.rounds))
    logging.getLogger("ttc").setLevel(logging.INFO)
    load_start = os.getloadavg()[0]
    rss: dict[str, float] = {"start": current_rss_mb()}
    sampler.start()
    bench_started = time.perf_counter()
    suite, items = generate(args.questions)
    generation_s = time.perf_counter() - bench_started
    rss["generated"] = current_rss_mb()
    embedder = TimedEmbedder()
    measures = Measures(sampler, rss)

    with tempfile.TemporaryDirectory(prefix="ttc-memory-") as tmp:
        out = args.keep if args.keep is not None else Path(tmp) / "run"
        config = RunConfig(
            method="adpt", rounds=args.rounds, k=1, verifier_workers=2, index=args.index
        )
        startup = asyncio.run(run(suite, items, config, out, embedder, measures))
        result = measures.results[0]
        index = orjson.loads((out / "config.json").read_bytes())["index"]
        journal = out / "journal.jsonl"
        journal_bytes = journal.stat().st_size if journal.exists() else 0
        journal_compact = False  # a plain journal opens with "{"; a compact one does not
        if journal_bytes:
            with journal.open("rb") as fh:
                journal_compact = fh.read(1) != b"{"
        run_dir_mb = sum(p.stat().st_size for p in out.iterdir() if p.is_file()) / 2**20
    wall = time.perf_counter() - bench_started
    sampler.stop()

    aims = AIMS.get(len(items))
    phase_s: dict[str, Any] = {
        "generation": round(generation_s, 3),
        "verifier_startup": round(startup, 3),
        "rounds": [round(stats.wall_s, 3) for stats in result.rounds],
        "engine_run": round(result.wall_s, 3),
    }
    if embedder.texts:
        phase_s["embedding"] = round(embedder.seconds, 3)
    requests = sum(stats.requests for stats in result.rounds)
    line = {
        "benchmark": "memory_100k",
        "simulated": True,
        "note": "sim provider at zero latency: measures the machinery, not the method",
        "suite": f"reasoning_gym {'+'.join(TASKS)}",
        "method": "adpt",
        "embedder": embedder.name,
        "verifier_workers": 2,
        "questions": len(items),
        "rounds": args.rounds,
        "index": index,
        "requests": requests,
        "requests_per_round": [stats.requests for stats in result.rounds],
        "wall_s": round(wall, 3),
        "requests_per_s": round(requests / result.wall_s, 1) if result.wall_s else None,
        "peak_rss_mb": maxrss_mb(resource.RUSAGE_SELF),
        "peak_rss_children_mb": maxrss_mb(resource.RUSAGE_CHILDREN),
        "verifier_hwm_mb": measures.children,
        "peak_rss_mb_by_phase": sampler.peaks,
        "rss_mb": rss,
        "coverage": round(result.coverage, 4),
        "output_tokens": result.usage.output_tokens,
        "journal_mb": round(journal_bytes / 2**20, 1),
        "journal_bytes_per_question": round(journal_bytes / len(items)),
        "journal_compact": journal_compact,
        "run_dir_mb": round(run_dir_mb, 1),
        "phase_s": phase_s,
        "loadavg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "aims": aims,
    }
    if aims is not None:
        line["targets_met"] = line["peak_rss_mb"] <= aims["peak_rss_mb"] and wall <= aims["wall_s"]
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
