"""Reading LiveCodeBench's code_generation_lite JSONL: problems checked field by field.

Every line's JSON, fields and date are checked, and a DataError names the file, line and field.
Test cases are a JSON string of a list of {"input", "output", "testtype"}, or (how LiveCodeBench
ships private tests) base64 of zlib of a pickled JSON string; those pickles are read with an
unpickler that refuses every global, so only plain data can come out: unpickling untrusted data
must not be able to run code. Test cases are decoded only for the problems inside the release
window (a full LiveCodeBench file holds gigabytes of them).
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ttc.engine import DataError, Item
from ttc.engine._util import parse_json, read_jsonl

__all__ = ["TestCase", "read_problems", "unpack"]

_MAX_UNPACKED = 1 << 30  # a decompressed test-case blob larger than this is refused


@dataclass(frozen=True, slots=True)
class TestCase:
    """One test: its input, the expected output, and its kind ("stdin" or "functional")."""

    __test__ = False  # not a pytest class

    input: str
    output: str
    testtype: str
    public: bool


class _NoGlobals(pickle.Unpickler):
    """An unpickler that loads no class or function: only plain data comes out."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load the global {module}.{name}")


def unpack(text: str) -> str:
    """The JSON string inside LiveCodeBench's base64(zlib(pickle(json))) test-case blob."""
    raw = base64.b64decode(text.strip(), validate=True)
    inflater = zlib.decompressobj()
    data = inflater.decompress(raw, _MAX_UNPACKED)
    if inflater.unconsumed_tail:
        raise ValueError(f"decompresses to more than {_MAX_UNPACKED} bytes")
    value = _NoGlobals(io.BytesIO(data)).load()
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(f"the pickle holds a {type(value).__name__}, not a JSON string")
    return value


def read_problems(paths: Path | Sequence[Path], in_window: Callable[[date], bool]) -> list[Item]:
    """The problems of the file(s) at `paths` whose contest day is `in_window`, in file order
    (several files: one after the other, ids unique across them).

    Each file is read line by line (the engine's `read_jsonl`): a full LiveCodeBench file is
    gigabytes."""
    items: list[Item] = []
    seen: dict[str, str] = {}
    for path in [paths] if isinstance(paths, Path) else paths:
        for lineno, data in read_jsonl(path):
            item = _problem(_Record(data, f"{path}:{lineno}"), path, seen, in_window)
            if item is not None:
                items.append(item)
    return items


class _Record:
    """One line's JSON object, and where it is, for errors naming the field."""

    __slots__ = ("data", "where")

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def error(self, field: str, problem: str) -> DataError:
        return DataError(f"{self.where}: field {field!r}: {problem}")

    def require(self, field: str) -> Any:
        if field not in self.data:
            raise self.error(field, "missing")
        return self.data[field]

    def text(self, field: str, required: bool = True) -> str:
        value = self.data.get(field)
        if value is None and not required:
            return ""
        if value is None:
            raise self.error(field, "missing")
        if not isinstance(value, str):
            raise self.error(field, f"expected a string, got {value!r:.60}")
        return value

    def nonempty(self, field: str) -> str:
        value = self.text(field)
        if not value.strip():
            raise self.error(field, "empty")
        return value

    def contest_date(self) -> datetime:
        try:
            return datetime.fromisoformat(self.text("contest_date"))
        except ValueError:
            raise self.error(
                "contest_date", f"not an ISO date: {self.data['contest_date']!r:.60}"
            ) from None

    def metadata(self) -> dict[str, Any]:
        raw = self.require("metadata")
        where = f"{self.where}: field 'metadata'"
        metadata = parse_json(raw, where) if isinstance(raw, str) else raw
        if not isinstance(metadata, dict):
            raise self.error("metadata", "expected a JSON object")
        return metadata


def _problem(
    record: _Record, path: Path, seen: dict[str, str], in_window: Callable[[date], bool]
) -> Item | None:
    """The problem of a checked record, or None when its contest day is outside the window.
    `seen`: each id's first place, "FILE:LINE"."""
    item_id = record.nonempty("question_id")
    if item_id in seen:
        file, _, line = seen[item_id].rpartition(":")
        first = f"line {line}" if file == str(path) else seen[item_id]
        raise record.error("question_id", f"duplicate id {item_id!r} (first on {first})")
    seen[item_id] = record.where
    question = record.nonempty("question_content")
    starter = record.text("starter_code")
    contest = record.contest_date()
    metadata = record.metadata()
    public, private = record.require("public_test_cases"), record.require("private_test_cases")
    if not in_window(contest.date()):
        return None
    tests = [
        *_tests(public, f"{record.where}: field 'public_test_cases'", True),
        *_tests(private, f"{record.where}: field 'private_test_cases'", False),
    ]
    testtype = _testtype(record, tests, metadata.get("func_name"))
    return Item(
        id=item_id,
        question=question,
        reference="",
        meta={
            "starter_code": starter,
            "func_name": metadata.get("func_name") if testtype == "functional" else None,
            "testtype": testtype,
            "tests": tuple(tests),
            "title": record.text("question_title", required=False),
            "platform": record.text("platform", required=False),
            "difficulty": record.text("difficulty", required=False),
            "contest_date": contest.isoformat(),
        },
    )


def _testtype(record: _Record, tests: list[TestCase], func_name: object) -> str:
    """The one kind of all a problem's tests; functional tests need the function's name."""
    if not tests:
        raise record.error("public_test_cases", "the problem has no test cases")
    kinds = {test.testtype for test in tests}
    if len(kinds) > 1:
        raise record.error("private_test_cases", "mixes stdin and functional")
    testtype = kinds.pop()
    if testtype == "functional" and not (isinstance(func_name, str) and func_name):
        raise record.error("metadata", "functional tests need a func_name")
    return testtype


def _tests(raw: object, at: str, public: bool) -> list[TestCase]:
    """The test cases of one field (`at` names it), decoded and checked."""
    if isinstance(raw, str) and not raw.strip():
        return []
    data = _decode(raw, at) if isinstance(raw, str) else raw
    if not isinstance(data, list):
        raise DataError(f"{at}: expected a list of test cases, got {type(data).__name__}")
    return [_test(entry, at, index, public) for index, entry in enumerate(data)]


def _decode(raw: str, at: str) -> object:
    """The test cases of a field written as JSON, or as LiveCodeBench's base64 blob."""
    if raw.lstrip().startswith(("[", "{")):  # JSON, not LiveCodeBench's base64
        return parse_json(raw, at)
    try:
        return json.loads(unpack(raw))
    # Any failure to decode is the data's fault (nesting too deep and a refused global too).
    except Exception as exc:
        raise DataError(f"{at}: undecodable test cases: {exc}") from None


def _test(entry: object, at: str, index: int, public: bool) -> TestCase:
    if not isinstance(entry, dict):
        raise DataError(f"{at}: test {index} is not an object")
    for key in ("input", "output", "testtype"):
        if not isinstance(entry.get(key), str):
            raise DataError(f"{at}: test {index} has no string {key!r}")
    if entry["testtype"] not in ("stdin", "functional"):
        raise DataError(f"{at}: test {index} has testtype {entry['testtype']!r}")
    return TestCase(entry["input"], entry["output"], entry["testtype"], public)
