"""Code verifications per second on this machine: the LiveCodeBench judge in worker processes.

Judges the fixture's reference solutions and the simulator's wrong programs, alternating, N
times in all, through a spawn ProcessPoolExecutor in batches, as the engine's verifier pool does.
Every test of a problem runs in a fresh sandboxed process (a judgement stops at the first failing
test). The clock starts once the workers have started and probed the sandbox. Prints one JSON
line and fails if any verdict is not the expected one.

    python benchmarks/verify_code.py [--verifications 200] [--workers 2] [--batch 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import orjson

from ttc.adapters.sandbox import protections
from ttc.adapters.sim import answers_for
from ttc.adapters.suites import LiveCodeBenchSuite
from ttc.engine import Item

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "lcb_fixture.jsonl"

_SUITE: LiveCodeBenchSuite | None = None


def _install(suite: LiveCodeBenchSuite) -> None:
    global _SUITE
    _SUITE = suite
    suite.prepare()


def _ready() -> bool:
    return _SUITE is not None


def _judge_batch(pairs: list[tuple[Item, str]]) -> list[tuple[float, int]]:
    """(score, tests run) of each pair."""
    assert _SUITE is not None, "worker was not initialised"
    out = []
    for item, text in pairs:
        report = _SUITE.run_tests(item, text)
        out.append((1.0 if report.failure is None else 0.0, report.ran))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--verifications", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8, help="pairs per task sent to a worker")
    args = parser.parse_args()

    suite = LiveCodeBenchSuite(FIXTURE, start=None, end=None)
    items = suite.items()
    references = {
        row["question_id"]: row["reference_solution"]
        for row in map(orjson.loads, FIXTURE.read_bytes().splitlines())
    }
    cases = []
    answers = answers_for(suite)
    for seed, item in enumerate(items):
        cases.append((item, references[item.id], 1.0))
        cases.append((item, answers.sim_response(item, False, seed), 0.0))
    work = [cases[i % len(cases)] for i in range(args.verifications)]
    batches = [work[i : i + args.batch] for i in range(0, len(work), args.batch)]

    with ProcessPoolExecutor(
        max_workers=args.workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_install,
        initargs=(suite,),
    ) as pool:
        for warm in [pool.submit(_ready) for _ in range(args.workers)]:
            warm.result()
        started = time.perf_counter()
        futures = [pool.submit(_judge_batch, [(i, t) for i, t, _ in b]) for b in batches]
        results = [r for future in futures for r in future.result()]
        wall = time.perf_counter() - started

    wrong = sum(score != want for (score, _), (_, _, want) in zip(results, work, strict=True))
    line = {
        "benchmark": "verify_code",
        "verifications": len(results),
        "tests_run": sum(ran for _, ran in results),
        "workers": args.workers,
        "batch": args.batch,
        "wall_s": round(wall, 3),
        "verifications_per_s": round(len(results) / wall, 2),
        "tests_per_s": round(sum(ran for _, ran in results) / wall, 1),
        "unexpected_verdicts": wrong,
        "sandbox_namespaces": protections()["namespaces"],
        "sandbox_uid": protections()["uid"],
    }
    print(orjson.dumps(line).decode())
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
