"""`--stream`, its timeouts and its per-provider default, and `--api`, as typed."""

from __future__ import annotations

import pytest
from fakes import FakeSuite, items

from ttc.adapters.providers import (
    AnthropicProvider,
    AzureResponsesProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
)
from ttc.engine.cli import RunSpec, build_parser
from ttc.engine.cli._wiring import provider_from
from ttc.engine.contract._errors import ConfigError


def run_args(*argv: str) -> RunSpec:
    return RunSpec.from_args(build_parser().parse_args(["run", *argv]))


OPENAI = ("--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1")
ANTHROPIC = ("--provider", "anthropic", "--model", "m", "--base-url", "http://127.0.0.1:9")


def test_streaming_is_off_by_default_and_on_when_asked() -> None:
    plain = run_args(*OPENAI)
    assert plain.provider.streaming.stream is False
    assert plain.timeout_s == 300
    streamed = run_args(*OPENAI, "--stream", "--stall-timeout", "2", "--first-byte-timeout", "9")
    how = streamed.provider.streaming
    assert (how.stream, how.stall_s, how.first_byte_s) == (True, 2, 9)
    assert streamed.timeout_s == 3600  # stalls are caught by --stall-timeout
    assert run_args(*OPENAI, "--stream", "--timeout", "50").timeout_s == 50


@pytest.mark.parametrize(
    ("flags", "streams"),
    [
        ((), False),  # 8,192 tokens: Anthropic's SDKs take it whole
        (("--max-tokens", "21333"), False),
        (("--max-tokens", "21334"), True),  # over ten minutes by the SDKs' reckoning
        (("--thinking-budget", "16000"), True),  # 8,192 + 16,000
        (("--max-tokens", "64000", "--no-stream"), False),  # told otherwise
    ],
)
def test_anthropic_streams_by_default_when_its_sdks_would_insist(
    flags: tuple[str, ...], streams: bool
) -> None:
    assert run_args(*ANTHROPIC, *flags).provider.streaming.stream is streams


def test_the_providers_are_built_streaming_and_on_the_responses_api() -> None:
    suite = FakeSuite()
    spec = run_args(*OPENAI, "--api", "responses", "--stream", "--stall-timeout", "2")
    provider = provider_from(spec.provider, 0, suite, items(2))
    assert type(provider) is OpenAIResponsesProvider
    assert isinstance(provider, OpenAIProvider)  # and so batch mode takes it
    stream = provider._connection.stream
    assert stream is not None
    assert stream.stall_s == 2
    plain = provider_from(run_args(*OPENAI).provider, 0, suite, items(2))
    assert type(plain) is OpenAIProvider
    assert plain._connection.stream is None
    azure = run_args(
        "--provider",
        "azure",
        "--model",
        "d",
        "--base-url",
        "http://127.0.0.1:9",
        "--api",
        "responses",
    )
    built = provider_from(azure.provider, 0, suite, items(2))
    assert isinstance(built, AzureResponsesProvider)
    assert built.responses_url() == "http://127.0.0.1:9/openai/v1/responses"
    claude = provider_from(run_args(*ANTHROPIC, "--stream").provider, 0, suite, items(2))
    assert isinstance(claude, AnthropicProvider)
    assert claude._connection.stream is not None


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--provider", "gemini", "--model", "g", "--api", "responses"), "--api responses"),
        (("--provider", "anthropic", "--model", "c", "--api", "responses"), "--api responses"),
        (("--stream",), "--stream: not with --provider sim"),
    ],
)
def test_what_cannot_stream_or_speak_responses_is_refused(argv: tuple[str, ...], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        run_args(*argv)


def test_the_timeouts_must_be_positive() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", *OPENAI, "--stall-timeout", "0"])


def test_replicas_stream_and_refuse_the_responses_api() -> None:
    from ttc.engine.cli._servers import many_from

    urls = ("--base-url", "http://127.0.0.1:9/v1", "--base-url", "http://127.0.0.1:10/v1")
    replicas = many_from(run_args("--provider", "openai", "--model", "m", *urls, "--stream"))
    assert replicas is not None
    servers = [r.provider for r in replicas.replicas]
    assert all(isinstance(p, OpenAIProvider) and p.stream is not None for p in servers)
    with pytest.raises(ConfigError, match="--api responses: not with --base-url given more"):
        many_from(run_args("--provider", "openai", "--model", "m", *urls, "--api", "responses"))
