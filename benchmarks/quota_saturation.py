"""Sitting at a quota without tripping it: the engine against `ttc serve --rpm`.

`ttc serve` enforces `--rpm` over a sliding window shrunk to `--window` seconds (a 6 s window
admits a tenth of the per-minute limit), so a run that would take minutes against a real quota
takes about one. The engine runs `unif` over Reasoning Gym through `OpenAIProvider`, configured
with the same `--rpm` (or, with `--learn`, with no limit at all: it starts from the server's
`x-ratelimit-limit-requests` header and its adaptive concurrency cap). Reported: requests per
minute achieved (answered requests over the rounds' wall time, the barrier between rounds
included) as a fraction of the limit, and the 429s the server answered. Prints one JSON line.
The answers come from the offline simulator: this measures the machinery, never the method.

    python benchmarks/quota_saturation.py [--rpm 600] [--window 6] [--requests 600] [--learn]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import orjson
from _serving import ServeProcess

from ttc.adapters import OpenAIProvider, ReasoningGymSuite
from ttc.engine import Engine, RunConfig


async def engine_run(url: str, args: argparse.Namespace, out: Path) -> tuple[int, float, int]:
    suite = ReasoningGymSuite(per_task=args.per_task)
    items = suite.items()
    rounds = max(1, round(args.requests / len(items)))
    config = RunConfig(
        method="unif",
        rounds=rounds,
        concurrency=args.concurrency,
        rpm=None if args.learn else args.rpm,
        verifier_workers=1,
    )
    provider = OpenAIProvider("sim", base_url=url + "/v1")
    try:
        async with Engine(provider, suite, config, out_dir=out) as engine:
            await engine.verifiers.ready()
            result = await engine.run(items)
            cuts = engine.limiter.cuts
    finally:
        await provider.aclose()
    wall = sum(s.wall_s for s in result.rounds)
    answered = sum(s.samples - s.errors for s in result.rounds)
    return answered, wall, cuts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=600, help="the server's limit per minute")
    parser.add_argument("--window", type=float, default=6.0, help="the server's window, seconds")
    parser.add_argument("--requests", type=int, default=600, help="about this many requests")
    parser.add_argument("--per-task", type=int, default=150, help="Reasoning Gym questions/task")
    parser.add_argument("--latency", type=float, default=0.2, help="server's median latency, s")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--learn", action="store_true", help="give the engine no --rpm: learn it from headers"
    )
    args = parser.parse_args()
    flags = ["--per-task", str(args.per_task), "--rpm", str(args.rpm)]
    flags += ["--window", str(args.window), "--latency", str(args.latency)]
    with ServeProcess(*flags) as server, tempfile.TemporaryDirectory() as tmp:
        answered, wall, cuts = asyncio.run(engine_run(server.url, args, Path(tmp) / "run"))
        stats = server.stats()
    achieved_rpm = answered / wall * 60
    line = {
        "benchmark": "quota_saturation",
        "simulated": True,
        "note": "ttc serve answers with the sim model: measures the machinery, not the method",
        "limit_rpm": args.rpm,
        "server_window_s": args.window,
        "engine_rpm_setting": None if args.learn else args.rpm,
        "server_latency_median_s": args.latency,
        "answered": answered,
        "server_requests": stats["requests"],
        "wall_s": round(wall, 2),
        "achieved_rpm": round(achieved_rpm, 1),
        "fraction_of_limit": round(achieved_rpm / args.rpm, 4),
        "http_429": stats["rate_limited"],
        "share_429": round(stats["rate_limited"] / max(1, stats["requests"]), 4),
        "concurrency_cuts": cuts,
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
