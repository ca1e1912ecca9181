"""Bad input as a user meets it, through the `ttc` command: a file that cannot be read is one line
on stderr naming the file (and the line), exit 2, never a traceback; a resume with nothing to go
on from, or a corrupt config.json or journal, is refused touching nothing; a corrupt response
cache is moved aside with one warning, and the run goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ttc.engine.journal import journal_text

TTC = str(Path(sys.executable).with_name("ttc"))
# A JSON value nested 200,000 deep (Python's json: a RecursionError), and a number of more digits
# than Python turns into an int (a ValueError).
DEEP = "[" * 200_000 + "]" * 200_000
BIG = "9" * 5000
RUN = ["--per-task", "2", "--rounds", "2", "--embedder", "lexical", "--workers", "0", "-q",
       "--no-live"]  # fmt: skip


def ttc(cwd: Path, *args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TTC_CACHE_DIR": str(cache or cwd / ".ttc-cache")}
    return subprocess.run([TTC, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def refused(proc: subprocess.CompletedProcess[str], starts: str, words: str = "") -> str:
    """The one line of a refusal: exit 2, naming `starts` first, and no traceback anywhere."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ttc: error: {starts}"), lines[0]
    assert words in lines[0]
    return lines[0]


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `directory` (hidden ones too): its bytes and modification time."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# ---- files that cannot be read


SUITES = {
    "math500": '{"problem": "1+1?", "answer": "2", "subject": "a", "level": 1, "unique_id": "u"}',
    "minerva": '{"problem": "1+1?", "solution": "\\\\boxed{2}", "type": "a", "idx": 0}',
    "gpqa": '{"Question": "q?", "Correct Answer": "a", "Incorrect Answer 1": "b", '
    '"Incorrect Answer 2": "c", "Incorrect Answer 3": "d"}',
    "livecodebench": "",
    "custom": '{"q": "1+1?", "a": "2"}',
}


@pytest.mark.parametrize("suite", list(SUITES))
def test_data_nested_too_deep_is_one_line_naming_the_line(tmp_path: Path, suite: str) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(SUITES[suite] + '\n{"problem": ' + DEEP + "}\n")
    config = tmp_path / "suite.json"
    config.write_text('{"question_field": "q", "answer_field": "a", "verifier": "exact"}')
    extra = ["--suite-config", str(config)] if suite == "custom" else []
    proc = ttc(tmp_path, "run", "--suite", suite, "--data", str(data), *extra,
               "--out", str(tmp_path / "out"))  # fmt: skip
    refused(proc, f"{data}:2: nested too deep")
    assert not (tmp_path / "out").exists()


def test_responses_with_a_number_too_long_are_one_line_naming_the_line(tmp_path: Path) -> None:
    responses = tmp_path / "responses.jsonl"
    responses.write_text('\n{"id": ' + BIG + ', "response": "b"}\n')
    proc = ttc(tmp_path, "verify", "--per-task", "1", "--responses", str(responses))
    refused(proc, f"{responses}:2: a number of more than ", "digits")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda p: p.write_bytes(b'{"id": "a", "response": "caf\xe9"}\n'), ":1: not UTF-8 text"),
        (lambda p: p.mkdir(), ": is a directory, not a file"),
        (lambda p: None, ": no such file"),
    ],
)
def test_responses_that_cannot_be_read_are_one_line(
    tmp_path: Path, make: Callable[[Path], object], what: str
) -> None:
    responses = tmp_path / "responses.jsonl"
    make(responses)
    proc = ttc(tmp_path, "verify", "--per-task", "1", "--responses", str(responses))
    refused(proc, f"{responses}{what}")


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root reads any file (tests/engine/_util/test_records.py)"
)
def test_a_file_that_may_not_be_read_is_one_line(tmp_path: Path) -> None:
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"id": "a", "response": "b"}\n')
    responses.chmod(0)
    proc = ttc(tmp_path, "verify", "--per-task", "1", "--responses", str(responses))
    refused(proc, f"{responses}: cannot read (Permission denied)")


def test_a_batch_input_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    batch = tmp_path / "in.jsonl"
    batch.write_text('{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", '
                     '"body": ' + DEEP + "}\n")  # fmt: skip
    out = tmp_path / "out.jsonl"
    proc = ttc(tmp_path, "batch", str(batch), "--out", str(out), "--model", "m",
               "--base-url", "http://127.0.0.1:9/v1")  # fmt: skip
    refused(proc, f"{batch}:1: nested too deep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_a_truncated_suite_config_is_one_line_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / "suite.json"
    config.write_text('{\n  "question_field": "q",\n  "answer_field": "a",\n  "verif')
    data = tmp_path / "data.jsonl"
    data.write_text(SUITES["custom"] + "\n")
    proc = ttc(tmp_path, "run", "--suite", "custom", "--data", str(data),
               "--suite-config", str(config), "--out", str(tmp_path / "out"))  # fmt: skip
    refused(proc, f"{config}:4: malformed JSON (")


# ---- resume: refused, touching nothing, when there is nothing (sound) to go on from


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run directory (made once; each test spoils a copy)."""
    home = tmp_path_factory.mktemp("finished")
    proc = ttc(home, "run", *RUN, "--no-cache", "--out", str(home / "run"))
    assert proc.returncode == 0, proc.stderr
    return home / "run"


def _replace_line(path: Path, lineno: int, line: bytes) -> None:
    lines = [raw.rstrip(b"\n") for raw in journal_text(path)]  # written again plain
    lines[lineno - 1] = line
    path.write_bytes(b"\n".join(lines) + b"\n")


def spoil(run: Path, how: str) -> str:
    """Spoils the run directory `run` as `how` says; returns how its refusal begins."""
    journal, config = run / "journal.jsonl", run / "config.json"
    if how == "journal gone":
        journal.unlink()
        return f"nothing to resume: {journal} is missing"
    if how == "journal empty":
        journal.write_bytes(b"")
        return f"nothing to resume: {journal} is empty"
    if how == "config truncated":
        config.write_bytes(config.read_bytes()[:200])
        return f"{config}:"
    line, text, starts = {
        "journal not UTF-8": (5, b'{"ev": "sample", "text": "\xff"}', "not UTF-8 text"),
        "journal nested": (3, b'{"a":' * 200_000 + b"1" + b"}" * 200_000, "nested too deep"),
        "journal line cut": (7, b'{"ev": "sample", "round": 1}', "sample event lacks a valid"),
    }[how]
    _replace_line(journal, line, text)
    return f"{journal}:{line}: {starts}"


SPOILS = ["journal gone", "journal empty", "config truncated", "journal not UTF-8",
          "journal nested", "journal line cut"]  # fmt: skip


@pytest.mark.parametrize("how", SPOILS)
def test_a_resume_that_cannot_go_on_is_refused_touching_nothing(
    tmp_path: Path, finished: Path, how: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    starts = spoil(run, how)
    before = snapshot(run)
    proc = ttc(tmp_path, "resume", str(run))
    refused(proc, starts)
    assert snapshot(run) == before


@pytest.mark.slow
def test_a_resume_of_a_compare_whose_method_lost_its_journal_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    first = ttc(tmp_path, "compare", *RUN, "--per-task", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    (out / "unif" / "journal.jsonl").unlink()
    before = snapshot(out)
    proc = ttc(tmp_path, "resume", str(out))
    refused(proc, f"nothing to resume: {out.resolve()}/unif/journal.jsonl is missing")
    assert snapshot(out) == before


# ---- a corrupt response cache: moved aside, one warning, the run goes on


@pytest.fixture(scope="module")
def cache_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A response cache filled by one run (made once; each test spoils a copy)."""
    home = tmp_path_factory.mktemp("cache")
    proc = ttc(home, "run", *RUN, "--out", str(home / "run"), cache=home / "cache")
    assert proc.returncode == 0, proc.stderr
    (path,) = (home / "cache").iterdir()
    assert path.stat().st_size > 3 * 4096
    return path


def _garble(path: Path) -> None:
    """Every page past the second overwritten: SQLite opens it, then finds it malformed."""
    data = path.read_bytes()
    path.write_bytes(data[: 2 * 4096] + b"\x5a" * (len(data) - 2 * 4096))


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (lambda p: p.write_bytes(b"not a database\n" * 300), "file is not a database"),
        (_garble, "database disk image is malformed"),  # found by a lookup, mid-run
    ],
)
def test_a_corrupt_cache_is_moved_aside_with_one_warning_and_the_run_goes_on(
    tmp_path: Path, cache_file: Path, spoil: Callable[[Path], object], why: str
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    path = cache / cache_file.name
    shutil.copy(cache_file, path)
    spoil(path)
    spoiled = path.read_bytes()
    proc = ttc(tmp_path, "run", *RUN, "--out", str(tmp_path / "run"), cache=cache)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    # One line says so (the others are the run's own log lines: `-q` does not hush run.log's).
    (warning,) = [line for line in proc.stderr.splitlines() if "cache" in line]
    assert f"response cache {path} is corrupt ({why}): moved aside to" in warning
    (aside,) = [p for p in cache.iterdir() if p.name.startswith(f"{path.name}.corrupt-")]
    assert aside.read_bytes() == spoiled
    assert "cache: 12 requests sent, 0 answered from the cache" in proc.stdout
    again = ttc(tmp_path, "run", *RUN, "--out", str(tmp_path / "again"), cache=cache)
    assert again.returncode == 0, again.stderr
    assert "cache: 0 requests sent, 12 answered from the cache" in again.stdout
