"""Azure OpenAI (`--provider azure`) against a loopback server and `ttc serve`, the official
`openai` Azure client against `ttc serve`, OpenAI's flex tier (`--service-tier`), and the price
table's Claude and flex entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from fakes import FakeSuite, Loopback, Reply, Seen, StartLoopback, items

from ttc.adapters.providers import AzureOpenAIProvider, MissingKey, OpenAIProvider
from ttc.adapters.providers._http import SIM_FINGERPRINT, status_error
from ttc.adapters.sim import ServeOptions, running_server
from ttc.engine import Message, Request, RunConfig, Sampling, Usage
from ttc.engine.cli import RunSpec, build_parser, main
from ttc.engine.cli._wiring import provider_from, wire
from ttc.engine.contract._errors import ConfigError, RateLimited, Transient
from ttc.engine.send._prices import flex_price_for, price_for

KEY = "azure-test-SECRET-0123456789"
ASK = Request((Message("user", "What is 2+2?"),), Sampling(top_k=40, temperature=0.5))


def chat_reply(seen: Seen) -> Reply:
    body = {
        "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": {"content": "4"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    return Reply(body=body, headers={"x-ratelimit-remaining-requests": "99"})


@pytest.fixture
async def server(loopback: StartLoopback) -> Loopback:
    return await loopback(chat_reply, "")


async def test_azure_url_api_version_and_api_key_header(server: Loopback) -> None:
    provider = AzureOpenAIProvider("my deployment", endpoint=server.url + "/", api_key=KEY)
    completion = await provider.generate(ASK)
    await provider.aclose()
    seen = server.seen[-1]
    assert seen.path == "/openai/deployments/my deployment/chat/completions"  # sent quoted
    assert seen.query == "api-version=2024-10-21"
    assert seen.headers["api-key"] == KEY
    assert "Authorization" not in seen.headers
    assert "top_k" not in seen.body  # Azure takes none
    assert seen.body["temperature"] == 0.5
    assert completion.texts == ("4",)
    assert completion.usage == Usage(7, 3, 0)
    assert KEY not in repr(provider)


async def test_azure_bearer_token_from_its_variable(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token-value")
    provider = AzureOpenAIProvider("dep", endpoint=server.url, api_version="2025-04-01-preview")
    await provider.generate(ASK)
    await provider.aclose()
    seen = server.seen[-1]
    assert seen.headers["Authorization"] == "Bearer entra-token-value"
    assert "api-key" not in seen.headers
    assert seen.query == "api-version=2025-04-01-preview"
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN")
    with pytest.raises(MissingKey, match="AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN"):
        AzureOpenAIProvider("dep", endpoint="https://res.openai.azure.com")


async def test_azure_and_the_official_azure_client_against_ttc_serve() -> None:
    async with running_server(ServeOptions(port=0, rpm=600)) as server:
        provider = AzureOpenAIProvider("gpt-4-1-mini-dep", endpoint=server.url)
        completion = await provider.generate(ASK)
        await provider.aclose()
        assert provider.simulated
        assert completion.rate is not None
        assert completion.rate.limit_requests == 600
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=server.url, api_key="x", api_version="2024-10-21", max_retries=0
        )
        async with client:
            answer = await client.chat.completions.create(
                model="gpt-4-1-mini-dep", messages=[{"role": "user", "content": "Hi there."}]
            )
            vectors = await client.embeddings.create(model="embed-dep", input=["a", "b"])
        assert answer.system_fingerprint == SIM_FINGERPRINT
        assert answer.model == "gpt-4-1-mini-dep"  # the deployment names the model
        assert len(vectors.data) == 2
        stats = server.stats()
    assert stats["by_route"] == {"azure.generate": 2, "azure.embed": 1}
    assert answer.usage is not None
    served = stats["tokens"]["input"]
    assert completion.usage.input_tokens + answer.usage.prompt_tokens == served


def run_args(*argv: str) -> RunSpec:
    return RunSpec.from_args(build_parser().parse_args(["run", *argv]))


async def test_flex_tier_is_sent_priced_and_waits_longer(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    flags = ("--provider", "openai", "--model", "gpt-5-mini", "--base-url", server.url + "/v1")
    spec = run_args(*flags, "--service-tier", "flex")
    assert spec.timeout_s == 900
    assert run_args(*flags, "--service-tier", "flex", "--timeout", "60").timeout_s == 60
    assert run_args(*flags).timeout_s == 300
    suite = FakeSuite(pool=items(2))
    async with wire(spec, RunConfig(), suite, suite.items()) as wired:
        assert isinstance(wired.provider, OpenAIProvider)
        await wired.provider.generate(ASK)
        assert wired.price == flex_price_for("gpt-5-mini")
    assert server.seen[-1].body["service_tier"] == "flex"
    assert server.seen[-1].path == "/v1/chat/completions"


def test_service_tier_is_openais_and_azures_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    argv = ["run", "--provider", "anthropic", "--model", "m", "--service-tier", "flex"]
    assert main([*argv, "--out", str(tmp_path / "r"), "--limit", "2", "--no-cache"]) == 2
    assert "--service-tier: OpenAI's and Azure's only" in capsys.readouterr().err
    spec = run_args("--provider", "azure", "--model", "dep")
    suite = FakeSuite(pool=items(2))
    with pytest.raises(ConfigError, match="--base-url: required with --provider azure"):
        provider_from(spec.provider, 0, suite, suite.items())


def test_flex_resource_unavailable_is_transient_a_quota_429_is_not() -> None:
    body: dict[str, Any] = {
        "error": {"message": "Resource Unavailable", "type": "x", "code": "resource_unavailable"}
    }
    assert isinstance(status_error(429, {}, body, who="openai"), Transient)
    quota = {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
    assert isinstance(status_error(429, {}, quota, who="openai"), RateLimited)


def test_claude_and_flex_prices() -> None:
    sonnet = price_for("claude-sonnet-4-5-20250929")
    assert sonnet is not None
    assert (sonnet.input, sonnet.output, sonnet.thinking) == (3.0, 15.0, 15.0)
    opus = price_for("claude-opus-4-1-20250805")
    assert opus is not None
    assert opus.output == 75.0
    assert price_for("claude-opus-4-6") != price_for("claude-opus-4-1")
    flex, listed = flex_price_for("gpt-5-mini-2025-08-07"), price_for("gpt-5-mini")
    assert flex is not None
    assert listed is not None
    assert flex.input == listed.input / 2
    assert flex.output == listed.output / 2
    assert flex_price_for("gpt-4.1") is None  # no flex tier
