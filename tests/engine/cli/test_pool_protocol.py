"""The command line's --pool (a noisy judge's demonstrations) and `ttc compare`'s --protocol
(the paper's matched unif budget and decoding), run in process with the sim provider."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.engine import Sampling
from ttc.engine.cli import build_parser, main, paper_decoding

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import paper  # noqa: E402

COMMON = ["--per-task", "2", "--rounds", "3", "--embedder", "lexical", "--workers", "0",
          "--no-live", "--no-cache", "-q"]  # fmt: skip


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_pool_is_recorded_kept_by_a_resume_and_a_change_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "latest"
    assert main(["run", *COMMON, "--noise", "0.2", "--pool", "latest", "--out", str(run)]) == 0
    config = load(run / "config.json")
    assert config["config"]["pool"] == "latest"
    assert config["strategy"]["judgement"]["pool"] == "latest"
    summary = (run / "summary.json").read_bytes()
    capsys.readouterr()
    assert main(["resume", str(run), "--pool", "accepted"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("ttc: error: --pool: ")
    assert "'latest', not 'accepted'" in line
    assert main(["resume", str(run)]) == 0  # its own --pool: the same run, nothing to redo
    assert (run / "summary.json").read_bytes() == summary
    default = tmp_path / "default"
    assert main(["run", *COMMON, "--noise", "0.2", "--out", str(default)]) == 0
    assert load(default / "config.json")["strategy"]["judgement"]["pool"] == "accepted"
    capsys.readouterr()
    assert main(["run", *COMMON, "--pool", "latest", "--out", str(tmp_path / "x")]) == 2
    assert "--pool" in one_error_line(capsys)
    assert not (tmp_path / "x").exists()


def compare(tmp_path: Path, name: str, *flags: str) -> tuple[Path, str]:
    out = tmp_path / name
    assert main(["compare", *COMMON, *flags, "--out", str(out)]) == 0
    return out, (out / "compare.txt").read_text()


def test_compare_matches_unif_to_elims_output_tokens_and_decodes_as_the_paper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    out, text = compare(tmp_path, "paper")
    elim = load(out / "elim" / "summary.json")
    unif = load(out / "unif" / "config.json")["config"]
    assert unif["match_tokens"] == elim["output_tokens"] > 0
    for method in ("elim", "unif", "rand", "adpt"):
        sampling = load(out / method / "config.json")["config"]["sampling"]
        assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.3, 0.9, 40)
    # The matched unif stops sampling once elim's budget is spent: fewer than R full rounds.
    unif_rounds = load(out / "unif" / "summary.json")["rounds"]
    assert sum(r["requests"] for r in unif_rounds) < 3 * 8
    said = (
        f"protocol: the paper's (section 5, Appendix A): unif matched to elim's "
        f"{elim['output_tokens']:,} output tokens; decoding: temperature 0.3, top_p 0.9, top_k 40"
    )
    assert text.splitlines()[0] == said
    assert said in capsys.readouterr().out
    assert load(out / "compare.json")["protocol"] == said
    # Opting out: unif samples every round, the provider's own decoding.
    out, text = compare(tmp_path, "none", "--protocol", "none")
    unif = load(out / "unif" / "config.json")["config"]
    assert unif["match_tokens"] is None
    assert unif["sampling"]["temperature"] is None
    assert [r["active"] for r in load(out / "unif" / "summary.json")["rounds"]] == [8, 8, 8]
    assert text.splitlines()[0] == (
        "protocol: none: unif samples all 3 rounds; decoding: the provider's defaults"
    )


def test_a_compare_resumes_with_its_own_protocol_and_one_from_before_with_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out, text = compare(tmp_path, "c")
    assert main(["resume", str(out)]) == 0
    assert (out / "compare.txt").read_text() == text
    # A comparison made before --protocol existed: its runs decoded at the provider's defaults
    # and unif ran every round, so it goes on as --protocol none rather than being refused.
    old, _ = compare(tmp_path, "old", "--protocol", "none")
    invocation = load(old / "invocation.json")
    del invocation["protocol"]
    invocation["argv"] = [a for a in invocation["argv"] if a not in ("--protocol", "none")]
    (old / "invocation.json").write_bytes(orjson.dumps(invocation))
    assert main(["resume", str(old)]) == 0


def test_compare_flags_on_top_of_the_paper_decoding_and_no_match_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttc.engine.cli import RunSpec

    def spec(*flags: str) -> RunSpec:
        return RunSpec.from_args(build_parser().parse_args(["compare", *flags]))

    assert spec().sampling == Sampling(temperature=0.3, top_p=0.9, top_k=40)
    assert spec("--temperature", "0.7").sampling == Sampling(temperature=0.7, top_p=0.9, top_k=40)
    assert spec("--protocol", "none").sampling == Sampling()
    assert spec("--provider", "gemini", "--model", "m").sampling.max_output_tokens == 65_536
    assert RunSpec.from_args(build_parser().parse_args(["run"])).sampling == Sampling()
    code = main(["compare", *COMMON, "--match-tokens", "x", "--out", str(tmp_path / "m")])
    assert code == 2
    assert "--match-tokens" in one_error_line(capsys)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("provider", "model"),
    [("sim", None), ("gemini", "gemini-2.5-flash-lite"), ("openai", "gpt-4.1-mini"),
     ("openai", "gpt-5-nano"), ("openai", "o3-mini")],
)  # fmt: skip
def test_the_paper_decoding_is_benchmarks_papers(provider: str, model: str | None) -> None:
    # One protocol: `ttc compare` decodes as benchmarks/paper.py does with no decoding flag.
    argv = ["--out", "x", "--provider", provider, *(["--model", model] if model else [])]
    assert paper_decoding(provider, model) == paper.paper_sampling(
        paper.build_parser().parse_args(argv)
    )
    reasoning = paper_decoding("openai", "gpt-5-nano")
    assert (reasoning.temperature, reasoning.reasoning_effort) == (None, "medium")
