"""Peak memory and wall time of a large run: 100,000 questions × 4 rounds through `sim`.

Generates 100,000 Reasoning Gym questions (decimal_arithmetic and letter_counting, the two tasks
that generate fast, 50,000 each, interleaved), then runs the whole engine over them: method
`adpt` (warm-up round, then elimination with similar solved demonstrations), K=1, the lexical
embedder (so no model dominates time or memory), two verifier processes judging with the real
reasoning-gym scorers, and a real run directory in a temporary folder (journal, embedding cache,
results, summary). The provider is the offline simulator at zero latency, so the run is bound
by the machinery alone. Prints one JSON line.

    python benchmarks/memory_100k.py [--questions 100000] [--rounds 4]

Peak RSS is `getrusage(RUSAGE_SELF).ru_maxrss` of this process over the whole benchmark,
question generation included; `peak_rss_children_mb` is `RUSAGE_CHILDREN` after the verifier
pool has shut down, which on Linux is the peak of the largest single reaped child (one verifier
process), not a sum. `rss_mb` samples the current RSS (from /proc) at each phase boundary.
Simulated: it measures the machinery, never the method.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters import LexicalEmbedder, ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, Item, RunConfig, RunResult
from ttc.engine._types import FloatArray

TASKS = ("decimal_arithmetic", "letter_counting")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def maxrss_mb(who: int) -> float:
    """ru_maxrss in MiB (Linux reports kilobytes)."""
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def current_rss_mb() -> float:
    """This process's resident set size now, from /proc/self/statm."""
    with open("/proc/self/statm") as fh:
        return round(int(fh.read().split()[1]) * PAGE_MB, 1)


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


async def run(
    suite: ReasoningGymSuite,
    items: list[Item],
    rounds: int,
    out: Path,
    embedder: TimedEmbedder,
    rss: dict[str, float],
) -> tuple[RunResult, float]:
    config = RunConfig(method="adpt", rounds=rounds, k=1, verifier_workers=2)
    provider = SimProvider(suite, items, SimConfig(seed=1, latency_s=0.0))
    async with Engine(provider, suite, config, out_dir=out, embedder=embedder) as engine:
        # The verifier processes (a couple of seconds to spawn and import reasoning-gym) are
        # started before the clock starts, as in engine_throughput.
        warm = time.perf_counter()
        await engine.verifiers.ready()
        startup = time.perf_counter() - warm
        rss["verifiers_ready"] = current_rss_mb()
        result = await engine.run(items)
        rss["run_end"] = current_rss_mb()
    return result, startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
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

    rss: dict[str, float] = {"start": current_rss_mb()}
    bench_started = time.perf_counter()
    suite, items = generate(args.questions)
    generation_s = time.perf_counter() - bench_started
    rss["generated"] = current_rss_mb()
    embedder = TimedEmbedder()

    with tempfile.TemporaryDirectory(prefix="ttc-memory-") as tmp:
        out = args.keep if args.keep is not None else Path(tmp) / "run"
        result, startup = asyncio.run(run(suite, items, args.rounds, out, embedder, rss))
        journal = out / "journal.jsonl"
        journal_mb = journal.stat().st_size / 2**20 if journal.exists() else 0.0
        run_dir_mb = sum(p.stat().st_size for p in out.iterdir() if p.is_file()) / 2**20
    wall = time.perf_counter() - bench_started

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
        "requests": requests,
        "requests_per_round": [stats.requests for stats in result.rounds],
        "wall_s": round(wall, 3),
        "requests_per_s": round(requests / result.wall_s, 1) if result.wall_s else None,
        "peak_rss_mb": maxrss_mb(resource.RUSAGE_SELF),
        "peak_rss_children_mb": maxrss_mb(resource.RUSAGE_CHILDREN),
        "rss_mb": rss,
        "coverage": round(result.coverage, 4),
        "output_tokens": result.usage.output_tokens,
        "journal_mb": round(journal_mb, 1),
        "run_dir_mb": round(run_dir_mb, 1),
        "phase_s": phase_s,
        "aims": {"peak_rss_mb": 1024, "wall_s": 600},
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
