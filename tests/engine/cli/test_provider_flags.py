"""`--provider`, `--model`, `--base-url`, `--api-key-env` and the role models, as typed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fakes import FakeSuite, items

from ttc.adapters import GeminiProvider, OpenAIProvider
from ttc.engine import RunConfig, Sampling
from ttc.engine.cli import RunSpec, build_parser, main, role_provider_from
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Provider


def run_args(*argv: str) -> RunSpec:
    return RunSpec.from_args(build_parser().parse_args(["run", *argv]))


def test_a_real_provider_needs_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--provider", "openai", "--out", str(tmp_path / "r"), "--limit", "2"])
    assert code == 2
    assert "--model: required with --provider openai" in capsys.readouterr().err


def test_the_openai_api_needs_a_key_named_in_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MY_KEY", raising=False)
    argv = ["run", "--provider", "openai", "--model", "gpt-4.1-mini", "--api-key-env", "MY_KEY"]
    code = main([*argv, "--out", str(tmp_path / "r"), "--limit", "2", "--no-cache"])
    assert code == 2
    err = capsys.readouterr().err
    assert "MY_KEY" in err
    assert not (tmp_path / "r" / "journal.jsonl").exists()  # refused before anything was sent


@pytest.mark.parametrize(
    ("flags", "kind", "base_url"),
    [
        # The same kind as the run's provider: the run's server and key variable.
        (["--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
         OpenAIProvider, "http://127.0.0.1:9/v1"),
        # Another kind: the vendor's own API.
        (["--provider", "sim"], OpenAIProvider, "https://api.openai.com/v1"),
    ],
)  # fmt: skip
def test_role_models_name_a_provider_and_a_model(
    flags: list[str],
    kind: type[Provider],
    base_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    args = run_args(*flags, "--judge-model", "openai:gpt-4.1")
    suite = FakeSuite(pool=items(3))
    judge = role_provider_from(args, "judge", suite, suite.items())
    assert isinstance(judge, kind)
    assert isinstance(judge, OpenAIProvider)
    assert (judge.model, judge.base_url) == ("gpt-4.1", base_url)


def test_a_gemini_role_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    args = run_args("--difficulty-model", "gemini:gemini-2.5-flash")
    suite = FakeSuite(pool=items(3))
    rater = role_provider_from(args, "difficulty", suite, suite.items())
    assert isinstance(rater, GeminiProvider)
    assert rater.model == "gemini-2.5-flash"


@pytest.mark.parametrize("value", ["gpt-4.1", "openai:", "anthropic:claude"])
def test_a_bad_role_model_is_a_one_line_error(value: str) -> None:
    args = run_args("--judge-model", value)
    suite = FakeSuite(pool=items(3))
    with pytest.raises(ConfigError, match="--judge-model: expected sim, openai:MODEL"):
        role_provider_from(args, "judge", suite, suite.items())


def test_a_spec_made_by_hand_has_the_command_lines_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = run_args("--no-cache", "--no-live")
    assert spec.out is not None  # named now, made when the run starts
    assert spec.out.parent == Path("runs")
    assert dataclasses.replace(spec, out=None) == RunSpec()
    monkeypatch.setenv("TTC_CACHE_DIR", str(tmp_path / "cache"))
    compare = RunSpec.from_args(build_parser().parse_args(["compare", "--resume", "--out", "c"]))
    assert (compare.method, compare.label, compare.out) == (None, "compare", Path("c"))
    assert compare.cache == tmp_path / "cache" / "responses.sqlite3"
    # compare's default protocol is the paper's: Appendix A's decoding.
    paper = Sampling(temperature=0.3, top_p=0.9, top_k=40)
    assert compare.run_config("elim") == RunConfig(method="elim", sampling=paper)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--thinking-budget", "500"], "--thinking-budget: Anthropic's extended thinking takes"),
        (["--thinking-budget", "4096", "--max-tokens", "4096"], "--max-tokens: must be more than"),
        (["--thinking-budget", "2048", "--temperature", "0.3"], "--temperature: Anthropic takes"),
        (["--thinking-budget", "2048", "--top-p", "0.9"], "--top-p: Anthropic takes one in"),
        (["--thinking-budget", "2048", "--top-k", "40"], "--top-k: Anthropic takes none"),
    ],
)  # fmt: skip
def test_anthropic_thinking_flags_it_refuses_are_one_line_errors(
    flags: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--provider", "anthropic", "--model", "claude-haiku-4-5", *flags]
    assert main([*argv, "--out", str(tmp_path / "r"), "--limit", "2", "--no-cache"]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_an_anthropic_provider_from_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from ttc.adapters.providers import AnthropicProvider
    from ttc.engine.cli._wiring import provider_from

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    spec = run_args(
        "--provider", "anthropic", "--model", "claude-haiku-4-5", "--thinking-budget", "2048"
    )
    assert spec.sampling.thinking_budget == 2048
    suite = FakeSuite(pool=items(2))
    provider = provider_from(spec.provider, 0, suite, suite.items())
    assert isinstance(provider, AnthropicProvider)
    assert provider.endpoint == "https://api.anthropic.com"
