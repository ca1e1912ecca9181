"""Many servers of one model (`--base-url` repeated) against real `ttc serve` replicas over
loopback, in process: requests go to the replica with the fewest in flight, a replica stopped
mid-run is drained and its failed attempts retried on the others, and it comes back once it
answers a probe again. Everything answered here is simulated (the sim model behind `ttc serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from ttc.adapters.providers import ReplicasProvider, openai_replicas
from ttc.adapters.sim import ServeOptions, SimServer, running_server
from ttc.engine import Completion, Limiter, Message, RateInfo, Request, RetryPolicy, Sampling
from ttc.engine._util._pool import bounded
from ttc.engine.send._sender import Sender

pytestmark = pytest.mark.slow


def _request(i: int) -> Request:
    return Request(messages=(Message("user", f"question {i}"),), sampling=Sampling(), n=1)


def _served(server: SimServer) -> int:
    return int(server.stats()["by_route"].get("openai.generate", 0))


def _account(c: Completion | None) -> tuple[int, RateInfo | None]:
    return (0, None) if c is None else (c.usage.output_tokens, c.rate)


@contextlib.asynccontextmanager
async def _servers(*latencies: float) -> AsyncIterator[list[SimServer]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                running_server(ServeOptions(port=0, latency=s, latency_sigma=0.01))
            )
            for s in latencies
        ]


async def _send_all(provider: ReplicasProvider, n: int, concurrency: int) -> list[bool]:
    """`n` requests through the engine's Sender (its retries, a global limiter); each answered?"""
    sender = Sender(None, Limiter(max_concurrency=concurrency),
                    RetryPolicy(max_attempts=6, base_delay=0.01), 10.0)  # fmt: skip
    answered: list[bool] = []

    async def one(i: int) -> None:
        async def call() -> Completion:
            return await provider.generate(_request(i))

        result, _, _ = await sender.call_with_retry(0, call, _account, lambda *a: None)
        answered.append(result is not None and bool(result.texts[0]))

    await bounded(range(n), one, concurrency)
    return answered


async def test_requests_spread_evenly_over_replicas_of_equal_speed() -> None:
    async with _servers(0.05, 0.05, 0.05) as servers:
        provider = openai_replicas("sim", [s.base_url_openai for s in servers], api_key="sk-t")
        try:
            await asyncio.gather(*(provider.generate(_request(i)) for i in range(30)))
        finally:
            await provider.aclose()
        assert [_served(s) for s in servers] == [10, 10, 10]
    assert provider.simulated
    assert provider.endpoint == ",".join(s.base_url_openai for s in servers)


async def test_a_faster_replica_takes_more_because_it_has_fewer_in_flight() -> None:
    async with _servers(0.02, 0.3) as (fast, slow):
        provider = openai_replicas("sim", [fast.base_url_openai, slow.base_url_openai],
                                   api_key="sk-t")  # fmt: skip
        try:
            answered = await _send_all(provider, 120, concurrency=8)
        finally:
            await provider.aclose()
        assert answered == [True] * 120
        # The slow one holds its requests ~15x longer: it is seldom the least busy.
        assert _served(fast) > 3 * _served(slow) > 0
        assert _served(fast) + _served(slow) == 120


async def test_a_replica_stopped_mid_run_is_drained_and_its_share_retried_elsewhere() -> None:
    async with _servers(0.05, 0.05) as servers:
        async with running_server(ServeOptions(port=0, latency=0.05)) as doomed:
            urls = [*(s.base_url_openai for s in servers), doomed.base_url_openai]
            provider = openai_replicas("sim", urls, api_key="sk-t")
            provider.probe_s = 60.0  # not probed again within this test
            sending = asyncio.create_task(_send_all(provider, 300, concurrency=12))
            for _ in range(1000):  # until it has answered 20 (at most 10 s)
                if _served(doomed) >= 20:
                    break
                await asyncio.sleep(0.01)
        # `doomed` is gone: its listening socket closed, its connections dropped.
        try:
            answered = await sending
        finally:
            await provider.aclose()
        assert answered == [True] * 300  # every request answered, none lost with the replica
        status = {r["url"]: r for r in provider.status()}
        gone = status[doomed.base_url_openai]
        assert gone["down"]
        assert not any(status[s.base_url_openai]["down"] for s in servers)
        # The others answered everything the stopped one did not.
        assert sum(_served(s) for s in servers) == 300 - gone["answered"]
        assert 20 <= gone["answered"] < 100


async def test_a_drained_replica_is_probed_and_comes_back() -> None:
    async with running_server(ServeOptions(port=0, latency=0.01)) as steady:
        async with running_server(ServeOptions(port=0)) as flaky:
            port, url = flaky.port, flaky.base_url_openai
        provider = openai_replicas("sim", [steady.base_url_openai, url], api_key="sk-t")
        provider.probe_s = 0.3
        try:
            answered = await _send_all(provider, 40, concurrency=4)
            assert answered == [True] * 40
            assert provider.status()[1]["down"]
            async with running_server(ServeOptions(port=port)) as back:
                await asyncio.sleep(0.7)  # past the probe's backoff (0.3 s doubled at most)
                answered = await _send_all(provider, 40, concurrency=4)
                assert _served(back) > 0
        finally:
            await provider.aclose()
    assert answered == [True] * 40
    assert not provider.status()[1]["down"]


async def test_a_replica_that_hangs_is_drained_after_timeouts_in_a_row() -> None:
    async with (
        running_server(ServeOptions(port=0, latency=0.01)) as steady,
        running_server(ServeOptions(port=0, fault_hang=1.0)) as hung,
    ):
        urls = [steady.base_url_openai, hung.base_url_openai]
        provider = openai_replicas("sim", urls, api_key="sk-t", timeout_s=0.2)
        provider.probe_s = 60.0
        try:
            answered = await _send_all(provider, 30, concurrency=4)
        finally:
            await provider.aclose()
        assert answered == [True] * 30  # the engine's 10 s attempt timeout never came into it
        status = provider.status()
        assert status[1]["down"]
        assert status[1]["answered"] == 0
        assert status[0]["answered"] == 30


async def test_a_replica_that_fails_fast_with_5xx_is_drained_by_its_error_rate() -> None:
    # The failing replica answers at once (a 500), the healthy one in 50 ms: by fewest in flight
    # alone the failing one took most requests (597 of 671), and 86 of 160 samples ran out of
    # retries while the healthy one was up.
    async with (
        running_server(ServeOptions(port=0, latency=0.05, latency_sigma=0.01)) as healthy,
        running_server(ServeOptions(port=0, fault_500=1.0)) as failing,
    ):
        urls = [healthy.base_url_openai, failing.base_url_openai]
        provider = openai_replicas("sim", urls, api_key="sk-t")
        provider.probe_s = provider.probe_max_s = 60.0  # not probed again within this test
        try:
            answered = await _send_all(provider, 160, concurrency=16)
        finally:
            await provider.aclose()
        assert answered == [True] * 160
        status = provider.status()
        assert status[1]["down"]
        assert status[1]["answered"] == 0
        # Drained after its first half window of errors (10), and the requests then in flight.
        assert 10 <= status[1]["server_errors"] == status[1]["sent"] <= 10 + 16
        assert status[0]["answered"] == 160


async def test_a_probe_that_gets_a_server_error_keeps_the_replica_down() -> None:
    async with (
        running_server(ServeOptions(port=0, latency=0.01)) as healthy,
        running_server(ServeOptions(port=0, fault_500=1.0)) as failing,
    ):
        urls = [healthy.base_url_openai, failing.base_url_openai]
        provider = openai_replicas("sim", urls, api_key="sk-t")
        provider.probe_s = 0.05  # due long before the healthy one has answered the rest
        try:
            answered = await _send_all(provider, 100, concurrency=2)
        finally:
            await provider.aclose()
        assert answered == [True] * 100
        replica = provider.replicas[1]
        assert replica.down
        assert replica.downs >= 2  # probed, and down again each time
        assert provider.status()[1]["answered"] == 0
