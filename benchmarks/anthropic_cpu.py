"""CPU per request of the official `anthropic` client against our `AnthropicProvider` (one
aiohttp session, orjson), both asking `ttc serve`'s Anthropic wire (its own process, zero
latency) for the same messages at the same concurrency. The client process's CPU time
(`time.process_time`: user + system, every thread) is divided by the requests answered; the two
are run alternately, `--repeats` times each, and the medians compared. Prints one JSON line.
The answers come from the offline simulator: this measures the clients, never a model.

    python benchmarks/anthropic_cpu.py [--requests 400] [--concurrency 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import anthropic
import orjson
from _serving import ServeProcess

from ttc.adapters.providers import AnthropicProvider
from ttc.engine import Message, Request, Sampling

PROMPT = "Compute 17 * 23 and explain each step; put the final answer in \\boxed{}."
MAX_TOKENS = 1024


async def _drive(total: int, concurrency: int, one: Callable[[], Awaitable[None]]) -> float:
    """CPU seconds per request of `total` calls of `one`, `concurrency` at a time."""
    left = total

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - start) / total


async def sdk(url: str, total: int, concurrency: int) -> float:
    client = anthropic.AsyncAnthropic(base_url=url, api_key="x", max_retries=0)
    async with client:

        async def one() -> None:
            message = await client.messages.create(
                model="sim",
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": PROMPT}],
            )
            assert message.content

        await one()  # warm: imports, the connection pool
        return await _drive(total, concurrency, one)


async def ours(url: str, total: int, concurrency: int) -> float:
    provider = AnthropicProvider("sim", base_url=url, api_key="x")
    request = Request((Message("user", PROMPT),), Sampling(max_output_tokens=MAX_TOKENS))
    try:

        async def one() -> None:
            completion = await provider.generate(request)
            assert completion.texts[0]

        await one()
        return await _drive(total, concurrency, one)
    finally:
        await provider.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {"sdk": [], "aiohttp": []}
    with ServeProcess() as server:
        for _ in range(args.repeats):
            runs["sdk"].append(asyncio.run(sdk(server.url, args.requests, args.concurrency)))
            runs["aiohttp"].append(asyncio.run(ours(server.url, args.requests, args.concurrency)))
        answered = server.stats()["by_status"].get("200", 0)
    sdk_ms = statistics.median(runs["sdk"]) * 1000
    ours_ms = statistics.median(runs["aiohttp"]) * 1000
    line = {
        "benchmark": "anthropic_cpu",
        "simulated": True,
        "requests": args.requests,
        "repeats": args.repeats,
        "concurrency": args.concurrency,
        "answered": answered,
        "sdk_cpu_ms_per_request": round(sdk_ms, 3),
        "aiohttp_cpu_ms_per_request": round(ours_ms, 3),
        "aiohttp_to_sdk": round(ours_ms / sdk_ms, 3),
        "sdk_version": anthropic.__version__,
    }
    sys.stdout.write(orjson.dumps(line).decode() + "\n")


if __name__ == "__main__":
    main()
