"""Batch mode against synchronous sends, both through `ttc serve`'s OpenAI API (the sim model).

Runs adpt over Reasoning Gym questions twice against one in-process `ttc serve`: once with every
round through the server's Batch API (`--batch`: upload, create, poll, read), once synchronously,
same seed, `--price 1,1`. Prints one JSON line: requests, batches, polls, each run's wall time,
and the batch run's cost as a share of the synchronous run's (0.5: the batch rate). Simulated:
the wall time of a batch run is the server's `--batch-delay` per round, not a vendor's queue.

    python benchmarks/batch_mode.py [--per-task 25] [--batch-delay 3] [--batch-fail 0]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ttc.adapters import OpenAIProvider, ReasoningGymSuite
from ttc.adapters.providers import OpenAIBatchAPI
from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine import Engine, EngineOptions, Price, RoundStats, RunConfig, Usage
from ttc.retrieval import LexicalEmbedder


def total(rounds: Sequence[RoundStats]) -> Usage:
    usage = Usage()
    for stats in rounds:
        usage = usage + stats.usage
    return usage


async def one_run(url: str, suite: ReasoningGymSuite, out: Path, batch: bool) -> tuple[Any, float]:
    provider = OpenAIProvider("sim", base_url=url, api_key="none")
    if batch:
        provider.batch = OpenAIBatchAPI(provider, poll_s=(0.5, 60.0))
    config = RunConfig(method="adpt", rounds=4, verifier_workers=1)
    options = EngineOptions(price=Price(1.0, 1.0, 1.0))
    started = time.perf_counter()
    try:
        async with Engine(provider, suite, config, out_dir=out, embedder=LexicalEmbedder(),
                          options=options) as engine:  # fmt: skip
            result = await engine.run()
            cost = engine.cost(total(result.rounds))
    finally:
        if provider.batch is not None:
            await provider.batch.aclose()
        await provider.aclose()
    return (result, cost), time.perf_counter() - started


async def main(args: argparse.Namespace) -> dict[str, Any]:
    suite = ReasoningGymSuite(per_task=args.per_task)
    options = ServeOptions(port=0, batch_delay=args.batch_delay, batch_fail=args.batch_fail)
    async with running_server(options, suite) as server:
        with tempfile.TemporaryDirectory() as tmp:
            (batched, cost_b), wall_b = await one_run(
                server.base_url_openai, suite, Path(tmp) / "b", True
            )
            stats = server.stats()
            (synced, cost_s), wall_s = await one_run(
                server.base_url_openai, suite, Path(tmp) / "s", False
            )
    routes = stats["batch"]["by_route"]
    usage_b, usage_s = total(batched.rounds), total(synced.rounds)
    same = (batched.solved, usage_b.input_tokens, usage_b.output_tokens) == (
        synced.solved,
        usage_s.input_tokens,
        usage_s.output_tokens,
    )
    return {
        "benchmark": "batch_mode",
        "simulated": True,
        "questions": len(batched.records),
        "requests": sum(s.requests for s in batched.rounds),
        "batches": stats["batch"]["batches"],
        "polls": routes.get("openai.batches.retrieve", 0),
        "synchronous_completions_in_batch_run": stats["by_route"].get("openai.generate", 0),
        "batch_delay_s": args.batch_delay,
        "wall_s_batch": round(wall_b, 2),
        "wall_s_sync": round(wall_s, 2),
        "cost_batch": round(cost_b, 6),
        "cost_sync": round(cost_s, 6),
        "cost_ratio": round(cost_b / cost_s, 6) if cost_s else None,
        "same_solved_and_tokens": same,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-task", type=int, default=25)
    parser.add_argument("--batch-delay", type=float, default=3.0)
    parser.add_argument("--batch-fail", type=float, default=0.0)
    print(orjson.dumps(asyncio.run(main(parser.parse_args()))).decode())
