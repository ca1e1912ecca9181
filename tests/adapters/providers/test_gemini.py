"""GeminiProvider and GeminiEmbedder through google-genai against a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import numpy as np
import pytest
from fakes import Loopback, Reply, Seen, StartLoopback

from ttc.adapters.embedders._remote_embed import EmbedOptions, GeminiEmbedder
from ttc.adapters.providers._connection import Connection
from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.sim._serve import ServeOptions, running_server
from ttc.engine.contract._errors import BadRequest, ConfigError, Fatal, RateLimited, Transient
from ttc.engine.contract._types import Embedder, Message, Provider, Request, Sampling

KEY = "AIza-test-SECRET-0123456789"
DEFAULTS = Sampling()


def generate_reply(seen: Seen) -> Reply:
    """candidateCount candidates, in reverse index order, each with a thought part first."""
    n = seen.body.get("generationConfig", {}).get("candidateCount", 1)
    candidates = [
        {
            "index": i,
            "content": {
                "role": "model",
                "parts": [{"text": "let me think", "thought": True}, {"text": f"answer {i}"}],
            },
            "finishReason": "STOP" if i == 0 else "MAX_TOKENS",
        }
        for i in reversed(range(n))
    ]
    usage = {
        "promptTokenCount": 11,
        "candidatesTokenCount": 40,
        "thoughtsTokenCount": 60,
        "totalTokenCount": 111,
    }
    body = {"candidates": candidates, "usageMetadata": usage, "modelVersion": "gemini-test-001"}
    return Reply(body=body)


def embed_reply(seen: Seen) -> Reply:
    """Embeddings of dimension 3: text t gets (len(t), 1, 0)."""
    texts = [r["content"]["parts"][0]["text"] for r in seen.body["requests"]]
    return Reply(body={"embeddings": [{"values": [float(len(t)), 1.0, 0.0]} for t in texts]})


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> Reply:
    error = {"code": code, "message": message, "status": status, "details": list(details)}
    return Reply(code, {"error": error})


@pytest.fixture
async def server(loopback: StartLoopback) -> Loopback:
    return await loopback(generate_reply, "/")


@pytest.fixture
async def provider(server: Loopback) -> AsyncIterator[GeminiProvider]:
    p = GeminiProvider("gemini-test", base_url=server.url, api_key=KEY)
    yield p
    await p.aclose()


def ask(n: int = 1, sampling: Sampling = DEFAULTS) -> Request:
    messages = (Message("system", "Be brief."), Message("user", "What is 2+2?"))
    return Request(messages=messages, sampling=sampling, n=n)


def no_key_in(exc: BaseException) -> None:
    """The key appears in no message of the error, nor of any error a traceback shows with it."""
    link: BaseException | None = exc
    while link is not None:
        assert KEY not in str(link)
        assert KEY not in repr(link)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)


async def test_request_and_usage_split(server: Loopback, provider: GeminiProvider) -> None:
    sampling = Sampling(
        temperature=0.6,
        top_p=0.9,
        top_k=20,
        seed=3,
        max_output_tokens=65_536,
        thinking_budget=24_576,
    )
    completion = await provider.generate(ask(3, sampling))

    assert isinstance(provider, Provider)
    [seen] = server.seen
    assert seen.path == "/v1/models/gemini-test:generateContent"
    assert seen.headers["x-goog-api-key"] == KEY
    assert seen.body["contents"] == [{"role": "user", "parts": [{"text": "What is 2+2?"}]}]
    assert seen.body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    generation = dict(seen.body["generationConfig"])
    # google-genai 3.4 sends the nested ThinkingConfig with its Python field names; the API's
    # proto JSON parser accepts both spellings.
    thinking = generation.pop("thinkingConfig")
    assert thinking.get("thinkingBudget", thinking.get("thinking_budget")) == 24_576
    assert generation == {
        "temperature": 0.6,
        "topP": 0.9,
        "topK": 20,
        "seed": 3,
        "candidateCount": 3,
        "maxOutputTokens": 65_536,
    }
    assert completion.texts == ("answer 0", "answer 1", "answer 2")  # thoughts left out
    assert completion.finish_reasons == ("stop", "length", "length")
    usage = completion.usage
    assert (usage.input_tokens, usage.output_tokens, usage.thinking_tokens) == (11, 40, 60)
    assert completion.model == "gemini-test-001"
    assert completion.rate is None


async def test_no_thinking_config_unless_asked(server: Loopback, provider: GeminiProvider) -> None:
    await provider.generate(ask())
    assert server.seen[0].body["generationConfig"] == {"candidateCount": 1}


async def test_our_session_carries_the_requests(server: Loopback) -> None:
    sent: list[str] = []

    async def on_start(
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        sent.append(str(params.url))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        p = GeminiProvider(
            "gemini-test", base_url=server.url, api_key=KEY, connection=Connection(session)
        )
        await p.generate(ask())
        await p.generate(ask())
        await p.aclose()
        assert not session.closed  # not ours to close
    assert len(sent) == 2
    assert sent[0].endswith("/v1/models/gemini-test:generateContent")

    ours = GeminiProvider(
        "gemini-test", base_url=server.url, api_key=KEY, connection=Connection(max_connections=3)
    )
    await ours.generate(ask())
    own = ours._session
    assert own is not None
    assert own.connector is not None
    assert own.connector.limit == 3
    await ours.aclose()
    assert own.closed


async def test_resource_exhausted_is_rate_limited(
    server: Loopback, provider: GeminiProvider
) -> None:
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
    quota = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []}
    server.script.append(google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", quota, retry))
    with pytest.raises(RateLimited, match="Quota exceeded") as caught:
        await provider.generate(ask())
    assert caught.value.retry_after == 3.0
    assert len(server.seen) == 1  # no retries inside the SDK


def daily_quota() -> Reply:
    """Gemini's answer once a free tier's requests of the day are spent (its real shape)."""
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "quotaDimensions": {"location": "global", "model": "gemini-test"},
        "quotaValue": "50",
    }
    return google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "41s"},
    )


@pytest.mark.parametrize(
    "reply",
    [
        daily_quota(),
        google_error(403, "PERMISSION_DENIED", f"Key {KEY} was denied"),
        google_error(401, "UNAUTHENTICATED", "Request had invalid credentials"),
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
        ),
    ],
)
async def test_account_refusals_stop_the_run(
    server: Loopback, provider: GeminiProvider, reply: Reply
) -> None:
    server.script.append(reply)
    with pytest.raises(Fatal) as caught:
        await provider.generate(ask())
    assert caught.value.stops_run
    assert len(server.seen) == 1
    no_key_in(caught.value)


async def test_malformed_retry_info_is_a_rate_limit_without_a_floor(
    server: Loopback, provider: GeminiProvider
) -> None:
    for delay in ({"seconds": "x"}, {"seconds": -4}, "-1s", {"seconds": "1e400"}):
        retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        server.script.append(google_error(429, "RESOURCE_EXHAUSTED", "slow down", retry))
        with pytest.raises(RateLimited) as caught:
            await provider.generate(ask())
        assert caught.value.retry_after is None


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (google_error(503, "UNAVAILABLE", "The model is overloaded"), Transient),
        (google_error(500, "INTERNAL", "An internal error has occurred"), Transient),
        (google_error(400, "INVALID_ARGUMENT", "Invalid value at 'generation_config'"), BadRequest),
        (google_error(404, "NOT_FOUND", "models/gemini-test is not found"), BadRequest),
        (google_error(403, "PERMISSION_DENIED", f"Key {KEY} was denied"), Fatal),
        (daily_quota(), Fatal),
        (google_error(401, "UNAUTHENTICATED", "Request had invalid credentials"), Fatal),
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
            ),
            Fatal,
        ),
        (Reply(body={"candidates": [], "usageMetadata": {}}), Transient),
        (Reply(body={"promptFeedback": {"blockReason": "SAFETY"}}), BadRequest),
        (Reply(body=b'{"candidates": [{"content": {"par'), Transient),
        (Reply(cut=b'{"candidates": [{"content": {"par'), Transient),
    ],
)
async def test_errors_one_request_each(
    server: Loopback, provider: GeminiProvider, reply: Reply, error: type[Exception]
) -> None:
    server.script.append(reply)
    with pytest.raises(error) as caught:
        await provider.generate(ask())
    assert type(caught.value) is error
    assert len(server.seen) == 1  # the SDK neither retries nor continues
    no_key_in(caught.value)


async def test_bad_request_quotes_the_server(server: Loopback, provider: GeminiProvider) -> None:
    server.script.append(google_error(400, "INVALID_ARGUMENT", "topK must be positive"))
    with pytest.raises(BadRequest, match="HTTP 400: topK must be positive"):
        await provider.generate(ask())


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = GeminiProvider("gemini-test", base_url=f"http://127.0.0.1:{port}/", api_key=KEY)
    try:
        with pytest.raises(Transient):
            await p.generate(ask())
    finally:
        await p.aclose()


def test_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "MY_GEMINI_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiProvider("gemini-2.5-pro")
    with pytest.raises(ConfigError, match="MY_GEMINI_KEY"):
        GeminiProvider("gemini-2.5-pro", api_key_env="MY_GEMINI_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    assert KEY not in repr(GeminiProvider("gemini-2.5-pro"))
    GeminiProvider("gemini-test", base_url="http://127.0.0.1:9/")  # local: a key is optional


@pytest.mark.parametrize(
    "value", [KEY, "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "GEMINI KEY", "9LIVES"]
)
def test_a_key_given_as_the_env_name_is_refused_unrepeated(value: str) -> None:
    local = "http://127.0.0.1:9/"
    for make in (
        lambda: GeminiProvider("gemini-test", base_url=local, api_key_env=value),
        lambda: GeminiEmbedder(base_url=local, api_key_env=value),
    ):
        with pytest.raises(ConfigError, match="NAME of an environment variable") as caught:
            make()
        assert value not in str(caught.value)


def test_endpoint_is_where_requests_go() -> None:
    assert GeminiProvider("g", api_key=KEY).endpoint == "https://generativelanguage.googleapis.com"
    local = GeminiProvider("g", base_url="http://127.0.0.1:9/", api_key=KEY)
    assert local.endpoint == "http://127.0.0.1:9"


async def test_answers_from_ttc_serve_are_marked_simulated(server: Loopback) -> None:
    vendor = GeminiProvider("gemini-test", base_url=server.url, api_key=KEY)
    try:
        await vendor.generate(ask())
        assert vendor.simulated is False
    finally:
        await vendor.aclose()
    async with running_server(ServeOptions(port=0)) as sim:
        provider = GeminiProvider("gemini-2.5-flash", base_url=sim.url)
        before = provider.simulated
        try:
            completion = await provider.generate(ask(2))
        finally:
            await provider.aclose()
    assert (before, provider.simulated) == (False, True)
    assert len(completion.texts) == 2
    assert provider.endpoint == sim.url


async def test_local_server_without_key(server: Loopback, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    p = GeminiProvider("gemini-test", base_url=server.url, api_version="v1beta")
    try:
        assert (await p.generate(ask())).texts == ("answer 0",)
    finally:
        await p.aclose()
    assert server.seen[0].path == "/v1beta/models/gemini-test:generateContent"


# ── the embedder ─────────────────────────────────────────────────────────────────────────────


@pytest.fixture
async def embed_server(loopback: StartLoopback) -> Loopback:
    return await loopback(embed_reply, "/")


async def test_embedder_batches_and_normalises(embed_server: Loopback) -> None:
    embedder = GeminiEmbedder(
        base_url=embed_server.url, api_key=KEY, options=EmbedOptions(batch_size=2)
    )
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = await asyncio.to_thread(embedder.embed, texts)
    assert isinstance(embedder, Embedder)
    assert len(embed_server.seen) == math.ceil(len(texts) / 2)
    first = embed_server.seen[0]
    assert first.path == "/v1/models/gemini-embedding-001:batchEmbedContents"
    assert first.headers["x-goog-api-key"] == KEY
    assert [r["content"]["parts"][0]["text"] for r in first.body["requests"]] == ["a", "bb"]
    assert first.body["requests"][0]["taskType"] == "SEMANTIC_SIMILARITY"
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert embedder.dim == 3
    assert len(embed_server.seen) == 3
    assert embedder.name == "gemini:gemini-embedding-001:semantic_similarity"


async def test_embedder_retries_then_translates(embed_server: Loopback) -> None:
    embedder = GeminiEmbedder(
        base_url=embed_server.url,
        api_key=KEY,
        options=EmbedOptions(backoff_s=0.001, max_attempts=3, dim=3),
    )
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.01s"}
    embed_server.script += [
        google_error(429, "RESOURCE_EXHAUSTED", "slow down", retry),
        google_error(503, "UNAVAILABLE", "busy"),
    ]
    vectors = await asyncio.to_thread(embedder.embed, ["a", "b"])
    assert vectors.shape == (2, 3)
    assert len(embed_server.seen) == 3
    assert embed_server.seen[-1].body["requests"][0]["outputDimensionality"] == 3

    embed_server.script.append(google_error(403, "PERMISSION_DENIED", f"denied {KEY}"))
    with pytest.raises(Fatal) as caught:
        await asyncio.to_thread(embedder.embed, ["a"])
    assert len(embed_server.seen) == 4
    no_key_in(caught.value)
    assert GeminiEmbedder(api_key=KEY).dim == 3072  # Google's own model: known, no request
