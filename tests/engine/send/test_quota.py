"""The limiter against a real `ttc serve` quota over loopback: the server's window learnt from
its own headers and filled without a refusal, and two clients sharing one quota. Windows are
scaled down to a second; nothing asserts on speed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ttc.adapters import OpenAIProvider
from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine import Limiter, RateInfo, RetryPolicy
from ttc.engine._util._pool import bounded
from ttc.engine.send._sender import Sender

pytestmark = pytest.mark.slow


def _account(result: tuple[int, Any, RateInfo | None] | None) -> tuple[int, RateInfo | None]:
    return 0, None if result is None else result[2]


async def _send_all(url: str, limiter: Limiter, n: int, tag: str) -> list[int]:
    """`n` chat requests through one Sender; the status each ended with (0: an error)."""
    provider = OpenAIProvider("sim", base_url=url + "/v1", api_key="sk-test")
    sender = Sender(None, limiter, RetryPolicy(max_attempts=20, base_delay=0.05), 10.0)
    statuses: list[int] = []

    async def one(i: int) -> None:
        body = {"model": "sim", "messages": [{"role": "user", "content": f"{tag} {i}"}]}

        async def call() -> tuple[int, Any, RateInfo | None]:
            return await provider.post_json("/chat/completions", body)

        result, _, _ = await sender.call_with_retry(0, call, _account, lambda *a: None)
        statuses.append(0 if result is None else result[0])

    try:
        await bounded(range(n), one, 32)
    finally:
        await provider.aclose()
    return statuses


async def test_one_client_learns_the_window_and_fills_it_without_a_refusal() -> None:
    # 20 requests in any second, announced per minute (1,200) as OpenAI does.
    options = ServeOptions(port=0, rpm=1200, window=1.0, latency=0.05)
    async with running_server(options) as server:
        limiter = Limiter(rpm=1200, max_concurrency=32)
        statuses = await _send_all(server.url, limiter, 60, "alone")
        stats = server.stats()
    assert statuses == [200] * 60
    assert stats["rate_limited"] == 0
    window = limiter.window
    assert window is not None
    assert window.budget == 20
    assert 0.99 <= window.seconds <= 1.1
    assert stats["first_request_at"] <= stats["last_response_at"]


async def test_two_clients_on_one_quota_both_back_off() -> None:
    options = ServeOptions(port=0, rpm=1200, window=1.0, latency=0.05)
    async with running_server(options) as server:
        first = Limiter(rpm=1200, max_concurrency=32)
        # Long enough (about 8 s alone) that the second's requests share its window.
        ahead = asyncio.create_task(_send_all(server.url, first, 160, "first"))
        for _ in range(500):  # until the first has learnt the window (10 s at most)
            if first.window is not None or ahead.done():
                break
            await asyncio.sleep(0.02)
        assert first.window is not None
        second = Limiter(rpm=1200, max_concurrency=32)
        statuses = await _send_all(server.url, second, 60, "second")
        statuses += await ahead
        stats = server.stats()
    assert statuses == [200] * 220
    # The first gave its learnt window up once the other's requests shared it; the second,
    # seeing a window it had not filled alone, never took one.
    assert [first.window, second.window] == [None, None]
    # Both backed off: refusals stayed a small share, each answered by a wait, not a storm.
    assert stats["rate_limited"] <= 0.2 * stats["requests"]


@pytest.mark.parametrize(
    ("kind", "means", "read_as"),
    [
        ("sliding", "oldest", "sliding-oldest"),
        ("fixed", "newest", "fixed"),
        ("bucket", "newest", "bucket"),
    ],
)
async def test_each_kind_of_limit_is_learnt_from_ttc_serves_headers(
    kind: str, means: str, read_as: str
) -> None:
    # 60 requests per 3 s, announced per minute (1,200), counted as --limit-kind says.
    options = ServeOptions(
        port=0, rpm=1200, window=3.0, latency=0.05, limit_kind=kind, reset_means=means
    )
    async with running_server(options) as server:
        await asyncio.sleep(1.2)  # a fixed window's restarts fall between our requests
        limiter = Limiter(rpm=1200, max_concurrency=32)
        statuses = await _send_all(server.url, limiter, 150, kind)
        stats = server.stats()
    assert statuses == [200] * 150
    assert stats["rate_limited"] <= 2
    assert stats["answered_again"] == 0
    window = limiter.window
    assert window is not None
    assert window.kind == read_as
    assert window.budget <= 60
