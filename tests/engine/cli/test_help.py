"""What a user reads from `ttc`: its help (every default, once), its version, its one-line
errors for a missing argument, a bad number, a missing API key or a resume that changes the
experiment, and the command it prints to go on with (one that runs from the user's shell)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ttc
from ttc.engine.cli import build_parser, main, parse_limit, ttc_command
from ttc.engine.cli._usage import DefaultsHelp, shown_default

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
SCRIPT = Path(sys.executable).parent / "ttc"
FAST = ["--embedder", "lexical", "--workers", "0", "--no-cache", "-q"]


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    yield "ttc", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from ((f"ttc {name}", sub) for name, sub in action.choices.items())


def _helps() -> Iterator[tuple[str, argparse.Action, str]]:
    """(command, option, its help as printed before wrapping) for every option of every command."""
    for command, parser in _parsers():
        formatter = parser._get_formatter()
        assert isinstance(formatter, DefaultsHelp), command
        for action in parser._actions:
            if action.option_strings and action.help not in (None, argparse.SUPPRESS):
                yield command, action, formatter._expand_help(action)


def test_every_command_has_help_that_shows_its_defaults() -> None:
    commands = {command for command, _ in _parsers()}
    names = ["run", "compare", "verify", "resume", "ablate", "serve", "batch", "ctl", "report"]
    names.append("export")
    assert commands == {f"ttc {c}" for c in names} | {"ttc"}
    checked = 0
    for command, action, text in _helps():
        where = f"{command} {action.option_strings[0]}: {text!r}"
        assert text.count("(default") <= 1, where
        assert "default: None" not in text, where
        default = action.default
        if default in (None, False, argparse.SUPPRESS):
            continue
        checked += 1
        assert text.count("(default") == 1, where
        assert shown_default(default) in text, where
    assert checked > 40  # run's and compare's own, serve's, batch's, verify's


def test_serve_says_unlimited_once() -> None:
    helps = {a.option_strings[0]: t for c, a, t in _helps() if c == "ttc serve"}
    assert helps["--rpm"].endswith("(default: unlimited)")
    assert helps["--rpm"].count("unlimited") == 1
    assert helps["--max-concurrency"].count("unlimited") == 1


def test_run_help_shows_the_defaults_it_used_to_leave_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for said in ("total rounds R (default: 4)", "requests in flight (default: 64)",
                 "seconds per attempt (default: 300)", "task suite (default: reasoning_gym)",
                 "neighbours per prompt P (default: 3)", "(default: sim)",
                 "the first N questions (default: all)", "(default: unlimited)"):  # fmt: skip
        assert said in out, said


def test_top_level_help_says_what_ttc_is_its_commands_and_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ttc [-h] [--version] COMMAND ...")
    assert f"ttc {ttc.__version__}: adaptive test-time compute" in out
    for command in ("run", "compare", "verify", "resume", "serve", "batch", "report", "export"):
        assert f"\n    {command} " in out, command
    assert f"\n  {ttc_command()} run --limit 20\n" in out
    assert "composition root" not in out  # not the module's docstring
    assert "RunSpec" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"ttc {ttc.__version__}\n"


def test_resume_without_a_directory_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["resume"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "ttc: error: resume: the following arguments are required: RUN_DIR; "
        f"e.g. {ttc_command()} resume runs/20250101-120000-adpt\n"
    )


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["run", "-p", "0"], "-p"),
        (["run", "-k", "0"], "-k"),
        (["compare", "--rounds", "0"], "--rounds"),
        (["run", "--concurrency", "0"], "--concurrency"),
        (["run", "--timeout", "-1"], "--timeout"),
        (["run", "--max-attempts", "0"], "--max-attempts"),
        (["run", "--gamma", "1.5"], "--gamma"),
        (["run", "--gamma", "0"], "--gamma"),
        (["run", "--workers", "-1"], "--workers"),
        (["run", "--top-p", "nan"], "--top-p"),
        (["run", "--limit", "0"], "--limit"),
        (["run", "--limit", "some"], "--limit"),
        (["serve", "--limit", "-3"], "--limit"),
        (["verify", "--responses", "r.jsonl", "--gamma", "2"], "--gamma"),
        (["verify", "--responses", "r.jsonl", "--workers", "x"], "--workers"),
        (["batch", "in.jsonl", "--out", "o.jsonl", "--concurrency", "0"], "--concurrency"),
        (["batch", "in.jsonl", "--out", "o.jsonl", "--max-attempts", "0"], "--max-attempts"),
    ],
)
def test_a_bad_number_is_one_line_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"ttc: error: argument {flag}"), err


def test_p_zero_says_what_would_do_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "-p", "0"])
    assert "--method elim" in capsys.readouterr().err


def test_warmup_past_the_rounds_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--rounds", "2", "--warmup", "3", "--limit", "1", *FAST]) == 2
    assert capsys.readouterr().err == (
        "ttc: error: --warmup: must be between 0 and --rounds (2), got 3\n"
    )


def test_limit_all_is_every_question_in_ttc_and_in_the_paper_harness() -> None:
    assert build_parser().parse_args(["run", "--limit", "all"]).limit is None
    assert build_parser().parse_args(["compare", "--limit", "ALL"]).limit is None
    assert build_parser().parse_args(["run", "--limit", "7"]).limit == 7
    assert parse_limit("all") is None
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import paper
    finally:
        sys.path.remove(str(BENCHMARKS))
    from ttc.engine import ConfigError

    assert set(paper._limits("all", "sim").values()) == {None}
    assert set(paper._limits("5", "openai").values()) == {5}
    with pytest.raises(ConfigError, match=r"^--limit: expected a positive integer or `all`"):
        paper._limits("0", "sim")


def test_verify_names_the_suite_it_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.jsonl").write_text(
        '{"id": "decimal_arithmetic/0", "response": "\\\\boxed{1}"}\n'
    )
    argv = ["verify", "--per-task", "1", "--responses", "r.jsonl", "--workers", "0"]
    assert main(argv) == 0
    assert "judged by the reasoning_gym verifier (no --suite given): " in capsys.readouterr().out
    assert main([*argv, "--suite", "reasoning_gym"]) == 0
    assert "judged by the reasoning_gym verifier: " in capsys.readouterr().out
    # Ids of another suite: the error says which suite they were looked for in.
    (tmp_path / "r.jsonl").write_text('{"id": "math500/7", "response": "x"}\n')
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "ttc: error: r.jsonl:1: field 'id': 'math500/7' is not in the suite; judged as "
        "reasoning_gym (no --suite given): name the suite with --suite\n"
    )
    # A data file with no --suite: the suite is what is missing (it said "drop --data").
    (tmp_path / "test.jsonl").write_text("{}\n")
    assert main(["verify", "--data", "test.jsonl", "--responses", "r.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ttc: error: --suite: --data test.jsonl is given but no --suite: ")
    assert "drop --data" not in err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--provider", "openai", "--model", "gpt-4.1-mini"],
         "--provider openai: OPENAI_API_KEY is empty or not set: export it, or name the "
         "variable that holds the key with --api-key-env"),
        (["--provider", "openai", "--model", "m", "--api-key-env", "TTC_TEST_KEY"],
         "--provider openai: TTC_TEST_KEY is empty or not set: export it, or name the "
         "variable that holds the key with --api-key-env"),
        (["--provider", "gemini", "--model", "gemini-2.5-flash-lite"],
         "--provider gemini: GEMINI_API_KEY and GOOGLE_API_KEY are empty or not set: export one "
         "of them, or name the variable that holds the key with --api-key-env"),
        # The run's --api-key-env is not this model's: the variable alone is named.
        (["--judge", "reward", "--judge-model", "openai:gpt-4.1-mini"],
         "--judge-model openai:gpt-4.1-mini: OPENAI_API_KEY is empty or not set: export it"),
        (["--embedder", "openai"], "--embedder openai: OPENAI_API_KEY is empty or not set: "
         "export it"),
    ],
)  # fmt: skip
def test_a_missing_key_names_the_variable_and_the_flag(
    flags: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "TTC_TEST_KEY"):
        monkeypatch.setenv(name, "")  # set but empty: as good as unset
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--limit", "1", *FAST, *flags, "--out", "r"]) == 2
    assert capsys.readouterr().err == f"ttc: error: {said}\n"
    assert not (tmp_path / "r" / "journal.jsonl").exists()


def test_batch_names_the_variable_and_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "in.jsonl").write_text("")
    code = main(["batch", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl")])
    assert code == 2
    assert capsys.readouterr().err == (
        "ttc: error: ttc batch: OPENAI_API_KEY is empty or not set: export it, or name the "
        "variable that holds the key with --api-key-env\n"
    )


def test_a_resume_that_changes_the_judge_names_both_never_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    run = ["run", "--limit", "2", "--rounds", "2", "--max-output-tokens", "1", *FAST, "--out", "r"]
    assert main(run) == 3  # stopped by its budget, resumable
    capsys.readouterr()
    # No --judge is the method's own judge, truth: naming it is the same experiment.
    assert main(["resume", "r", "--judge", "truth", "--max-output-tokens", "1"]) == 3
    capsys.readouterr()
    assert main(["resume", "r", "--judge", "reward"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ttc: error: --judge: the run in {tmp_path / 'r'} used 'truth', not 'reward'; "
        "a resumed run must match\n"
    )
    assert main(["resume", "r", "--temperature", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"ttc: error: --temperature: the run in {tmp_path / 'r'} used no --temperature, not "
        "0.5; a resumed run must match\n"
    )


def _without_ttc_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    here = SCRIPT.parent.resolve()
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    kept = [d for d in dirs if d and not (Path(d) / "ttc").exists()]
    assert all(Path(d).resolve() != here for d in kept)
    monkeypatch.setenv("PATH", os.pathsep.join(kept))


@pytest.mark.skipif(not SCRIPT.is_file(), reason="ttc is not installed next to this Python")
def test_the_printed_command_is_ttc_only_when_ttc_on_path_is_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert ttc_command() == "ttc"
    _without_ttc_on_path(monkeypatch)
    monkeypatch.chdir(SCRIPT.parent.parent)  # as in a checkout whose .venv holds ttc
    assert ttc_command() == f"{SCRIPT.parent.name}/ttc"
    monkeypatch.chdir(tmp_path)  # the script is not below: its full path
    assert ttc_command() == str(SCRIPT)
    # Another `ttc` on PATH is not this one: not named by its bare name.
    other = tmp_path / "bin"
    other.mkdir()
    (other / "ttc").write_text("#!/bin/sh\n")
    (other / "ttc").chmod(0o755)
    monkeypatch.setenv("PATH", str(other))
    assert ttc_command() == str(SCRIPT)


@pytest.mark.skipif(not SCRIPT.is_file(), reason="ttc is not installed next to this Python")
def test_go_on_with_prints_a_command_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_ttc_on_path(monkeypatch)
    monkeypatch.chdir(tmp_path)
    run = ["run", "--limit", "2", "--rounds", "2", "--max-output-tokens", "1", *FAST, "--out", "r"]
    assert main(run) == 3
    out = capsys.readouterr().out
    assert f"; go on with: {SCRIPT} resume r\n" in out
