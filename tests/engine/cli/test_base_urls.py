"""`--base-url` as typed: once, one provider exactly as before; repeated, replicas of one model
(`ReplicasProvider`), with the run's --concurrency and --timeout; refused where it cannot be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeSuite, items

from ttc.adapters import OpenAIProvider
from ttc.adapters.providers import ReplicasProvider
from ttc.engine.cli import RunSpec, build_parser, main
from ttc.engine.cli._servers import REPLICA_DEADLINE, many_from
from ttc.engine.cli._wiring import provider_from

A, B = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"
OPENAI = ("--provider", "openai", "--model", "m", "--api-key-env", "TTC_TEST_KEY")


def run_args(*argv: str) -> RunSpec:
    return RunSpec.from_args(build_parser().parse_args(["run", *argv]))


def test_one_base_url_is_one_provider_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTC_TEST_KEY", "sk-test-0123456789")
    spec = run_args(*OPENAI, "--base-url", A)
    assert spec.provider.base_url == A
    assert many_from(spec) is None
    suite = FakeSuite(pool=items(2))
    provider = provider_from(spec.provider, 0, suite, suite.items())
    assert type(provider) is OpenAIProvider
    assert provider.endpoint == A
    assert run_args(*OPENAI).provider.base_url is None


def test_a_repeated_base_url_is_replicas_with_the_runs_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TTC_TEST_KEY", "sk-test-0123456789")
    spec = run_args(*OPENAI, "--base-url", A, "--base-url", B, "--concurrency", "7",
                    "--timeout", "20")  # fmt: skip
    assert spec.provider.base_url == (A, B)
    provider = many_from(spec)
    assert isinstance(provider, ReplicasProvider)
    assert provider.endpoint == f"{A},{B}"  # what config.json records
    assert [r.url for r in provider.replicas] == [A, B]
    assert [r.limiter.max_concurrency for r in provider.replicas] == [7, 7]
    assert provider.timeout_s == pytest.approx(20 * REPLICA_DEADLINE)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--provider", "gemini", "--model", "g", "--base-url", A, "--base-url", B),
         "--base-url: given 2 times (replicas of one model), which only --provider openai"),
        ((*OPENAI, "--base-url", A, "--base-url", A),
         f"--base-url: the same server given twice: {A}, {A}"),
        ((*OPENAI, "--base-url", A, "--base-url", B, "--batch"),
         "--base-url: given more than once, which --batch does not take"),
    ],
)  # fmt: skip
def test_replicas_refused_in_one_line_naming_the_flag(
    argv: tuple[str, ...],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TTC_TEST_KEY", "sk-test-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "test-key-0123456789")
    out = tmp_path / "r"
    code = main(["run", *argv, "--out", str(out), "--limit", "2", "--no-cache"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (out / "journal.jsonl").exists()


def test_base_urls_given_again_on_resume_replace_the_runs(tmp_path: Path) -> None:
    from ttc.engine.cli._commands import resume_argv

    stored = ["compare", "--provider", "openai", "--base-url", "http://a/v1", "--limit", "4",
              "--base-url=http://b/v1"]  # fmt: skip
    (tmp_path / "invocation.json").write_text(
        json.dumps({"argv": stored, "cwd": str(tmp_path), "protocol": "paper"})
    )
    argv, _ = resume_argv(tmp_path, ["--base-url", "http://c/v1"])
    urls = [a for a in argv if "http://" in a]
    assert urls == ["http://c/v1"]  # not appended to the run's two: that would be 3 replicas
    assert argv[:5] == ["compare", "--provider", "openai", "--limit", "4"]
    # Without --base-url on top, the run's replicas stay as they were.
    argv, _ = resume_argv(tmp_path, ["--max-attempts", "9"])
    assert [a for a in argv if "http://" in a] == ["http://a/v1", "--base-url=http://b/v1"]
