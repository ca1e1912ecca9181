"""Requests per second through the whole engine with the sim provider at zero latency.

Runs `unif` (every question every round, so every round is full) over the Reasoning Gym
questions: limiter, retries, journal, and the real reasoning-gym verifier in worker processes.
For scale it also times the bare sim provider alone (the same requests, no engine) in the same
run. Prints one JSON line. Simulated: it measures the machinery, never the method.

    python benchmarks/engine_throughput.py [--per-task 100] [--rounds 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import orjson

from ttc.adapters import ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, Message, Request, RunConfig, Sampling
from ttc.engine.contract import sample_seed


async def engine_rate(args: argparse.Namespace, out: Path) -> tuple[int, float, float]:
    suite = ReasoningGymSuite(per_task=args.per_task)
    items = suite.items()
    config = RunConfig(
        method="unif",
        rounds=args.rounds,
        concurrency=args.concurrency,
        verifier_workers=args.workers,
    )
    provider = SimProvider(suite, items, SimConfig(seed=1))
    async with Engine(provider, suite, config, out_dir=out) as engine:
        # Time the steady state: the verifier processes (about 2 s to spawn and import
        # reasoning-gym) are started before the clock starts.
        warm_started = time.perf_counter()
        await engine.verifiers.ready()
        started = time.perf_counter()
        startup = started - warm_started
        result = await engine.run(items)
        wall = time.perf_counter() - started
    requests = sum(s.requests for s in result.rounds)
    return requests, wall, startup


async def bare_sim_rate(args: argparse.Namespace) -> tuple[int, float]:
    suite = ReasoningGymSuite(per_task=args.per_task)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=1))
    prompts = [(item.id, suite.warmup_prompt(item)) for item in items]
    started = time.perf_counter()
    count = 0
    for t in range(1, args.rounds + 1):
        for item_id, prompt in prompts:
            sampling = Sampling(seed=sample_seed(0, item_id, t, 0))
            await provider.generate(Request((Message("user", prompt),), sampling, 1, item_id))
            count += 1
    return count, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="verifier processes")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        requests, wall, startup = asyncio.run(engine_rate(args, Path(tmp)))
    bare_requests, bare_wall = asyncio.run(bare_sim_rate(args))
    engine_rps = requests / wall
    bare_rps = bare_requests / bare_wall
    line = {
        "benchmark": "engine_throughput",
        "simulated": True,
        "note": "sim provider at zero latency: measures the machinery, not the method",
        "questions": 4 * args.per_task,
        "rounds": args.rounds,
        "requests": requests,
        "verifier_workers": args.workers,
        "concurrency": args.concurrency,
        "verifier_startup_s": round(startup, 3),
        "wall_s": round(wall, 3),
        "engine_requests_per_s": round(engine_rps, 1),
        "bare_sim_requests_per_s": round(bare_rps, 1),
        "engine_to_bare_ratio": round(engine_rps / bare_rps, 3),
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
