"""The reader of every file ttc reads: each way a file cannot be read is one DataError of one
shape, "FILE:LINE: what is wrong" (or "FILE: what is wrong" where there is no line), from the
engine's reader and from every reader built on it (the suites' data, --responses, config files).
"""

from __future__ import annotations

import errno
import gzip
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.suites import GPQASuite, MathSuite
from ttc.adapters.suites._generic import GenericConfig, GenericSuite
from ttc.adapters.suites._lcb_records import read_problems
from ttc.engine import DataError, Item
from ttc.engine._util import read_json, read_jsonl
from ttc.engine._util._records import parse_json, read_lines
from ttc.engine.cli._rescore import read_responses

# A JSON value nested 200,000 deep: Python's json meets its recursion limit long before the end.
DEEP = "[" * 200_000 + "]" * 200_000
# More digits than Python turns into an int (its default limit is 4300).
BIG = "9" * 5000


def _error(read: Callable[[], Any]) -> str:
    with pytest.raises(DataError) as caught:
        read()
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.__cause__ is None  # nothing carries the data along
    return message


@pytest.mark.parametrize("strict", [False, True])
def test_a_line_nested_too_deep_is_named(tmp_path: Path, strict: bool) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n\n{"a": ' + DEEP + "}\n")
    assert _error(lambda: list(read_jsonl(path, strict=strict))) == f"{path}:3: nested too deep"


def test_a_number_longer_than_python_converts_is_named(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text('{"id": 1}\n{"id": ' + BIG + "}\n")
    limit = sys.get_int_max_str_digits()
    assert limit < len(BIG)
    message = _error(lambda: list(read_jsonl(path)))
    assert message == f"{path}:2: a number of more than {limit} digits"
    # orjson (the journal's parser) refuses it too, in the same shape
    assert _error(lambda: list(read_jsonl(path, strict=True))).startswith(f"{path}:2: malformed")


@pytest.mark.parametrize("strict", [False, True])
def test_bytes_that_are_not_utf8_are_named_by_line(tmp_path: Path, strict: bool) -> None:
    path = tmp_path / "u.jsonl"
    path.write_bytes(b'{"a": "ok"}\n{"a": "caf\xe9"}\n')
    assert _error(lambda: list(read_jsonl(path, strict=strict))) == f"{path}:2: not UTF-8 text"


def test_malformed_json_is_named_and_never_quoted(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"q": "the secret question"}\n{"q": "the secret question",}\n[1]\n')
    message = _error(lambda: list(read_jsonl(path)))
    assert message.startswith(f"{path}:2: malformed JSON (")
    assert "secret" not in message
    path.write_text('{"q": 1}\n[1]\n')
    assert _error(lambda: list(read_jsonl(path))) == (f"{path}:2: expected a JSON object, got list")


def test_a_directory_or_a_missing_file_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "data.jsonl"
    folder.mkdir()
    assert _error(lambda: list(read_jsonl(folder))) == f"{folder}: is a directory, not a file"
    assert _error(lambda: read_json(folder)) == f"{folder}: is a directory, not a file"
    missing = tmp_path / "missing.jsonl"
    assert _error(lambda: list(read_jsonl(missing))) == f"{missing}: no such file"


def test_a_file_that_may_not_be_read_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret.jsonl"
    path.write_text('{"a": 1}\n')
    path.chmod(0)
    if os.geteuid() == 0:  # root reads any file: the kernel's refusal is played instead
        opened = Path.open

        def refuse(self: Path, *args: Any, **kwargs: Any) -> Any:
            if self == path:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
            return opened(self, *args, **kwargs)

        monkeypatch.setattr(Path, "open", refuse)
    assert _error(lambda: list(read_jsonl(path))) == f"{path}: cannot read (Permission denied)"


def test_a_truncated_json_file_names_the_line_it_ends_on(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "config": {\n    "seed": 1,\n    "method": "ad')
    message = _error(lambda: read_json(path))
    assert message.startswith(f"{path}:4: malformed JSON (")
    path.write_text("[1, 2]\n")
    assert _error(lambda: read_json(path)) == f"{path}: expected a JSON object, got list"


def test_a_json_document_nested_too_deep_or_a_number_too_long(tmp_path: Path) -> None:
    assert _error(lambda: parse_json(DEEP, "where", document=True)) == "where: nested too deep"
    limit = sys.get_int_max_str_digits()
    assert _error(lambda: parse_json(BIG, "x")) == f"x: a number of more than {limit} digits"


def test_lines_drop_a_leading_bom_blank_lines_and_if_asked_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n  \n{"a": 2}\n{"a": 3}')
    assert [n for n, _ in read_jsonl(path)] == [1, 4, 5]
    assert [line for _, line in read_lines(path, torn_tail=True)] == [b'{"a": 1}', b'{"a": 2}']


def test_gzipped_files_are_read_and_a_broken_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}\n'))
    assert [r["a"] for _, r in read_jsonl(path)] == [1, 2]
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}\n')[:-12])
    assert _error(lambda: list(read_jsonl(path))).startswith(f"{path}: not a readable gzip file")
    path.write_bytes(b"plain text")
    assert _error(lambda: list(read_jsonl(path))).startswith(f"{path}: not a readable gzip file")


# ---- every reader built on it: the suites' data, --responses


GOOD = {
    "math500": '{"problem": "1+1?", "answer": "2", "subject": "a", "level": 1, "unique_id": "u"}',
    "minerva": '{"problem": "1+1?", "solution": "\\\\boxed{2}", "type": "a", "idx": 0}',
    "gpqa": '{"Question": "q?", "Correct Answer": "a", "Incorrect Answer 1": "b", '
    '"Incorrect Answer 2": "c", "Incorrect Answer 3": "d"}',
    "custom": '{"q": "1+1?", "a": "2"}',
    "livecodebench": "{}",
}


def _load(suite: str, path: Path) -> Any:
    if suite in ("math500", "minerva"):
        return MathSuite(suite, path)
    if suite == "gpqa":
        return GPQASuite(path)
    if suite == "custom":
        return GenericSuite(
            path, GenericConfig(question_field="q", answer_field="a", verifier="exact")
        )
    return read_problems(path, lambda day: True)


@pytest.mark.parametrize("suite", list(GOOD))
def test_every_suites_data_names_the_line_nested_too_deep(tmp_path: Path, suite: str) -> None:
    path = tmp_path / "data.jsonl"
    first = GOOD[suite] if suite != "livecodebench" else ""
    path.write_text(first + '\n{"problem": ' + DEEP + "}\n")
    assert _error(lambda: _load(suite, path)) == f"{path}:2: nested too deep"


@pytest.mark.parametrize("suite", list(GOOD))
def test_every_suites_data_names_bad_bytes_and_a_directory(tmp_path: Path, suite: str) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"problem": "\xff"}\n')
    assert _error(lambda: _load(suite, path)) == f"{path}:1: not UTF-8 text"
    path.unlink()
    path.mkdir()
    assert _error(lambda: _load(suite, path)) == f"{path}: is a directory, not a file"


def test_responses_with_a_number_too_long_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text('{"id": "q0", "response": "a"}\n{"id": ' + BIG + ', "response": "b"}\n')
    items = {"q0": Item("q0", "question?", "a")}
    limit = sys.get_int_max_str_digits()
    message = _error(lambda: read_responses(path, items))
    assert message == f"{path}:2: a number of more than {limit} digits"


def test_bad_input_met_inside_a_task_group_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ttc.engine.cli import _commands, main

    async def fails(*args: object) -> int:
        raise ExceptionGroup("a task failed", [DataError(f"{tmp_path}/x.jsonl:7: nested too deep")])

    monkeypatch.setattr(_commands, "cmd_run", fails)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--per-task", "1", "--no-live", "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == f"ttc: error: {tmp_path}/x.jsonl:7: nested too deep\n"
