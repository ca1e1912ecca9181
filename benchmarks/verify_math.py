"""Maths verifications per second on this machine: math-verify judging MATH-500 in worker processes.

Judges every MATH-500 reference, boxed as the simulator's correct answer, and as many wrong
answers from the simulator, through a pool of spawned worker processes in batches of 64 (one
executor call per batch, as the engine sends them), after the workers have started and warmed
math-verify up. For scale it also times the same work in this process, with no pool. Every
verdict is checked: a correct answer scored 0 or a wrong one scored 1 is an error. Prints one
JSON line.

    python benchmarks/verify_math.py [--data ../shared/data/math500/test.jsonl] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ttc.adapters.sim import answers_for
from ttc.adapters.suites import MathSuite
from ttc.engine import Item, Verdict

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "math500" / "test.jsonl"

_SUITE: MathSuite | None = None


def _install(suite: MathSuite) -> None:
    global _SUITE
    _SUITE = suite
    suite.prepare()


def _ready() -> int:
    time.sleep(0.2)  # long enough that each worker takes one of these
    return os.getpid()


def _judge_batch(pairs: list[tuple[Item, str]]) -> list[Verdict]:
    assert _SUITE is not None, "worker was not initialised"
    return [_SUITE.judge(item, text) for item, text in pairs]


def _work(suite: MathSuite) -> tuple[list[tuple[Item, str]], list[float]]:
    """The (item, response) pairs to judge and the score each must get."""
    pairs: list[tuple[Item, str]] = []
    expected: list[float] = []
    answers = answers_for(suite)
    for item in suite.items():
        pairs.append((item, answers.sim_response(item, True, 0)))
        pairs.append((item, answers.sim_response(item, False, 0)))
        expected += [1.0, 0.0]
    return pairs, expected


def _check(verdicts: list[Verdict], expected: list[float], where: str) -> None:
    wrong = sum(v.score != e for v, e in zip(verdicts, expected, strict=True))
    if wrong:
        sys.exit(f"verify_math: {wrong} verdicts {where} disagree with the simulator's answers")


def pool_rate(
    suite: MathSuite, pairs: list[tuple[Item, str]], workers: int, batch: int
) -> tuple[float, list[Verdict]]:
    """Seconds to judge `pairs` in a warmed spawn pool, and the verdicts."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_install, initargs=(suite,)
    ) as pool:
        pids: set[int] = set()
        while len(pids) < workers:  # every worker started, installed and warmed
            pids.update(f.result() for f in [pool.submit(_ready) for _ in range(workers)])
        started = time.perf_counter()
        futures = [
            pool.submit(_judge_batch, pairs[at : at + batch]) for at in range(0, len(pairs), batch)
        ]
        verdicts = [v for future in futures for v in future.result()]
        return time.perf_counter() - started, verdicts


def in_process_rate(suite: MathSuite, pairs: list[tuple[Item, str]]) -> tuple[float, list[Verdict]]:
    """Seconds to judge `pairs` here, with a fresh copy of the suite (no parsed references)."""
    fresh: MathSuite = pickle.loads(pickle.dumps(suite))
    fresh.prepare()
    started = time.perf_counter()
    verdicts = [fresh.judge(item, text) for item, text in pairs]
    return time.perf_counter() - started, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MATH-500 test.jsonl")
    parser.add_argument("--workers", type=int, default=2, help="verifier processes")
    parser.add_argument("--batch", type=int, default=64, help="responses per executor call")
    args = parser.parse_args()
    suite = MathSuite("math500", args.data)
    pairs, expected = _work(suite)
    wall, verdicts = pool_rate(suite, pairs, args.workers, args.batch)
    _check(verdicts, expected, "in the pool")
    local_wall, local_verdicts = in_process_rate(suite, pairs)
    _check(local_verdicts, expected, "in process")
    line = {
        "benchmark": "verify_math",
        "verifications": len(pairs),
        "workers": args.workers,
        "wall_s": round(wall, 3),
        "verifications_per_s": round(len(pairs) / wall, 1),
        "in_process_per_s": round(len(pairs) / local_wall, 1),
    }
    sys.stdout.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
