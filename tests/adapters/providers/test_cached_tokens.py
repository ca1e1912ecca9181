"""Cached input tokens, read from real HTTP answers of both adapters (a loopback server): OpenAI's
`prompt_tokens_details.cached_tokens` and Gemini's `cachedContentTokenCount`, kept in the usage
and priced at the cached rate; absent, null or unreadable counts are none."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import Reply, Seen, StartLoopback

from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine.contract._types import Message, Request
from ttc.engine.send._prices import PRICES

ASK = Request(messages=(Message("user", "What is 2+2?"),))


def openai_reply(details: Any) -> Reply:
    usage: dict[str, Any] = {"prompt_tokens": 1000, "completion_tokens": 10}
    if details is not None:
        usage["prompt_tokens_details"] = details
    choice = {"index": 0, "message": {"content": "4"}, "finish_reason": "stop"}
    return Reply(body={"model": "gpt-4.1-mini", "choices": [choice], "usage": usage})


@pytest.mark.parametrize(
    ("details", "cached"),
    [
        ({"cached_tokens": 768}, 768),
        ({"cached_tokens": None}, 0),
        (None, 0),
        ({"cached_tokens": "many"}, 0),
        ({"cached_tokens": 5000}, 1000),
    ],
)
async def test_openai_cached_tokens(loopback: StartLoopback, details: Any, cached: int) -> None:
    server = await loopback(lambda seen: openai_reply(details), "/v1")
    provider = OpenAIProvider("gpt-4.1-mini", base_url=server.url, api_key="k")
    try:
        usage = (await provider.generate(ASK)).usage
    finally:
        await provider.aclose()
    assert usage.input_tokens == 1000
    assert usage.cached_tokens == cached
    price = PRICES["gpt-4.1-mini"]
    expected = ((1000 - cached) * 0.40 + cached * 0.10 + 10 * 1.60) / 1e6
    assert price.cost(usage) == pytest.approx(expected)


def gemini_reply(seen: Seen) -> Reply:
    usage = {"promptTokenCount": 2000, "candidatesTokenCount": 5, "cachedContentTokenCount": 1500}
    candidate = {"index": 0, "content": {"role": "model", "parts": [{"text": "4"}]},
                 "finishReason": "STOP"}  # fmt: skip
    return Reply(body={"candidates": [candidate], "usageMetadata": usage})


async def test_gemini_cached_content_tokens(loopback: StartLoopback) -> None:
    server = await loopback(gemini_reply, "/")
    provider = GeminiProvider("gemini-2.5-flash", base_url=server.url, api_key="k")
    try:
        usage = (await provider.generate(ASK)).usage
    finally:
        await provider.aclose()
    assert (usage.input_tokens, usage.cached_tokens) == (2000, 1500)
    expected = (500 * 0.30 + 1500 * 0.075 + 5 * 2.50) / 1e6
    assert PRICES["gemini-2.5-flash"].cost(usage) == pytest.approx(expected)
