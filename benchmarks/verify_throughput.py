"""Verifications per second on this machine: the local process pool against Ray, with the same
workers and the same samples.

The samples: the LiveCodeBench fixture's reference solutions and the simulator's wrong programs,
alternating (each test in a fresh sandboxed process), and with `--math FILE` (a MATH-500 JSONL)
as many MATH-500 responses, right and wrong, judged by math-verify. Each pool judges them in
batches of `--batch`, at most 4 batches per worker in flight, as a round's verify workers send
them; the clock starts once the pool's workers are ready (start-up is reported apart: for Ray,
starting a local Ray and its actors). Prints one JSON line and fails if any verdict is not the
expected one, or if the two pools' verdicts differ.

    python benchmarks/verify_throughput.py [--code 120] [--math FILE --math-n 2000] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters import LiveCodeBenchSuite, MathSuite
from ttc.adapters.executors import RayVerifierPool
from ttc.adapters.sim import answers_for
from ttc.engine import Item, Suite, Verdict, Verifiers
from ttc.engine.run import VerifierPool

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "lcb_fixture.jsonl"
Case = tuple[Item, str, float]  # a response and the score it must get


def code_cases(n: int) -> tuple[Suite, list[Case]]:
    suite = LiveCodeBenchSuite(FIXTURE, start=None, end=None)
    references = {
        row["question_id"]: row["reference_solution"]
        for row in map(orjson.loads, FIXTURE.read_bytes().splitlines())
    }
    answers, cases = answers_for(suite), []
    for seed, item in enumerate(suite.items()):
        cases.append((item, references[item.id], 1.0))
        cases.append((item, answers.sim_response(item, False, seed), 0.0))
    return suite, [cases[i % len(cases)] for i in range(n)]


def math_cases(path: Path, n: int) -> tuple[Suite, list[Case]]:
    suite = MathSuite("math500", path)
    items = suite.items()
    cases = []
    for i in range(n):
        item = items[(i // 2) % len(items)]
        right = i % 2 == 0
        answer = item.reference if right else f"{item.reference} + 1"
        cases.append((item, f"So the answer is $\\boxed{{{answer}}}$.", 1.0 if right else 0.0))
    return suite, cases


async def measure(pool: Verifiers, cases: list[Case], batch: int) -> tuple[float, list[Verdict]]:
    """(seconds, verdicts) of judging `cases` in batches, 4 per worker in flight."""
    batches = [cases[i : i + batch] for i in range(0, len(cases), batch)]
    gate = asyncio.Semaphore(4 * pool.workers)

    async def judge(part: list[Case]) -> list[Verdict]:
        async with gate:
            return await pool.judge_many([(item, text) for item, text, _ in part])

    started = time.perf_counter()
    parts = await asyncio.gather(*(judge(part) for part in batches))
    return time.perf_counter() - started, [v for part in parts for v in part]


async def both(suite: Suite, cases: list[Case], args: argparse.Namespace) -> dict[str, Any]:
    """One kind of samples through the process pool, then through Ray."""
    out: dict[str, Any] = {"verifications": len(cases)}
    verdicts = {}
    pools: dict[str, Verifiers] = {
        "process": VerifierPool(suite, args.workers),
        "ray": RayVerifierPool(suite, args.workers),
    }
    for name, pool in pools.items():
        started = time.perf_counter()
        pool.start()
        try:
            await pool.ready()
            out[f"{name}_start_s"] = round(time.perf_counter() - started, 2)
            wall, verdicts[name] = await measure(pool, cases, args.batch)
        finally:
            await pool.aclose()
        out[f"{name}_per_s"] = round(len(cases) / wall, 1)
    out["unexpected_verdicts"] = sum(
        v.score != want for v, (_, _, want) in zip(verdicts["process"], cases, strict=True)
    )
    out["verdicts_equal"] = verdicts["process"] == verdicts["ray"]
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    line: dict[str, Any] = {
        "benchmark": "verify_throughput",
        "workers": args.workers,
        "batch": args.batch,
    }
    line["code"] = await both(*code_cases(args.code), args)
    if args.math is not None:
        line["math"] = await both(*math_cases(args.math, args.math_n), args)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--code", type=int, default=120, help="code verifications")
    parser.add_argument("--math", type=Path, help="a MATH-500 JSONL file (default: no math)")
    parser.add_argument("--math-n", type=int, default=2000, help="math verifications")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8, help="responses per batch")
    line = asyncio.run(run(parser.parse_args()))
    print(orjson.dumps(line).decode())
    kinds = [line[k] for k in ("code", "math") if k in line]
    if any(k["unexpected_verdicts"] or not k["verdicts_equal"] for k in kinds):
        sys.exit(1)


if __name__ == "__main__":
    main()
