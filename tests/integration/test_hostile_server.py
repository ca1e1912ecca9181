"""The HTTP adapters against a hostile OpenAI-compatible server on loopback: an absurd
Retry-After, a body far over the cap, a server that echoes the key, usage that is no count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes import Loopback, Reply, Seen, StartLoopback

from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine._errors import RateLimited
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._sender import Job, Sender
from ttc.engine._types import Message, Request, Sampling

KEY = "sk-hostile-SECRET-0123456789abcdef"


def ask(text: str = "What is 2+2?") -> Request:
    return Request(messages=(Message("user", text),), sampling=Sampling(), item_id="q0")


def chat(content: str = "4", usage: object = None) -> Reply:
    body: dict[str, object] = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return Reply(body=body)


def refuse_for_years(seen: Seen) -> Reply:
    return Reply(status=429, body={"error": {"message": "slow down"}},
                 headers={"Retry-After": "999999999"})  # fmt: skip


@pytest.fixture
async def server(loopback: StartLoopback) -> Loopback:
    return await loopback(lambda seen: chat(), "/v1")


@pytest.fixture
async def provider(server: Loopback) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("m", base_url=server.url, api_key=KEY)
    yield p
    await p.aclose()


# ── Retry-After ──────────────────────────────────────────────────────────────────────────────


async def test_a_retry_after_of_years_gets_our_own_backoff_and_the_attempts_run_out(
    server: Loopback, provider: OpenAIProvider
) -> None:
    server.default = refuse_for_years
    waits: list[float] = []
    sender = Sender(
        provider,
        Limiter(max_concurrency=1),
        RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02),
        timeout_s=30.0,
        on_retry=lambda job, attempt, error, delay: waits.append(delay),
    )
    outcome = await sender.send_with_retry(Job(0, 1, 0, ask(), 10))
    assert outcome.completion is None
    assert isinstance(outcome.error, RateLimited)
    assert outcome.error.retry_after == 999_999_999  # what the server said, not what we did
    assert "HTTP 429: slow down" in str(outcome.error)
    assert outcome.attempts == 3
    assert len(server.seen) == 3
    assert len(waits) == 2
    assert all(w <= 0.02 for w in waits)
