"""`ttc serve`'s Anthropic Messages wire: the official `anthropic` client against it unchanged,
Anthropic's rate-limit headers, error envelope and statuses (429, 529, 400)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from ttc.adapters.providers._http import SIM_MODEL_SUFFIX
from ttc.adapters.sim import ServeOptions, running_server
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine.contract._types import Verdict


@pytest.fixture(scope="module")
def gym() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=6)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _message(prompt: str, **fields: Any) -> dict[str, Any]:
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 4000,
        "messages": [{"role": "user", "content": prompt}],
        **fields,
    }


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any, Any]:
    async with http.post(url + "/v1/messages", data=orjson.dumps(body)) as resp:
        return resp.status, orjson.loads(await resp.read()), resp.headers


async def test_official_anthropic_client(gym: ReasoningGymSuite) -> None:
    items = gym.items()
    options = ServeOptions(port=0, rpm=1000, tpm=10**7, sim_thinking=0.5)
    async with running_server(options, gym, items) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            raw = await client.messages.with_raw_response.create(
                model="claude-haiku-4-5",
                max_tokens=20_000,
                system="Answer carefully.",
                messages=[{"role": "user", "content": gym.warmup_prompt(items[0])}],
                thinking={"type": "enabled", "budget_tokens": 10_000},
            )
            headers = raw.headers
            assert headers["anthropic-ratelimit-requests-limit"] == "1000"
            assert headers["anthropic-ratelimit-requests-remaining"] == "999"
            assert headers["anthropic-ratelimit-input-tokens-limit"] == str(10**7)
            assert int(headers["anthropic-ratelimit-output-tokens-remaining"]) < 10**7
            reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"])
            assert 0 < (reset - datetime.now(UTC)).total_seconds() <= 61
            message = await raw.parse()
            assert message.type == "message"
            assert message.model == "claude-haiku-4-5" + SIM_MODEL_SUFFIX  # marked simulated
            assert message.stop_reason == "end_turn"
            kinds = [block.type for block in message.content]
            assert kinds == ["thinking", "text"]
            text = message.content[1]
            assert isinstance(text, anthropic.types.TextBlock)
            assert isinstance(gym.judge(items[0], text.text), Verdict)
            usage = message.usage
            assert usage.input_tokens > 0
            assert usage.cache_read_input_tokens == 0
            assert usage.cache_creation_input_tokens == 0
            assert usage.output_tokens_details is not None
            thinking = usage.output_tokens_details.thinking_tokens
            assert 0 < thinking < usage.output_tokens  # output_tokens counts the thinking

            short = await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=5,
                messages=[{"role": "user", "content": "Say something long."}],
            )
            assert short.stop_reason == "max_tokens"
            assert short.content[0].type == "text"

            with pytest.raises(anthropic.BadRequestError) as bad:
                await client.messages.create(
                    model="claude-haiku-4-5",
                    max_tokens=2000,
                    messages=[{"role": "user", "content": "hi"}],
                    thinking={"type": "enabled", "budget_tokens": 4000},
                )
            assert bad.value.status_code == 400
            assert "budget_tokens" in str(bad.value)
        assert server.stats()["by_route"] == {"anthropic.generate": 3}


async def test_429_with_retry_after_and_anthropic_envelope(http: aiohttp.ClientSession) -> None:
    async with running_server(ServeOptions(port=0, rpm=60, window=2)) as server:
        # 60 per minute over a 2 s window: 2 requests admitted, the third refused.
        for _ in range(2):
            status, _, headers = await _post(http, server.url, _message("hi"))
            assert status == 200
        status, body, headers = await _post(http, server.url, _message("hi"))
        assert status == 429
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        assert body["request_id"].startswith("req_")
        assert 1 <= int(headers["retry-after"]) <= 2
        assert headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert "x-ratelimit-limit-requests" not in headers  # not OpenAI's


async def test_the_official_client_sees_overloaded_and_rate_limit_errors(
    http: aiohttp.ClientSession,
) -> None:
    async with running_server(ServeOptions(port=0, fault_503=1.0)) as server:
        status, body, _ = await _post(http, server.url, _message("hi"))
        assert status == 529
        assert body["error"]["type"] == "overloaded_error"
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            with pytest.raises(anthropic.OverloadedError):
                await client.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )
        assert server.stats()["by_status"] == {"529": 2}
    async with running_server(ServeOptions(port=0, rpm=60, window=1)) as server:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="x", max_retries=0)
        async with client:
            await client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
            with pytest.raises(anthropic.RateLimitError):
                await client.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"max_tokens": None}, "max_tokens: Field required"),
        ({"messages": []}, "messages: expected a non-empty array"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
        ({"temperature": 1.5}, "temperature: must be in [0, 1]"),
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "must be >= 1024"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2000}, "temperature": 0.3},
            "temperature may only be set to 1",
        ),
    ],
)
async def test_bad_requests_are_refused_as_the_api_does(
    http: aiohttp.ClientSession, change: dict[str, Any], said: str
) -> None:
    body = {k: v for k, v in {**_message("hi"), **change}.items() if v is not None}
    async with running_server(ServeOptions(port=0)) as server:
        status, answer, _ = await _post(http, server.url, body)
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert said in answer["error"]["message"]


async def test_each_request_is_its_own_draw(http: aiohttp.ClientSession) -> None:
    """The API takes no seed: the same prompt twice gets two samples, not one answer twice."""
    async with running_server(ServeOptions(port=0, seed=1)) as server:
        first = (await _post(http, server.url, _message("Name a number.")))[1]
        second = (await _post(http, server.url, _message("Name a number.")))[1]
    assert first["content"][0]["text"] != second["content"][0]["text"]
    assert first["usage"]["input_tokens"] == math.ceil(len("Name a number.") / 4)


async def test_a_thinking_budget_gets_thinking_without_sim_thinking(
    http: aiohttp.ClientSession, gym: ReasoningGymSuite
) -> None:
    # `ttc serve` started plainly: a request that turns thinking on thinks (within its budget),
    # as Claude does; one that does not, does not.
    question = gym.warmup_prompt(gym.items()[0])
    async with running_server(ServeOptions(port=0, seed=1)) as server:
        asked = (await _post(http, server.url, _message(
            question, thinking={"type": "enabled", "budget_tokens": 2048}
        )))[1]  # fmt: skip
        plain = (await _post(http, server.url, _message(question)))[1]
    thinking = asked["usage"]["output_tokens_details"]["thinking_tokens"]
    assert 0 < thinking <= 2048
    assert [block["type"] for block in asked["content"]] == ["thinking", "text"]
    assert "output_tokens_details" not in plain["usage"]
    assert [block["type"] for block in plain["content"]] == ["text"]
