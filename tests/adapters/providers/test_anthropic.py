"""AnthropicProvider against a scripted loopback server (bodies, usage, the error tree) and
against `ttc serve`'s Anthropic wire (usage equal to the server's, rate headers read)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import Loopback, Reply, Seen, StartLoopback

from ttc.adapters.providers._anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider
from ttc.adapters.providers._anthropic_errors import anthropic_error, anthropic_rate_info
from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine.contract._errors import BadRequest, ConfigError, Fatal, RateLimited, Transient
from ttc.engine.contract._types import Message, Request, Sampling, Usage

KEY = "sk-ant-test-SECRET-0123456789"
SPEND_CAP = "enforced_spend_limit_reached"


def _stamp(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def message_reply(seen: Seen) -> Reply:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "x" * 400, "signature": "s"},
            {"type": "text", "text": "The answer is \\boxed{4}."},
        ],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
            "output_tokens": 300,
            "output_tokens_details": {"thinking_tokens": 250},
        },
    }
    headers = {
        "anthropic-ratelimit-requests-limit": "4000",
        "anthropic-ratelimit-requests-remaining": "3999",
        "anthropic-ratelimit-requests-reset": _stamp(1),
        "anthropic-ratelimit-input-tokens-limit": "2000000",
        "anthropic-ratelimit-input-tokens-remaining": "1990000",
        "anthropic-ratelimit-input-tokens-reset": _stamp(1),
        "anthropic-ratelimit-output-tokens-limit": "400000",
        "anthropic-ratelimit-output-tokens-remaining": "399000",
        "anthropic-ratelimit-output-tokens-reset": _stamp(2),
    }
    return Reply(body=body, headers=headers)


@pytest.fixture
async def server(loopback: StartLoopback) -> Loopback:
    return await loopback(message_reply, "")


@pytest.fixture
async def provider(server: Loopback) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider("claude-test", base_url=server.url, api_key=KEY)
    yield p
    await p.aclose()


def ask(sampling: Sampling | None = None, *messages: Message) -> Request:
    return Request(messages or (Message("user", "What is 2+2?"),), sampling or Sampling())


async def test_body_headers_usage_and_rate(server: Loopback, provider: AnthropicProvider) -> None:
    request = ask(
        Sampling(temperature=0.3, top_p=0.9, top_k=40, max_output_tokens=1000),
        Message("system", "Be brief."),
        Message("user", "What is 2+2?"),
    )
    completion = await provider.generate(request)
    seen = server.seen[-1]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.body == {
        "model": "claude-test",
        "max_tokens": 1000,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "What is 2+2?"}],
        "temperature": 0.3,
        "top_p": 0.9,
        "top_k": 40,
    }
    assert completion.texts == ("The answer is \\boxed{4}.",)
    assert completion.finish_reasons == ("end_turn",)
    # Input counts the cache's writes and reads, the reads also as cached (the cached rate);
    # thinking is split out of output_tokens.
    assert completion.usage == Usage(125, 50, 250, cached_tokens=100)
    rate = completion.rate
    assert rate is not None
    assert rate.limit_requests == 4000
    assert rate.limit_tokens == 400_000  # the smaller of the input and output limits
    assert rate.remaining_tokens == 399_000
    assert rate.reset_tokens_s is not None
    assert 0 < rate.reset_tokens_s <= 2.5
    assert not provider.simulated


async def test_thinking_defaults_and_what_it_does_not_take(
    server: Loopback, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "ttc"):
        await provider.generate(ask(Sampling(temperature=0.3, top_k=40, thinking_budget=2048)))
        await provider.generate(ask(Sampling(temperature=0.3, top_k=40, thinking_budget=2048)))
    body = server.seen[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS + 2048
    assert "temperature" not in body
    assert "top_k" not in body
    said = [r.getMessage() for r in caplog.records if "extended thinking" in r.getMessage()]
    assert len(said) == 1
    assert "temperature=0.3" in said[0]
    await provider.generate(ask(Sampling(thinking_budget=0)))
    assert "thinking" not in server.seen[-1].body
    assert server.seen[-1].body["max_tokens"] == DEFAULT_MAX_TOKENS
    with pytest.raises(BadRequest, match="one response per request"):
        await provider.generate(Request((Message("user", "hi"),), Sampling(), 2))


async def test_a_base_url_ending_in_v1_and_the_key_rule(loopback: StartLoopback) -> None:
    server = await loopback(message_reply, "/v1")
    p = AnthropicProvider("claude-test", base_url=server.url)  # no key: fine off Anthropic
    await p.generate(ask())
    await p.aclose()
    assert server.seen[-1].path == "/v1/messages"
    assert "x-api-key" not in server.seen[-1].headers
    with pytest.raises(ConfigError, match=r"no API key for api\.anthropic\.com: set TTC_TEST"):
        AnthropicProvider("claude-test", api_key_env="TTC_TEST_UNSET_VARIABLE_X")


def _error(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": f"said {kind}", **more}}


@pytest.mark.parametrize(
    ("reply", "expected", "stops"),
    [
        (Reply(529, _error("overloaded_error")), Transient, False),
        (Reply(500, _error("api_error")), Transient, False),
        (Reply(401, _error("authentication_error")), Fatal, True),
        (Reply(403, _error("permission_error")), Fatal, True),
        (Reply(402, _error("billing_error")), Fatal, True),
        (Reply(400, _error("invalid_request_error")), BadRequest, False),
        (Reply(413, _error("request_too_large")), BadRequest, False),
        (
            Reply(429, _error("rate_limit_error", details={"error_code": SPEND_CAP})),
            Fatal,
            True,
        ),
        (Reply(200, {"type": "message", "content": [], "usage": {}}), Transient, False),
        (Reply(200, b'{"type": "message", "con'), Transient, False),
    ],
)  # fmt: skip
async def test_the_error_tree(
    server: Loopback, provider: AnthropicProvider, reply: Reply, expected: type, stops: bool
) -> None:
    server.script.append(reply)
    with pytest.raises(expected) as caught:
        await provider.generate(ask())
    assert getattr(caught.value, "stops_run", False) is stops
    assert KEY not in str(caught.value)


async def test_429_waits_its_retry_after_or_the_exhausted_reset(
    server: Loopback, provider: AnthropicProvider
) -> None:
    server.script.append(Reply(429, _error("rate_limit_error"), {"retry-after": "7"}))
    with pytest.raises(RateLimited) as caught:
        await provider.generate(ask())
    assert caught.value.retry_after == 7
    headers = {
        "anthropic-ratelimit-output-tokens-limit": "8000",
        "anthropic-ratelimit-output-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-reset": _stamp(4),
    }
    server.script.append(Reply(429, _error("rate_limit_error"), headers))
    with pytest.raises(RateLimited) as caught:
        await provider.generate(ask())
    assert caught.value.retry_after is not None
    assert 3 < caught.value.retry_after <= 4.5
    assert caught.value.rate is not None
    assert caught.value.rate.remaining_tokens == 0


def test_rate_info_from_anthropic_headers() -> None:
    now = time.time()
    assert anthropic_rate_info({}) is None
    assert anthropic_rate_info({"anthropic-ratelimit-requests-limit": "lots"}) is None
    info = anthropic_rate_info(
        {
            "anthropic-ratelimit-tokens-limit": "90000",
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": _stamp(30),
            "anthropic-ratelimit-input-tokens-limit": "80000",
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": _stamp(10),
            "anthropic-ratelimit-requests-reset": "not a time",
        },
        now=now,
    )
    assert info is not None
    assert info.limit_tokens == 80_000
    assert info.remaining_tokens == 0
    assert info.reset_tokens_s is not None
    assert 29 < info.reset_tokens_s <= 31
    assert info.reset_requests_s is None
    refused = anthropic_error(429, {"retry-after": "2"}, "", who="a", secret=None)
    assert isinstance(refused, RateLimited)
    assert refused.retry_after == 2


async def test_against_ttc_serve_usage_equals_the_servers() -> None:
    options = ServeOptions(port=0, rpm=600, tpm=10**6, sim_thinking=0.5)
    async with running_server(options) as server:
        provider = AnthropicProvider("sim", base_url=server.url)
        total = Usage()
        for budget in (None, 4096):
            completion = await provider.generate(
                ask(Sampling(max_output_tokens=8000, thinking_budget=budget))
            )
            total += completion.usage
            assert completion.rate is not None
            assert completion.rate.limit_requests == 600
            assert completion.rate.limit_tokens == 10**6
        await provider.aclose()
        served = server.stats()["tokens"]
    assert provider.simulated
    assert (total.input_tokens, total.output_tokens, total.thinking_tokens) == (
        served["input"],
        served["output"],
        served["thinking"],
    )
    assert total.thinking_tokens > 0  # only the second request enabled thinking
