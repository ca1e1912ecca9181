"""The HTTP adapters against a hostile OpenAI-compatible server on loopback: an absurd
Retry-After, a body far over the cap, a server that echoes the key, usage that is no count."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakes import Loopback, Reply, Seen, StartHuge, StartLoopback
from fakes import chat_reply as chat

from ttc.adapters.embedders._remote_embed import EmbedOptions, GeminiEmbedder, OpenAIEmbedder
from ttc.adapters.providers._connection import Connection
from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.engine import Usage
from ttc.engine.cli._batchio import usage_tokens
from ttc.engine.contract._errors import ConfigError, RateLimited, ResponseTooLarge
from ttc.engine.contract._types import Message, Request, Sampling
from ttc.engine.send._limiter import Limiter
from ttc.engine.send._retry import RetryPolicy
from ttc.engine.send._sender import Job, Sender

KEY = "sk-hostile-SECRET-0123456789abcdef"


def ask(text: str = "What is 2+2?") -> Request:
    return Request(messages=(Message("user", text),), sampling=Sampling(), item_id="q0")


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


# ── usage that is no count ───────────────────────────────────────────────────────────────────

ANSWER = "x" * 40  # 10 tokens by the engine's estimate; the prompt "What is 2+2?" is 3


@pytest.mark.parametrize(
    "bad", [-1_000_000, -1, 1.5, 12.0, "12", "abc", True, None, [3], 10_000_001, 10**18]
)
async def test_usage_that_is_no_count_is_estimated_and_the_response_kept(
    server: Loopback, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture, bad: Any
) -> None:
    server.default = lambda seen: chat(ANSWER, {"prompt_tokens": bad, "completion_tokens": bad})
    with caplog.at_level(logging.WARNING, logger="ttc"):
        first = await provider.generate(ask())
        again = await provider.generate(ask())
    assert first.texts == (ANSWER,)
    assert first.usage == again.usage == Usage(3, 10, 0)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2  # once per field, not once per response
    assert all(m.startswith("openai: usage ") and "not a token count" in m for m in said)
    assert {m.split()[2] for m in said} == {"prompt_tokens", "completion_tokens"}


@pytest.mark.parametrize("usage", [{}, {"prompt_tokens": 5}, "none", None])
async def test_usage_left_out_is_estimated_too(
    server: Loopback, provider: OpenAIProvider, usage: Any
) -> None:
    server.default = lambda seen: chat(ANSWER, usage)
    completion = await provider.generate(ask())
    assert completion.usage == Usage(5 if usage == {"prompt_tokens": 5} else 3, 10, 0)


async def test_counts_up_to_ten_million_are_believed(
    server: Loopback, provider: OpenAIProvider
) -> None:
    details = {"reasoning_tokens": 4_000_000}
    usage = {"prompt_tokens": 0, "completion_tokens": 10_000_000,
             "completion_tokens_details": details}  # fmt: skip
    server.default = lambda seen: chat(ANSWER, usage)
    assert (await provider.generate(ask())).usage == Usage(0, 6_000_000, 4_000_000)
    details["reasoning_tokens"] = -5  # thinking that is no count is unknown: 0, never negative
    assert (await provider.generate(ask())).usage == Usage(0, 10_000_000, 0)


def gemini_reply(usage: dict[str, Any] | None) -> Reply:
    candidate = {"index": 0, "content": {"role": "model", "parts": [{"text": ANSWER}]},
                 "finishReason": "STOP"}  # fmt: skip
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "g"}
    if usage is not None:
        body["usageMetadata"] = usage
    return Reply(body=body)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"promptTokenCount": -1_000_000, "candidatesTokenCount": 20_000_000}, Usage(3, 10, 0)),
        ({"promptTokenCount": 7, "thoughtsTokenCount": -3}, Usage(7, 10, 0)),
        (None, Usage(3, 10, 0)),
        ({"promptTokenCount": 7, "candidatesTokenCount": 9, "thoughtsTokenCount": 2},
         Usage(7, 9, 2)),
    ],
)  # fmt: skip
async def test_gemini_usage_that_is_no_count_is_estimated(
    loopback: StartLoopback, usage: dict[str, Any] | None, expected: Usage
) -> None:
    server = await loopback(lambda seen: gemini_reply(usage), "")
    provider = GeminiProvider("g", base_url=server.url)
    try:
        completion = await provider.generate(ask())
    finally:
        await provider.aclose()
    assert completion.texts == (ANSWER,)
    assert completion.usage == expected


def test_the_batch_tally_leaves_out_counts_that_are_no_counts() -> None:
    usage = {"total_tokens": -5, "prompt_tokens": -1_000_000, "completion_tokens": 7,
             "input_tokens": "abc", "output_tokens": 2.5}  # fmt: skip
    assert usage_tokens({"usage": usage}) == 7
    assert usage_tokens({"usage": {"total_tokens": 12, "prompt_tokens": -1}}) == 12
    assert usage_tokens({"usage": {"total_tokens": 10**12}}) == 0


# ── a body over the cap ──────────────────────────────────────────────────────────────────────

MiB = 2**20


@pytest.mark.parametrize("status", [200, 500])
async def test_a_body_over_the_cap_fails_at_once_read_no_further_than_the_cap(
    huge: StartHuge, status: int
) -> None:
    server = await huge(256 * MiB, status=status)
    provider = OpenAIProvider(
        "m", base_url=server.url, connection=Connection(max_response_bytes=MiB)
    )
    try:
        with pytest.raises(ResponseTooLarge) as caught:
            await provider.generate(ask())
        assert str(caught.value) == "openai: response body over 1 MiB (--max-response-bytes)"
        assert not caught.value.retryable  # as large again next time
        # The server could write no more than the socket buffers hold past the cap.
        assert await server.finished() < 32 * MiB
        # The provider still works: the next answer, under the cap, is read.
        small = await huge(1000)
        ok = OpenAIProvider("m", base_url=small.url, connection=Connection(max_response_bytes=MiB))
        try:
            assert len((await ok.generate(ask())).texts[0]) == 65536
        finally:
            await ok.aclose()
    finally:
        await provider.aclose()


async def test_the_default_cap_is_32_mib_and_a_declared_length_is_refused_unread(
    huge: StartHuge, provider: OpenAIProvider
) -> None:
    server = await huge(MiB, declare=33 * MiB)
    p = OpenAIProvider("m", base_url=server.url, api_key=KEY)
    try:
        with pytest.raises(
            ResponseTooLarge, match=r"^openai: response body over 32 MiB \(--max-response-bytes\)$"
        ):
            await p.generate(ask())
    finally:
        await p.aclose()


async def test_an_answer_at_the_cap_is_read_whole(huge: StartHuge) -> None:
    server = await huge(65536)
    body = (
        len(b'{"choices": [{"index": 0, "message": {"content": "')
        + 65536
        + len(b'"}, "finish_reason": "stop"}]}')
    )
    exact = OpenAIProvider("m", base_url=server.url, connection=Connection(max_response_bytes=body))
    short = OpenAIProvider(
        "m", base_url=server.url, connection=Connection(max_response_bytes=body - 1)
    )
    try:
        assert (await exact.generate(ask())).texts == ("x" * 65536,)
        with pytest.raises(ResponseTooLarge, match=f"over {body - 1:,} bytes"):
            await short.generate(ask())
    finally:
        await exact.aclose()
        await short.aclose()


async def test_batch_raw_posts_are_capped_too(huge: StartHuge) -> None:
    server = await huge(4 * MiB)
    provider = OpenAIProvider(
        "m", base_url=server.url, connection=Connection(max_response_bytes=MiB)
    )
    try:
        with pytest.raises(ResponseTooLarge):
            await provider.post_json("/chat/completions", {"model": "m", "messages": []})
    finally:
        await provider.aclose()


async def test_gemini_on_its_own_session_is_capped(huge: StartHuge) -> None:
    server = await huge(256 * MiB, prefix="")
    provider = GeminiProvider(
        "g", base_url=server.url, connection=Connection(max_response_bytes=MiB)
    )
    try:
        with pytest.raises(ResponseTooLarge, match=r"^gemini: response body over 1 MiB"):
            await provider.generate(ask())
    finally:
        await provider.aclose()
    assert await server.finished() < 32 * MiB


@pytest.mark.parametrize("vendor", ["openai", "gemini"])
async def test_the_api_embedders_are_capped_and_do_not_retry_it(
    huge: StartHuge, vendor: str
) -> None:
    server = await huge(256 * MiB, prefix="/v1" if vendor == "openai" else "")
    options = EmbedOptions(max_response_bytes=MiB, max_attempts=3, backoff_s=0.001)
    embedder = (
        OpenAIEmbedder("e", base_url=server.url, api_key=KEY, options=options)
        if vendor == "openai"
        else GeminiEmbedder("e", base_url=server.url, options=options)
    )
    with pytest.raises(ResponseTooLarge, match="response body over 1 MiB"):
        await asyncio.to_thread(embedder.embed, ["a"])
    assert await server.finished() < 32 * MiB
    assert len(server.sent) == 1  # not retried


@pytest.mark.parametrize("cap", [0, -1, 1.5, True])
def test_a_cap_below_one_byte_is_a_config_error(cap: Any) -> None:
    with pytest.raises(ConfigError, match="max_response_bytes"):
        OpenAIProvider(
            "m", base_url="http://127.0.0.1:9/v1", connection=Connection(max_response_bytes=cap)
        )


# ── a server that echoes the key ─────────────────────────────────────────────────────────────


def echo(seen: Seen) -> Reply:
    said = f"auth={seen.headers.get('Authorization')} goog={seen.headers.get('x-goog-api-key')}"
    choice = {"index": 0, "message": {"content": said, "refusal": said}, "finish_reason": said}
    return Reply(body={"model": said, "choices": [choice], said: {"nested": [said]}})


async def test_every_string_of_an_echoed_answer_is_redacted(
    server: Loopback, provider: OpenAIProvider
) -> None:
    server.default = echo
    completion = await provider.generate(ask())
    assert completion.texts == ("auth=Bearer [redacted] goog=None",)
    assert completion.finish_reasons == completion.texts
    assert completion.model == completion.texts[0]
    status, body, _ = await provider.post_json("/chat/completions", {"model": "m"})
    assert status == 200
    assert KEY not in repr(body)
    assert body["auth=Bearer [redacted] goog=None"] == {
        "nested": ["auth=Bearer [redacted] goog=None"]
    }
    server.default = lambda seen: Reply(400, {"error": {"message": f"bad key {KEY}"}})
    status, body, _ = await provider.post_json("/chat/completions", {"model": "m"})
    assert (status, body) == (400, {"error": {"message": "bad key [redacted]"}})


async def test_a_credential_in_the_base_url_is_sent_and_never_shown(server: Loopback) -> None:
    server.default = echo
    password = "PaSsWoRd-0123456789"
    basic = base64.b64encode(f"me:{password}".encode()).decode()
    host = server.url.removeprefix("http://")
    url = f"http://me:{password}@{host}/?api_key=QKEY-0123&x=1"
    provider = OpenAIProvider("m", base_url=url, api_key=KEY)
    try:
        completion = await provider.generate(ask())
    finally:
        await provider.aclose()
    seen = server.seen[0]
    assert (seen.path, seen.query) == ("/v1/chat/completions", "api_key=QKEY-0123&x=1")
    assert seen.headers["Authorization"] == f"Basic {basic}"  # in place of the bearer key
    assert completion.texts == ("auth=Basic [redacted] goog=None",)
    shown = f"http://REDACTED@{host}/?api_key=REDACTED&x=1"
    assert provider.base_url == provider.endpoint == shown
    assert password not in repr(provider)


async def test_gemini_redacts_the_key_it_sends_and_takes_a_key_from_the_url(
    loopback: StartLoopback,
) -> None:
    server = await loopback(
        lambda seen: Reply(
            body={"candidates": [{"index": 0, "content": {"role": "model", "parts": [
                {"text": f"goog={seen.headers.get('x-goog-api-key')} q={seen.query}"}]}}],
                "modelVersion": f"v {seen.headers.get('x-goog-api-key')}"}
        ),
        "",
    )  # fmt: skip
    provider = GeminiProvider("g", base_url=f"{server.url}?key=AIza-url-0123456789&alt=json")
    try:
        completion = await provider.generate(ask())
    finally:
        await provider.aclose()
    assert server.seen[0].headers["x-goog-api-key"] == "AIza-url-0123456789"
    assert completion.texts == ("goog=[redacted] q=alt=json",)
    assert completion.model == "v [redacted]"
    assert provider.endpoint == f"{server.url}?key=REDACTED&alt=json"


def test_the_embedders_show_their_url_without_its_credentials() -> None:
    url = "http://me:PaSsWoRd-0123@127.0.0.1:9/v1?key=QKEY-0123"
    for embedder in (OpenAIEmbedder("e", base_url=url), GeminiEmbedder("e", base_url=url)):
        assert "PaSsWoRd" not in repr(embedder)
        assert "QKEY" not in repr(embedder)


@pytest.mark.parametrize("url", ["http://me:PaSsWoRd-0123@[::1/v1", "ftp://me:PaSsWoRd-0123@h/v1"])
def test_a_bad_base_url_is_refused_without_its_credentials(url: str) -> None:
    with pytest.raises(ConfigError, match="base_url must be an http") as caught:
        OpenAIProvider("m", base_url=url)
    assert "PaSsWoRd" not in str(caught.value)


async def test_gemini_sends_user_and_password_of_its_url_as_basic_auth(
    loopback: StartLoopback,
) -> None:
    server = await loopback(lambda seen: gemini_reply(None), "")
    host = server.url.removeprefix("http://")
    provider = GeminiProvider("g", base_url=f"http://me:PaSsWoRd-0123@{host}")
    try:
        await provider.generate(ask())
    finally:
        await provider.aclose()
    basic = base64.b64encode(b"me:PaSsWoRd-0123").decode()
    assert server.seen[0].headers["Authorization"] == f"Basic {basic}"
    assert provider.endpoint == f"http://REDACTED@{host}"
