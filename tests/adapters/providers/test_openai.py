"""OpenAIProvider and OpenAIEmbedder against a real loopback HTTP server that follows a script
(the shared `loopback` fixture)."""

from __future__ import annotations

import asyncio
import email.utils
import math
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from fakes import Loopback, Reply, Seen, StartLoopback

from ttc.adapters.embedders._remote_embed import EmbedOptions, OpenAIEmbedder
from ttc.adapters.providers._connection import Connection
from ttc.adapters.providers._http import (
    google_retry_delay,
    parse_duration,
    rate_info,
    retry_after,
    status_error,
)
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine.contract._errors import (
    BadRequest,
    ConfigError,
    Fatal,
    ProviderError,
    RateLimited,
    Transient,
)
from ttc.engine.contract._types import (
    Embedder,
    Message,
    Provider,
    RateInfo,
    Request,
    Sampling,
    Usage,
)

KEY = "sk-test-SECRET-0123456789"
DEFAULTS = Sampling()
RATE_HEADERS = {
    "x-ratelimit-limit-requests": "500",
    "x-ratelimit-limit-tokens": "30000",
    "x-ratelimit-remaining-requests": "499",
    "x-ratelimit-remaining-tokens": "29000",
    "x-ratelimit-reset-requests": "120ms",
    "x-ratelimit-reset-tokens": "6m0s",
}


def chat_reply(seen: Seen) -> Reply:
    """A well-formed completion with n choices, sent in reverse index order."""
    n = seen.body.get("n", 1)
    choices = [
        {
            "index": i,
            "message": {"role": "assistant", "content": f"answer {i}"},
            "finish_reason": "stop",
        }
        for i in reversed(range(n))
    ]
    usage = {
        "prompt_tokens": 11,
        "completion_tokens": 100,
        "completion_tokens_details": {"reasoning_tokens": 60},
    }
    body = {"model": "gpt-test-2025", "choices": choices, "usage": usage}
    return Reply(body=body, headers=RATE_HEADERS)


def embedding_reply(seen: Seen) -> Reply:
    """Embeddings of dimension 3, in reverse index order; text i gets (len, 1, 0)."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0]}
        for i, text in enumerate(seen.body["input"])
    ]
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return Reply(body={"object": "list", "data": data[::-1], "model": "e", "usage": usage})


@pytest.fixture
async def server(loopback: StartLoopback) -> Loopback:
    return await loopback(chat_reply, "/v1")


@pytest.fixture
async def provider(server: Loopback) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("gpt-test", base_url=server.url, api_key=KEY)
    yield p
    await p.aclose()


def ask(n: int = 1, sampling: Sampling = DEFAULTS) -> Request:
    return Request(messages=(Message("user", "What is 2+2?"),), sampling=sampling, n=n)


def no_key_in(exc: BaseException) -> None:
    """The key appears in no message of the error, nor of any error a traceback shows with it."""
    link: BaseException | None = exc
    while link is not None:
        assert KEY not in str(link)
        assert KEY not in repr(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)


# ── requests and responses ───────────────────────────────────────────────────────────────────


async def test_body_fields_texts_usage_and_rate(server: Loopback, provider: OpenAIProvider) -> None:
    sampling = Sampling(
        temperature=0.7,
        top_p=0.95,
        top_k=40,
        seed=7,
        max_output_tokens=512,
        reasoning_effort="high",
        verbosity="low",
    )
    completion = await provider.generate(ask(3, sampling))

    assert isinstance(provider, Provider)
    seen = server.seen[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "What is 2+2?"}],
        "n": 3,
        "temperature": 0.7,
        "top_p": 0.95,
        "seed": 7,
        "max_completion_tokens": 512,
        "reasoning_effort": "high",
        "verbosity": "low",
        "top_k": 40,  # a local server: top_k is accepted
    }
    assert completion.texts == ("answer 0", "answer 1", "answer 2")
    assert completion.finish_reasons == ("stop", "stop", "stop")
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 40)
    assert completion.usage.thinking_tokens == 60
    assert completion.model == "gpt-test-2025"
    assert completion.latency_s > 0
    assert completion.rate == RateInfo(500, 30000, 499, 29000, 0.12, 360.0)


async def test_unset_sampling_is_not_sent(server: Loopback, provider: OpenAIProvider) -> None:
    await provider.generate(ask())
    assert set(server.seen[0].body) == {"model", "messages", "n"}


async def test_top_k_only_where_accepted(server: Loopback) -> None:
    refusing = OpenAIProvider("m", base_url=server.url, api_key=KEY, send_top_k=False)
    try:
        await refusing.generate(ask(1, Sampling(top_k=5)))
    finally:
        await refusing.aclose()
    assert "top_k" not in server.seen[0].body
    assert OpenAIProvider("m", api_key=KEY).send_top_k is False  # api.openai.com rejects it
    assert OpenAIProvider("m", base_url="http://10.0.0.5:8000/v1").send_top_k is True


async def test_extra_body_and_none_content(server: Loopback, provider: OpenAIProvider) -> None:
    p = OpenAIProvider("m", base_url=server.url, extra_body={"chat_template_kwargs": {"x": 1}})
    choices = [
        {"index": 1, "message": {"content": "b"}, "finish_reason": "length"},
        {"index": 0, "message": {"content": None}, "finish_reason": "stop"},
    ]
    server.script.append(Reply(body={"choices": choices}))
    try:
        completion = await p.generate(ask(2))
    finally:
        await p.aclose()
    assert server.seen[0].body["chat_template_kwargs"] == {"x": 1}
    assert "Authorization" not in server.seen[0].headers  # a local server, no key
    assert completion.texts == ("", "b")
    assert completion.finish_reasons == ("stop", "length")
    # No usage sent: estimated from the text ("What is 2+2?" is 12 characters, "b" one).
    assert completion.usage == Usage(3, 0, 0)
    assert completion.rate is None
    assert completion.model == "m"


# ── header parsing ───────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("1.5s", 1.5),
        ("3", 3.0),
        ("0.25", 0.25),
        ("500us", 0.0005),
        ("", None),
        ("soon", None),
        ("1x", None),
        ("nan", None),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    parsed = parse_duration(text)
    assert parsed == seconds if seconds is None else math.isclose(parsed or -1, seconds)


def test_rate_info_absent_and_partial() -> None:
    assert rate_info({}) is None
    assert rate_info({"x-ratelimit-remaining-requests": "0"}) == RateInfo(remaining_requests=0)


def test_retry_after_formats() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "2"}) == 2.0
    assert 28 <= (retry_after({"retry-after": date}, now=now) or 0) <= 31
    assert retry_after({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}) == 0.0
    assert retry_after({"retry-after": "whenever"}) is None
    assert retry_after({}) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "-5"},
        {"retry-after": "nan"},
        {"retry-after": "inf"},
        {"retry-after": "1e400"},
        {"retry-after": "9" * 400 + "s"},
        {"retry-after": "Mon, 99 Foo 2024 25:61:00 GMT"},
        {"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"},
        {"retry-after": "Fri, 31 Dec 2027 23:59:59"},  # no zone
        {"retry-after": ", , ,"},
        {"retry-after-ms": "soon", "retry-after": "later"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "-1"},
        {"retry-after-ms": "1e400"},
    ],
)
def test_garbage_retry_after_is_none(headers: dict[str, str]) -> None:
    assert retry_after(headers) is None


def test_garbage_rate_headers_are_none() -> None:
    garbage = {
        "x-ratelimit-limit-requests": "lots",
        "x-ratelimit-remaining-tokens": "-3",
        "x-ratelimit-reset-requests": "9" * 400 + "s",
        "x-ratelimit-reset-tokens": "nan",
    }
    assert rate_info(garbage) is None


def test_google_retry_info() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"},
            ],
        }
    }
    assert google_retry_delay(body) == 1.5
    assert google_retry_delay([body]) == 1.5
    assert google_retry_delay({"error": {}}) is None
    error = status_error(429, {}, body, who="g")
    assert isinstance(error, RateLimited)
    assert error.retry_after == 1.5


def retry_info(delay: Any) -> dict[str, Any]:
    detail = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
    return {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [detail]}}


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [
        ({"seconds": 3, "nanos": 500_000_000}, 3.5),
        ({"seconds": "3"}, 3.0),  # proto3 JSON writes an int64 as a string
        ({"nanos": 250_000_000}, 0.25),
        ({"seconds": "x"}, None),
        ({"seconds": -1}, None),
        ({"seconds": float("nan")}, None),
        ({"seconds": float("inf")}, None),
        ({"seconds": "1e400"}, None),
        ({"seconds": 10**400}, None),
        ({"seconds": 1, "nanos": "lots"}, None),
        ({"seconds": True}, None),
        ({"seconds": [1]}, None),
        ("-3s", None),
        ("nans", None),
        ("infs", None),
        ("soon", None),
        (7, None),
        (None, None),
    ],
)
def test_malformed_retry_info_is_none(delay: Any, seconds: float | None) -> None:
    assert google_retry_delay(retry_info(delay)) == seconds
    error = status_error(429, {}, retry_info(delay), who="g")  # never raises either
    assert isinstance(error, RateLimited)
    assert error.retry_after == seconds


def quota_failure(quota_id: str, metric: str = "generate_content_free_tier_requests") -> Any:
    """A Gemini 429 as the API sends one: a QuotaFailure, a Help link and a RetryInfo."""
    violation = {
        "quotaMetric": f"generativelanguage.googleapis.com/{metric}",
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-2.5-pro"},
        "quotaValue": "50",
    }
    details = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{"url": "https://ai.dev"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"},
    ]
    message = "You exceeded your current quota, please check your plan and billing details."
    return {
        "error": {
            "code": 429,
            "message": message,
            "status": "RESOURCE_EXHAUSTED",
            "details": details,
        }
    }


def test_a_daily_quota_stops_the_run_a_per_minute_one_waits() -> None:
    daily = status_error(
        429, {}, quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"), who="g"
    )
    assert isinstance(daily, Fatal)
    assert daily.stops_run
    assert "GenerateRequestsPerDayPerProjectPerModel-FreeTier" in str(daily)
    by_metric = status_error(
        429, {}, quota_failure("SomeQuota", metric="requests_PerDay_per_project"), who="g"
    )
    assert isinstance(by_metric, Fatal)
    assert by_metric.stops_run
    minute = status_error(
        429, {}, quota_failure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"), who="g"
    )
    assert isinstance(minute, RateLimited)
    assert minute.retry_after == 17.0


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, None),
        (403, None),
        (429, "insufficient_quota"),
        (429, "billing_not_active"),
        (400, "billing_hard_limit_reached"),
        (401, "account_deactivated"),
        (400, "invalid_api_key"),
        (400, "API_KEY_INVALID"),
        (403, "PERMISSION_DENIED"),
        (500, "PERMISSION_DENIED"),
    ],
)
def test_account_refusals_stop_the_run(status: int, code: str | None) -> None:
    error = {"message": "refused", "code": code, "type": code}
    caught = status_error(status, {"retry-after": "1"}, {"error": error}, who="x")
    assert isinstance(caught, Fatal)
    assert caught.stops_run


@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, RateLimited), (503, Transient), (400, BadRequest), (404, BadRequest), (302, Fatal)],
)
def test_request_failures_do_not_stop_the_run(status: int, kind: type[ProviderError]) -> None:
    error = {"message": "no", "code": "rate_limit_exceeded", "type": "requests"}
    caught = status_error(status, {}, {"error": error}, who="x")
    assert type(caught) is kind
    assert not getattr(caught, "stops_run", False)


# ── errors ───────────────────────────────────────────────────────────────────────────────────


def too_many(headers: dict[str, str]) -> Reply:
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}
    return Reply(429, body, headers)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "250", "retry-after": "7"}, 0.25),
        # A per-minute limit refills continuously: 30000 tokens a minute have room for 1000
        # more after 2 s, long before the full reset of 6 minutes.
        ({**RATE_HEADERS, "x-ratelimit-remaining-tokens": "0"}, 2.0),
        ({**RATE_HEADERS, "x-ratelimit-remaining-requests": "0"}, 0.12),
        # 500 requests a minute: one more after 0.12 s, however far the full reset is...
        (
            {
                **RATE_HEADERS,
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "30s",
            },
            0.12,
        ),
        # ...never later than the reset itself, and the reset as is when the limit is unknown.
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1.5s"}, 1.5),
        (
            {
                "x-ratelimit-limit-tokens": "60",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "3s",
            },
            3.0,
        ),
        (RATE_HEADERS, None),
        ({}, None),
    ],
)
async def test_429_retry_after(
    server: Loopback, provider: OpenAIProvider, headers: dict[str, str], wait: float | None
) -> None:
    server.script.append(too_many(headers))
    with pytest.raises(RateLimited, match="HTTP 429: Rate limit reached") as caught:
        await provider.generate(ask())
    assert caught.value.retry_after == wait
    assert caught.value.rate == rate_info(headers)


async def test_429_http_date(server: Loopback, provider: OpenAIProvider) -> None:
    server.script.append(
        too_many({"Retry-After": email.utils.formatdate(time.time() + 30, usegmt=True)})
    )
    with pytest.raises(RateLimited) as caught:
        await provider.generate(ask())
    assert 25 <= (caught.value.retry_after or 0) <= 31


async def test_insufficient_quota_is_fatal(server: Loopback, provider: OpenAIProvider) -> None:
    said = "You exceeded your current quota"
    error = {"message": said, "type": "insufficient_quota", "code": "insufficient_quota"}
    server.script.append(Reply(429, {"error": error}, {"retry-after": "1"}))
    with pytest.raises(Fatal, match="exceeded your current quota") as caught:
        await provider.generate(ask())
    assert not caught.value.retryable
    assert caught.value.stops_run


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 409, 529])
async def test_server_errors_are_transient(
    server: Loopback, provider: OpenAIProvider, status: int
) -> None:
    server.script.append(Reply(status, {"error": {"message": "overloaded"}}))
    with pytest.raises(Transient, match=f"HTTP {status}: overloaded"):
        await provider.generate(ask())


async def test_reset_mid_body_is_transient(server: Loopback, provider: OpenAIProvider) -> None:
    server.script.append(Reply(cut=b'{"choices": [{"index": 0, "mess'))
    with pytest.raises(Transient):
        await provider.generate(ask())
    assert (await provider.generate(ask())).texts == ("answer 0",)  # the next attempt is fine


async def test_truncated_json_is_transient(server: Loopback, provider: OpenAIProvider) -> None:
    server.script.append(Reply(body=b'{"choices": [{"index": 0, "message": {"con'))
    with pytest.raises(Transient, match="truncated body"):
        await provider.generate(ask())
    server.script.append(Reply(body=b"<html>bad gateway</html>"))
    with pytest.raises(Transient, match="truncated body"):
        await provider.generate(ask())


@pytest.mark.parametrize("body", [{"choices": []}, {"model": "m"}, {"error": {"message": "oops"}}])
async def test_empty_choices_are_transient(
    server: Loopback, provider: OpenAIProvider, body: dict[str, Any]
) -> None:
    server.script.append(Reply(body=body))
    with pytest.raises(Transient, match="empty choices"):
        await provider.generate(ask())


async def test_a_refusal_is_the_text_and_tool_calls_keep_their_reason(
    server: Loopback, provider: OpenAIProvider
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    choices = [
        {
            "index": 0,
            "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
            "finish_reason": "stop",
        },
        {
            "index": 1,
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "finish_reason": "tool_calls",
        },
        {
            "index": 2,
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "finish_reason": None,
        },
        {
            "index": 3,
            "message": {"role": "assistant", "content": "4", "refusal": None},
            "finish_reason": "stop",
        },
    ]
    server.script.append(Reply(body={"choices": choices}))
    completion = await provider.generate(ask(4))
    assert completion.texts == ("I can't help.", "", "", "4")
    assert completion.finish_reasons == ("refusal", "tool_calls", "tool_calls", "stop")


async def test_bad_request_quotes_the_server(server: Loopback, provider: OpenAIProvider) -> None:
    said = "Unsupported value: 'temperature' does not support 0.7 with this model. " + "x" * 1000
    server.script.append(Reply(400, {"error": {"message": said, "param": "temperature"}}))
    with pytest.raises(BadRequest, match="HTTP 400: Unsupported value: 'temperature'") as caught:
        await provider.generate(ask())
    assert len(str(caught.value)) < 400
    assert str(caught.value).endswith("...")
    for status in (404, 413, 422):
        server.script.append(Reply(status, {"detail": "no such thing"}))
        with pytest.raises(BadRequest, match="no such thing"):
            await provider.generate(ask())


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_fatal_and_never_show_the_key(
    server: Loopback, provider: OpenAIProvider, status: int
) -> None:
    server.script.append(
        Reply(status, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    )
    with pytest.raises(Fatal, match="Incorrect API key provided") as caught:
        await provider.generate(ask())
    assert caught.value.stops_run
    no_key_in(caught.value)
    assert KEY not in repr(provider)
    assert KEY not in str(vars(provider).get("name"))


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = OpenAIProvider("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    try:
        with pytest.raises(Transient) as caught:
            await p.generate(ask())
    finally:
        await p.aclose()
    no_key_in(caught.value)


KEYS_AS_NAMES = [
    KEY,
    "sk-proj-AbC123",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",  # a Gemini key with no "-"
    "gsk_Qw8ErTy5UiOp3AsDf7GhJk",
    "MY KEY",
    "1PASSWORD",
    "$OPENAI_API_KEY",
]


@pytest.mark.parametrize("value", KEYS_AS_NAMES)
def test_a_key_given_as_the_env_name_is_refused_unrepeated(value: str) -> None:
    from ttc.engine.cli import api_provider

    for make in (
        lambda: OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", api_key_env=value),
        lambda: OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", api_key_env=value),
        lambda: api_provider("openai", "gpt-5", None, value),
        lambda: api_provider("gemini", "gemini-2.5-pro", None, value),
    ):
        with pytest.raises(ConfigError, match="NAME of an environment variable") as caught:
            make()
        assert value not in str(caught.value)
    with pytest.raises(ConfigError, match=r"^--api-key-env: expected the NAME"):
        api_provider("openai", "gpt-5", None, value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "_X", "my_key_2", "AZURE_OPENAI_KEY_2024"])
def test_env_names_are_accepted(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, KEY)
    provider = OpenAIProvider("m", api_key_env=name)
    assert provider._key == KEY


async def test_endpoint_is_the_base_url_without_a_slash(server: Loopback) -> None:
    assert OpenAIProvider("m", api_key=KEY).endpoint == "https://api.openai.com/v1"
    local = OpenAIProvider("m", base_url=server.url + "/")
    assert local.endpoint == server.url
    await local.generate(ask())
    assert server.seen[-1].path == "/v1/chat/completions"
    await local.aclose()


def test_missing_key_for_openai_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-5")
    monkeypatch.setenv("MY_KEY", KEY)
    assert KEY not in repr(OpenAIProvider("gpt-5", api_key_env="MY_KEY"))
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIProvider("m", base_url="localhost:8000")


# ── sessions and the raw pass-through ────────────────────────────────────────────────────────


async def test_session_ownership(server: Loopback) -> None:
    async with aiohttp.ClientSession() as session:
        theirs = OpenAIProvider("m", base_url=server.url, connection=Connection(session))
        await theirs.generate(ask())
        await theirs.aclose()
        assert not session.closed
    ours = OpenAIProvider("m", base_url=server.url, connection=Connection(max_connections=4))
    await ours.generate(ask())
    own = ours._session
    assert own is not None
    assert own.connector is not None
    assert own.connector.limit == 4
    await ours.aclose()
    assert own.closed


async def test_post_json(server: Loopback, provider: OpenAIProvider) -> None:
    status, body, rate = await provider.post_json("/chat/completions", {"model": "x", "n": 1})
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "answer 0"
    assert rate is not None
    assert rate.limit_requests == 500
    assert server.seen[-1].body == {"model": "x", "n": 1}

    server.script.append(
        Reply(400, {"error": {"message": "bad input"}}, {"x-ratelimit-limit-requests": "9"})
    )
    status, body, rate = await provider.post_json("/embeddings", {"input": []})
    assert (status, body, rate) == (
        400,
        {"error": {"message": "bad input"}},
        RateInfo(limit_requests=9),
    )
    assert server.seen[-1].path == "/v1/embeddings"

    server.script.append(Reply(404, b"not found"))
    assert (await provider.post_json("/nothing", {}))[:2] == (404, "not found")

    for reply, error in [
        (too_many({"retry-after": "3"}), RateLimited),
        (Reply(503, {"error": {"message": "busy"}}), Transient),
        (Reply(401, {"error": {"message": "no"}}), Fatal),
        (Reply(cut=b'{"da'), Transient),
    ]:
        server.script.append(reply)
        with pytest.raises(error):
            await provider.post_json("/chat/completions", {})


@pytest.mark.parametrize(
    ("path", "body", "said"),
    [
        ("/chat/completions", {"choices": []}, "empty choices"),
        ("chat/completions", {"id": "x", "usage": {}}, "empty choices"),
        ("/completions", {"choices": None}, "empty choices"),
        ("/chat/completions", [1, 2], "truncated body"),
        ("/chat/completions", "just text", "truncated body"),
        ("/chat/completions", {"error": {"message": "upstream died"}}, "upstream died"),
        (
            "/chat/completions",
            {"choices": [{"message": {"content": "x"}}], "error": {"message": "mid-way"}},
            "mid-way",
        ),
        ("/embeddings", {"object": "list", "data": []}, "empty data"),
        ("/embeddings", {"object": "list"}, "empty data"),
        ("/embeddings", {"data": [{"embedding": [1.0]}], "error": {"message": "x"}}, "error"),
    ],
)
async def test_post_json_2xx_without_an_answer_is_transient(
    server: Loopback, provider: OpenAIProvider, path: str, body: Any, said: str
) -> None:
    server.script.append(Reply(body=body))
    with pytest.raises(Transient, match=said):
        await provider.post_json(path, {"model": "x"})


async def test_post_json_passes_other_2xx_bodies_through(
    server: Loopback, provider: OpenAIProvider
) -> None:
    server.script.append(Reply(body={"data": [{"embedding": [1.0]}]}))
    assert (await provider.post_json("/embeddings", {}))[:2] == (
        200,
        {"data": [{"embedding": [1.0]}]},
    )
    server.script.append(Reply(body={"id": "resp_1", "output": [], "error": None}))
    assert (await provider.post_json("/responses", {}))[1]["id"] == "resp_1"


# ── the embedder ─────────────────────────────────────────────────────────────────────────────


@pytest.fixture
async def embed_server(loopback: StartLoopback) -> Loopback:
    return await loopback(embedding_reply, "/v1")


async def test_embedder_batches_and_normalises(embed_server: Loopback) -> None:
    embedder = OpenAIEmbedder(
        base_url=embed_server.url, api_key=KEY, options=EmbedOptions(batch_size=2)
    )
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = await asyncio.to_thread(embedder.embed, texts)
    assert isinstance(embedder, Embedder)
    assert len(embed_server.seen) == math.ceil(len(texts) / 2)
    assert [s.body["input"] for s in embed_server.seen] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert embed_server.seen[0].body["model"] == "text-embedding-3-small"
    assert embed_server.seen[0].body["encoding_format"] == "float"
    assert "dimensions" not in embed_server.seen[0].body
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    expected = np.array([[len(t), 1.0, 0.0] for t in texts]) / np.sqrt(
        [[len(t) ** 2 + 1] for t in texts]
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert embedder.dim == 3
    assert len(embed_server.seen) == 3
    assert embedder.name == "openai:text-embedding-3-small"


async def test_embedder_learns_dim_by_probe_and_sends_dimensions(embed_server: Loopback) -> None:
    probe = OpenAIEmbedder("local-embed", base_url=embed_server.url)
    assert await asyncio.to_thread(lambda: probe.dim) == 3
    assert len(embed_server.seen) == 1
    assert OpenAIEmbedder(api_key=KEY).dim == 1536  # OpenAI's own model: known, no request
    sized = OpenAIEmbedder(base_url=embed_server.url, options=EmbedOptions(dim=3))
    await asyncio.to_thread(sized.embed, ["x"])
    assert embed_server.seen[-1].body["dimensions"] == 3


async def test_embedder_retries_rate_limits_then_gives_up(embed_server: Loopback) -> None:
    embedder = OpenAIEmbedder(
        base_url=embed_server.url,
        api_key=KEY,
        options=EmbedOptions(backoff_s=0.001, max_attempts=3),
    )
    embed_server.script += [
        too_many({"retry-after-ms": "5"}),
        Reply(503, {"error": {"message": "x"}}),
    ]
    vectors = await asyncio.to_thread(embedder.embed, ["a", "b"])
    assert vectors.shape == (2, 3)
    assert len(embed_server.seen) == 3

    embed_server.script += [Reply(500, {}), Reply(500, {}), Reply(500, {})]
    with pytest.raises(Transient):
        await asyncio.to_thread(embedder.embed, ["a"])
    assert len(embed_server.seen) == 6

    embed_server.script.append(Reply(401, {"error": {"message": f"bad key {KEY}"}}))
    with pytest.raises(Fatal) as caught:
        await asyncio.to_thread(embedder.embed, ["a"])
    assert len(embed_server.seen) == 7  # not retried
    no_key_in(caught.value)

    embed_server.script.append(Reply(400, {"error": {"message": "too long"}}))
    with pytest.raises(BadRequest, match="too long"):
        await asyncio.to_thread(embedder.embed, ["a"])
    assert isinstance(caught.value, ProviderError)
