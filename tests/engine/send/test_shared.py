"""Shared limits (`--shared-limits`): the quota kept in a real redis-server, started by the tests
on a free port of its own. The schedule is read from the delays Redis hands out, not from the
clock; `ttc batch` processes sharing one quota are in tests/engine/cli/test_shared_batch.py."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ttc.engine import ConfigError, Limiter, RateInfo
from ttc.engine.send._shared import SharedQuota, quota_key, shown_url

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
import itertools

from _serving import RedisProcess
from fakes import needs_redis_server


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    needs_redis_server()
    with RedisProcess() as server:
        yield server.url


@pytest.fixture
async def quotas(
    redis_url: str, request: pytest.FixtureRequest
) -> AsyncIterator[list[SharedQuota]]:
    key = f"ttc:quota:test:{request.node.name}"
    made = [await SharedQuota(redis_url, key).connect() for _ in range(2)]
    yield made
    for q in made:
        await q.aclose()


async def test_two_clients_take_their_slots_from_one_schedule(quotas: list[SharedQuota]) -> None:
    first, second = quotas
    interval = 60 / (60 * 0.98)  # 60 RPM paced at 98%
    delays = []
    for i in range(8):  # the two clients in turn: one schedule, one slot after another
        quota = first if i % 2 == 0 else second
        delays.append(await quota.reserve(60, None, 0, 60.0, 0.02))
    assert delays == sorted(delays)
    assert delays[0] <= 0.0
    # The eighth slot is seven intervals after the first (less the time the calls took).
    assert delays[-1] == pytest.approx(7 * interval, abs=1.5)
    gaps = [b - a for a, b in itertools.pairwise(delays)]
    assert all(0.5 * interval < gap <= interval + 1e-3 for gap in gaps)


async def test_a_limit_announced_to_one_client_paces_the_other(quotas: list[SharedQuota]) -> None:
    first, second = quotas
    first.learn(30, None, 0.0, 60.0)  # 30 RPM: far stricter than the 6,000 configured
    await asyncio.wait(set(first._pending))
    a = await second.reserve(6000, None, 0, 60.0, 0.02)
    b = await second.reserve(6000, None, 0, 60.0, 0.02)
    assert b - a == pytest.approx(60 / (30 * 0.98), abs=0.5)


async def test_a_wait_announced_to_one_client_holds_the_other(quotas: list[SharedQuota]) -> None:
    first, second = quotas
    first.learn(None, None, 30.0, 60.0)  # the provider said: nothing left for 30 s
    await asyncio.wait(set(first._pending))
    assert await second.reserve(None, None, 0, 60.0, 0.02) > 20.0


async def test_tokens_are_debited_and_a_refund_gives_them_back(quotas: list[SharedQuota]) -> None:
    first, second = quotas
    # 6,000 TPM at 98%: 98 tokens a second, a burst of 120.
    assert await first.reserve(None, 6000, 120, 60.0, 0.02) <= 0.0
    held = await second.reserve(None, 6000, 980, 60.0, 0.02)
    assert held > 1.0  # the first's burst is spent: the second waits for room
    second.charge(-980, 6000, 60.0, 0.02)  # it used none of what it was charged
    first.charge(-120, 6000, 60.0, 0.02)
    await asyncio.wait(set(second._pending) | set(first._pending))
    assert await first.reserve(None, 6000, 50, 60.0, 0.02) <= 0.0


async def test_the_quota_expires_once_nothing_is_held(redis_url: str) -> None:
    quota = await SharedQuota(redis_url, "ttc:quota:test:expiry").connect()
    try:
        # A period of 0.2 s: the hash outlives its last slot by one period, then is gone.
        for _ in range(3):
            await quota.reserve(600, None, 0, 0.2, 0.02)
        client = quota._client
        assert client is not None
        ttl = await client.pttl(quota.key)
        assert 0 < ttl <= 1000
        for _ in range(200):
            if not await client.exists(quota.key):
                break
            await asyncio.sleep(0.05)
        assert not await client.exists(quota.key)
    finally:
        await quota.aclose()


async def test_the_limiter_takes_its_slots_from_the_shared_quota(quotas: list[SharedQuota]) -> None:
    first, second = quotas
    limiter = Limiter(rpm=600, max_concurrency=4)
    limiter.share(first)
    async with limiter.slot():
        pass
    # The limiter's slot moved the shared schedule: the other client's next is an interval on.
    assert await second.reserve(600, None, 0, 60.0, 0.02) > 0.05
    limiter.observe(RateInfo(limit_requests=300))
    await asyncio.wait(set(first._pending))
    a = await second.reserve(6000, None, 0, 60.0, 0.02)
    b = await second.reserve(6000, None, 0, 60.0, 0.02)
    assert b - a == pytest.approx(60 / (300 * 0.98), abs=0.05)


async def test_redis_unreachable_is_one_line_not_local_limits() -> None:
    quota = SharedQuota("redis://:hunter2@127.0.0.1:9/0", "ttc:quota:x", timeout_s=2.0)
    with pytest.raises(ConfigError) as caught:
        await quota.connect()
    message = str(caught.value)
    assert "\n" not in message
    assert "unreachable" in message
    assert "not applied locally" in message
    assert "hunter2" not in message


def test_the_key_names_the_quota_not_the_credential() -> None:
    a = quota_key("openai", "https://api.example.com/v1/", "gpt", None)
    assert a == quota_key("openai", "https://api.example.com/v1", "gpt", None)
    assert a != quota_key("openai", "https://api.example.com/v1", "gpt-mini", None)
    assert quota_key("openai", None, None, "team") == "ttc:quota:name:team"
    assert shown_url("redis://u:pw@h:6379/1") == "redis://u:***@h:6379/1"
