"""The engine's throughput ceiling over real HTTP: `ttc run`'s machinery against `ttc serve` at
zero latency, as a ratio to a bare aiohttp loop sending the same number of requests to the same
server in the same run.

The server runs in its own process. The bare loop is the least a client can do: one aiohttp
session, orjson, `--concurrency` coroutines posting warm-up prompts, reading each body. The
engine runs `unif` over Reasoning Gym through `OpenAIProvider`: limiter, retries, journal, and
the real reasoning-gym verifier in worker processes. The bare loop is timed before and after the
engine and the mean is used, since the machine is shared. Prints one JSON line. The answers come
from the offline simulator: this measures the machinery, never the method.

    python benchmarks/serve_throughput.py [--per-task 100] [--rounds 3] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
from _serving import ServeProcess

from ttc.adapters import OpenAIProvider, ReasoningGymSuite
from ttc.engine import Engine, RunConfig


async def bare_loop(url: str, prompts: list[str], total: int, concurrency: int) -> float:
    """Requests per second of the plainest client: post, read, parse, next."""
    endpoint = url + "/v1/chat/completions"
    bodies = [
        orjson.dumps({"model": "sim", "messages": [{"role": "user", "content": p}]})
        for p in prompts
    ]
    headers = {"Content-Type": "application/json"}
    next_index = 0
    ok = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index, ok
        while next_index < total:
            i = next_index
            next_index += 1
            async with session.post(endpoint, data=bodies[i % len(bodies)], headers=headers) as r:
                body = orjson.loads(await r.read())
                ok += r.status == 200 and bool(body["choices"])

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    if ok != total:
        raise RuntimeError(f"bare loop: {ok} of {total} requests answered")
    return total / wall


async def engine_run(url: str, args: argparse.Namespace, out: Path) -> tuple[int, float]:
    suite = ReasoningGymSuite(per_task=args.per_task)
    items = suite.items()
    config = RunConfig(
        method="unif",
        rounds=args.rounds,
        concurrency=args.concurrency,
        verifier_workers=args.workers,
    )
    provider = OpenAIProvider("sim", base_url=url + "/v1")
    try:
        async with Engine(provider, suite, config, out_dir=out) as engine:
            await engine.verifiers.ready()  # worker start-up is not request throughput
            started = time.perf_counter()
            result = await engine.run(items)
            wall = time.perf_counter() - started
    finally:
        await provider.aclose()
    return sum(s.requests for s in result.rounds), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=1, help="verifier processes")
    args = parser.parse_args()
    suite = ReasoningGymSuite(per_task=args.per_task)
    prompts = [suite.warmup_prompt(item) for item in suite.items()]
    total = len(prompts) * args.rounds
    with ServeProcess("--per-task", str(args.per_task)) as server:
        bare_before = asyncio.run(bare_loop(server.url, prompts, total, args.concurrency))
        server.reset_stats()
        with tempfile.TemporaryDirectory() as tmp:
            requests, wall = asyncio.run(engine_run(server.url, args, Path(tmp) / "run"))
        stats = server.stats()
        bare_after = asyncio.run(bare_loop(server.url, prompts, total, args.concurrency))
    bare = (bare_before + bare_after) / 2
    engine_rps = requests / wall
    line = {
        "benchmark": "serve_throughput",
        "simulated": True,
        "note": "ttc serve answers with the sim model at zero latency: measures the machinery, "
        "not the method",
        "questions": len(prompts),
        "rounds": args.rounds,
        "requests": requests,
        "server_answered": stats["ok"],
        "concurrency": args.concurrency,
        "verifier_workers": args.workers,
        "engine_requests_per_s": round(engine_rps, 1),
        "bare_loop_requests_per_s": round(bare, 1),
        "bare_loop_before_after": [round(bare_before, 1), round(bare_after, 1)],
        "engine_to_bare_ratio": round(engine_rps / bare, 3),
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
