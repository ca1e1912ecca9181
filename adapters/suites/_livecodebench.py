"""The paper's LiveCodeBench suite: code_generation_lite problems of a release window, judged by
running the program against every test case in the sandbox (`_sandbox.run_python`).

Records are LiveCodeBench's JSONL lines. Used fields: question_id (the item id), question_content
(the question), starter_code, public_test_cases and private_test_cases, metadata (a JSON string;
`func_name` for functional tests), contest_date (ISO), and optionally question_title, platform
and difficulty; other fields are ignored. Test cases are a JSON string of a list of
{"input", "output", "testtype": "stdin" | "functional"}, or (how LiveCodeBench ships private
tests) base64 of zlib of a pickled JSON string. Those pickles are read with an unpickler that
refuses every global, so only str/bytes/list/dict/int/float can come out: unpickling untrusted
data must not be able to run code. Every line's JSON, fields and date are checked; test cases
are decoded only for the records inside the window (a full LiveCodeBench file holds gigabytes
of them).

Judging follows LiveCodeBench's evaluator (lcb_runner/evaluation/testing_util.py), except where
noted:

- the response's code is the last fenced block if the model added fences despite the prompt,
  else the whole response;
- each test runs in a fresh sandboxed process, in order, stopping at the first failure
  (LiveCodeBench runs all tests in one process);
- LiveCodeBench's import prelude (`from collections import *` ... `sys.setrecursionlimit(50000)`)
  runs before the program, for both kinds of test, less the lines that bind no name the program
  mentions (`lcb_prelude`: the same bindings, half the start-up time);
- stdin tests: the output and the expected output are compared line by line after stripping
  both ends and each line; lines that differ are split on whitespace and compared token by
  token, tokens that differ as numbers (Decimal). Where the expected token is an integer, the
  output's must equal it exactly ("1.0" passes for "1", "1.0000001" does not); where it has a
  fractional part or an exponent, the output's may be off by 1e-6 absolute or relative
  (LiveCodeBench demands Decimal equality: this accepts the answers a problem's stated tolerance
  accepts). A program that ends with `sys.exit(n)` is graded on its output, as LiveCodeBench's
  `except SystemExit` does;
- functional tests: the program defines LeetCode's `class Solution` with the method `func_name`
  (or a top-level function of that name); a harness in the sandbox decodes the input lines as
  JSON arguments, calls the method, and prints the JSON of the result, which must equal the
  expected JSON value (tuples count as lists; numbers as above: an expected integer exactly, an
  expected float with the tolerance).

The program cannot see the directory holding the problems file (nor the others the sandbox
hides), so it cannot look its expected outputs up. Constructing the suite checks that the
sandbox works here (a ConfigError if not).
"""

from __future__ import annotations

import base64
import functools
import importlib
import io
import json
import math
import os
import pickle
import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ttc.adapters.sandbox import SandboxResult, SandboxUnavailable, protections, run_python
from ttc.adapters.suites import _templates
from ttc.engine import ConfigError, DataError, Demo, Item, Verdict

__all__ = [
    "LCB_IMPORTS",
    "LiveCodeBenchSuite",
    "TestCase",
    "TestReport",
    "extract_code",
    "lcb_prelude",
    "outputs_match",
]

WINDOW = ("2024-10-05", "2025-01-04")
"""The paper's release window, both days included."""

LCB_IMPORTS = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""LiveCodeBench's `import_string`, run before every program (see `lcb_prelude`)."""

_TOLERANCE = 1e-6
_MAX_UNPACKED = 1 << 30  # a decompressed test-case blob larger than this is refused
_SHOWN = 60  # characters of an output quoted in a verdict's detail
_RESULT = "\x00ttc-result\x00"  # the functional harness prints this before the result's JSON
_SIM_CORRECT = "# sim: correct"
_SIM_WRONG = "# sim: wrong"
_INTEGER = re.compile(r"[+-]?\d+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[ \t]*$", re.MULTILINE)

_HARNESS = """
import io, json, sys


def _ttc_call():
    text = sys.stdin.read().strip()
    args = [json.loads(line) for line in text.split("\\n")] if text else []
    ns = {"__name__": "solution"}
    exec(compile(IMPORTS, "<imports>", "exec"), ns)
    real, sys.stdout = sys.stdout, io.StringIO()  # the program's own prints are not the result
    try:
        exec(compile(SOURCE, "solution.py", "exec", dont_inherit=True), ns)
        # LiveCodeBench: a class Solution if the program has one, else the module itself
        owner = ns["Solution"]() if isinstance(ns.get("Solution"), type) else None
        target = getattr(owner, FUNC, None) if owner is not None else ns.get(FUNC)
        if not callable(target):
            raise SystemExit(f"missing entry point {FUNC}")
        result = target(*args)
    finally:
        sys.stdout = real
    try:
        encoded = json.dumps(result)
    except (TypeError, ValueError):
        raise SystemExit(f"the result is not JSON: {type(result).__name__}") from None
    sys.stdout.write(MARKER + encoded + "\\n")


_ttc_call()
"""


@dataclass(frozen=True, slots=True)
class TestCase:
    """One test: its input, the expected output, and its kind ("stdin" or "functional")."""

    __test__ = False  # not a pytest class

    input: str
    output: str
    testtype: str
    public: bool


@dataclass(frozen=True, slots=True)
class TestReport:
    """The tests a program passed before the first failure; `failure` is None iff it passed all.

    ran: how many tests were run (the passed ones and the failing one).
    """

    __test__ = False

    passed: int
    total: int
    failure: str | None
    ran: int


class _NoGlobals(pickle.Unpickler):
    """An unpickler that loads no class or function: only plain data comes out."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load the global {module}.{name}")


def _unpack(text: str) -> str:
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


@functools.cache
def _star_exports() -> dict[str, frozenset[str]]:
    """The names each `from M import *` line of the prelude binds."""
    exports = {}
    for line in LCB_IMPORTS.splitlines():
        if line.startswith("from "):
            name = line.split()[1]
            module = importlib.import_module(name)
            public = getattr(module, "__all__", None)
            if public is None:
                public = [n for n in dir(module) if not n.startswith("_")]
            exports[name] = frozenset(public)
    return exports


def lcb_prelude(code: str) -> str:
    """The lines of LiveCodeBench's import prelude that can matter to `code`.

    Importing all eighteen modules costs about 20 ms per process, as much as starting Python.
    A `from M import *` line is kept iff M exports a name that occurs anywhere in the program's
    text (strings included, for eval), an `import M` line iff M occurs: every name the program
    can mention is bound exactly as the full prelude binds it, in the same order.
    """
    names = set(_IDENTIFIER.findall(code))
    exports = _star_exports()
    kept = []
    for line in LCB_IMPORTS.splitlines():
        words = line.split()
        if words[0] == "from" and not exports[words[1]] & names:
            continue
        if words[0] == "import" and words[1] != "sys" and words[1] not in names:
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def _clip(text: str, limit: int = _SHOWN) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _numbers_match(got: str, want: str) -> bool:
    try:
        a, b = Decimal(got), Decimal(want)
    except InvalidOperation:
        return False
    if a == b:
        return True
    if _INTEGER.fullmatch(want):
        return False  # an integer answer is exact, however large
    x, y = float(a), float(b)
    return math.isfinite(x) and math.isclose(x, y, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)


def _first_mismatch(got: str, want: str) -> str | None:
    """None if the outputs match, else what differs (short)."""
    got_lines, want_lines = _lines(got), _lines(want)
    if len(got_lines) != len(want_lines):
        return (
            f"expected {len(want_lines)} line(s), got {len(got_lines)}: "
            f"expected {_clip(want.strip())}, got {_clip(got.strip())}"
        )
    for number, (g, w) in enumerate(zip(got_lines, want_lines, strict=True), start=1):
        if g == w:
            continue
        g_tokens, w_tokens = g.split(), w.split()
        if len(g_tokens) == len(w_tokens) and all(
            a == b or _numbers_match(a, b) for a, b in zip(g_tokens, w_tokens, strict=True)
        ):
            continue
        return f"line {number}: expected {_clip(w)}, got {_clip(g)}"
    return None


def outputs_match(got: str, want: str) -> bool:
    """Whether a stdin test's output `got` is accepted for the expected output `want`."""
    return _first_mismatch(got, want) is None


def _values_match(got: Any, want: Any) -> bool:
    """Equality of decoded JSON values, with the float tolerance of stdin tests."""
    if isinstance(got, float) or isinstance(want, float):
        if isinstance(got, bool) or isinstance(want, bool):
            return bool(got == want)
        if not isinstance(got, int | float) or not isinstance(want, int | float):
            return False
        if isinstance(want, int):
            return got == want  # an integer answer is exact
        return got == want or math.isclose(got, want, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(map(_values_match, got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_values_match(got[k], want[k]) for k in want)
    return bool(got == want)


def extract_code(response: str) -> str:
    """The program in a response: its last fenced code block if it has fences, else all of it."""
    text = response
    if "</think>" in text:
        text = text[text.rfind("</think>") + len("</think>") :]
    fences = list(_FENCE.finditer(text))
    if not fences:
        if text.lstrip().startswith("```"):  # a fence closed at the end of a code line
            body = text.lstrip()[3:]
            body = body.split("\n", 1)[1] if "\n" in body else ""
            return body.rstrip().removesuffix("```").strip("\n")
        return text.strip("\n")
    blocks: list[tuple[str, str]] = []
    for opening, closing in zip(fences[::2], [*fences[1::2], None], strict=False):
        if closing is not None:
            body = text[opening.end() + 1 : closing.start()]
        else:  # truncated, or closed at the end of a code line
            body = text[opening.end() + 1 :].rstrip().removesuffix("```")
        blocks.append((opening.group(1).lower(), body))
    python = [body for lang, body in blocks if lang in ("", "python", "python3", "py")]
    return (python or [body for _, body in blocks])[-1].strip("\n")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _run_failure(result: SandboxResult, timeout_s: float, memory_mb: int) -> str | None:
    """Why a run failed before its output could be judged, or None."""
    reason = result.killed_reason
    if reason == "timeout":
        return f"time limit exceeded ({timeout_s:g} s)"
    if reason == "cpu":
        return "time limit exceeded (CPU time)"
    if reason == "memory":
        return f"memory limit exceeded ({memory_mb} MB)"
    if reason == "output":
        return "output limit exceeded"
    if reason is not None:
        return f"runtime error: killed by {reason.removeprefix('signal ')}"
    if result.returncode != 0 and "Traceback (most recent call last)" in result.stderr:
        return f"runtime error: {_clip(_last_line(result.stderr), 200)[1:-1]}"
    return None


def _day(value: str | date | None, name: str) -> date | None:
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, datetime):
        return value.date()
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a YYYY-MM-DD date or None, got {value!r}") from None


class LiveCodeBenchSuite:
    """The paper's LiveCodeBench benchmark: the problems of a release window, judged by tests."""

    name = "livecodebench"
    sim_prose: bool = False  # code-only answers: the simulator sends the program alone

    def __init__(
        self,
        path: str | Path,
        start: str | date | None = WINDOW[0],
        end: str | date | None = WINDOW[1],
        timeout_s: float = 6.0,
        memory_mb: int = 1024,
    ) -> None:
        self.path = Path(path)
        self.start = _day(start, "start")
        self.end = _day(end, "end")
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ConfigError(f"start: {self.start} is after end {self.end}")
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(f"timeout_s: must be a positive number, got {timeout_s!r}")
        if memory_mb < 64:
            raise ConfigError(f"memory_mb: must be >= 64, got {memory_mb}")
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self._items: list[Item] | None = None
        try:  # here rather than in the verifier workers, where a failure breaks the pool
            protections()
        except SandboxUnavailable as exc:
            raise ConfigError(
                f"livecodebench: judging runs programs in a sandbox, which does not work on this "
                f"machine: {exc}"
            ) from None

    # Workers receive the suite pickled: judging needs only the settings (each Item carries its
    # tests), so the parsed file stays behind.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._items = None

    def items(self) -> list[Item]:
        """The problems whose contest date is inside the window, in file order."""
        if self._items is None:
            self._items = self._load()
        return list(self._items)

    def _in_window(self, day: date) -> bool:
        return (self.start is None or day >= self.start) and (self.end is None or day <= self.end)

    def _load(self) -> list[Item]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise DataError(f"{self.path}: cannot read the file: {exc.strerror or exc}") from None
        items: list[Item] = []
        seen: dict[str, int] = {}
        with handle:
            for lineno, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"{self.path}, line {lineno}: not UTF-8 text (byte {exc.start + 1} of the "
                        f"line: {raw[exc.start : exc.start + 1]!r})"
                    ) from None
                if not line.strip():
                    continue
                item = self._record(line, lineno, seen)
                if item is not None:
                    items.append(item)
        return items

    def _record(self, line: str, lineno: int, seen: dict[str, int]) -> Item | None:
        where = f"{self.path}, line {lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: malformed JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")

        def text(field: str, required: bool = True) -> str:
            value = record.get(field)
            if value is None and not required:
                return ""
            if value is None:
                raise DataError(f"{where}, field {field!r}: missing")
            if not isinstance(value, str):
                raise DataError(f"{where}, field {field!r}: expected a string, got {value!r:.60}")
            return value

        item_id = text("question_id")
        if not item_id.strip():
            raise DataError(f"{where}, field 'question_id': empty")
        if item_id in seen:
            raise DataError(
                f"{where}, field 'question_id': duplicate id {item_id!r} (first on line "
                f"{seen[item_id]})"
            )
        seen[item_id] = lineno
        question = text("question_content")
        if not question.strip():
            raise DataError(f"{where}, field 'question_content': empty")
        starter = text("starter_code")
        try:
            contest = datetime.fromisoformat(text("contest_date"))
        except ValueError:
            raise DataError(
                f"{where}, field 'contest_date': not an ISO date: {record['contest_date']!r:.60}"
            ) from None
        if "metadata" not in record:
            raise DataError(f"{where}, field 'metadata': missing")
        metadata_raw = record["metadata"]
        try:
            metadata = json.loads(metadata_raw) if isinstance(metadata_raw, str) else metadata_raw
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}, field 'metadata': malformed JSON: {exc.msg}") from None
        if not isinstance(metadata, dict):
            raise DataError(f"{where}, field 'metadata': expected a JSON object")
        for field in ("public_test_cases", "private_test_cases"):
            if field not in record:
                raise DataError(f"{where}, field {field!r}: missing")
        if not self._in_window(contest.date()):
            return None
        tests = [
            *self._tests(record["public_test_cases"], where, "public_test_cases", True),
            *self._tests(record["private_test_cases"], where, "private_test_cases", False),
        ]
        if not tests:
            raise DataError(f"{where}, field 'public_test_cases': the problem has no test cases")
        kinds = {test.testtype for test in tests}
        if len(kinds) > 1:
            raise DataError(f"{where}, field 'private_test_cases': mixes stdin and functional")
        testtype = kinds.pop()
        func_name = metadata.get("func_name")
        if testtype == "functional" and not (isinstance(func_name, str) and func_name):
            raise DataError(f"{where}, field 'metadata': functional tests need a func_name")
        return Item(
            id=item_id,
            question=question,
            reference="",
            meta={
                "starter_code": starter,
                "func_name": func_name if testtype == "functional" else None,
                "testtype": testtype,
                "tests": tuple(tests),
                "title": text("question_title", required=False),
                "platform": text("platform", required=False),
                "difficulty": text("difficulty", required=False),
                "contest_date": contest.isoformat(),
            },
        )

    def _tests(self, raw: object, where: str, field: str, public: bool) -> list[TestCase]:
        at = f"{where}, field {field!r}"
        if isinstance(raw, str) and not raw.strip():
            return []
        data: object = raw
        if isinstance(raw, str):
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as exc:
                if raw.lstrip().startswith(("[", "{")):  # JSON, not LiveCodeBench's base64
                    raise DataError(
                        f"{at}: malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                    ) from None
                try:
                    data = json.loads(_unpack(raw))
                # Any failure to decode is the data's fault; a refused global is one of them.
                except Exception as exc:
                    raise DataError(f"{at}: undecodable test cases: {exc}") from None
        if not isinstance(data, list):
            raise DataError(f"{at}: expected a list of test cases, got {type(data).__name__}")
        tests = []
        for index, entry in enumerate(data):
            if not isinstance(entry, dict):
                raise DataError(f"{at}: test {index} is not an object")
            for key in ("input", "output", "testtype"):
                if not isinstance(entry.get(key), str):
                    raise DataError(f"{at}: test {index} has no string {key!r}")
            if entry["testtype"] not in ("stdin", "functional"):
                raise DataError(f"{at}: test {index} has testtype {entry['testtype']!r}")
            tests.append(TestCase(entry["input"], entry["output"], entry["testtype"], public))
        return tests

    def warmup_prompt(self, item: Item) -> str:
        """The paper's LiveCodeBench warm-up prompt (starter code, or N/A)."""
        return _templates.warmup_prompt(
            self.name, item.question, starter_code=str(item.meta["starter_code"])
        )

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The paper's LiveCodeBench adaptive prompt: solved neighbours, then the base prompt."""
        return _templates.adaptive_prompt(
            self.name,
            item.question,
            [(d.question, d.response) for d in demos],
            starter_code=str(item.meta["starter_code"]),
        )

    def prepare(self) -> None:
        """Probe the sandbox now (verifier workers call this at start-up)."""
        protections()

    def judge(self, item: Item, response: str) -> Verdict:
        """1.0 iff the program passes every test; the answer says how many it passed."""
        report = self.run_tests(item, response)
        answer = f"{report.passed}/{report.total} tests passed"
        if report.failure is None:
            return Verdict(1.0, answer, f"all {report.total} tests passed")
        return Verdict(0.0, answer, report.failure)

    def run_tests(self, item: Item, response: str) -> TestReport:
        """Runs the response's program on the item's tests in order, up to the first failure."""
        tests: tuple[TestCase, ...] = item.meta["tests"]
        code = extract_code(response)
        if not code.strip():
            return TestReport(0, len(tests), "no code in the response", 0)
        func_name = item.meta.get("func_name")
        for index, test in enumerate(tests):
            problem = self._run_test(code, test, func_name)
            if problem is not None:
                kind = "public" if test.public else "private"
                failure = f"test {index + 1}/{len(tests)} ({kind}): {problem}"
                return TestReport(index, len(tests), failure, index + 1)
        return TestReport(len(tests), len(tests), None, len(tests))

    def _private(self) -> tuple[str, ...]:
        """What the program must not see: the directory of the problems, with their answers."""
        return (os.path.dirname(os.path.abspath(self.path)),)

    def _run_test(self, code: str, test: TestCase, func_name: str | None) -> str | None:
        """None if the program passes `test`, else why not."""
        cap = max(1 << 20, 2 * len(test.output) + (64 << 10))
        if test.testtype == "stdin":
            result = run_python(
                code,
                test.input,
                timeout_s=self.timeout_s,
                memory_mb=self.memory_mb,
                max_output_bytes=cap,
                prelude=lcb_prelude(code),
                hide=self._private(),
            )
            failure = _run_failure(result, self.timeout_s, self.memory_mb)
            if failure is not None:
                return failure
            mismatch = _first_mismatch(result.stdout, test.output)
            return None if mismatch is None else f"wrong answer: {mismatch}"
        harness = (
            f"SOURCE = {code!r}\nFUNC = {func_name!r}\nIMPORTS = {lcb_prelude(code)!r}\n"
            f"MARKER = {_RESULT!r}\n{_HARNESS}"
        )
        result = run_python(
            harness,
            test.input,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            max_output_bytes=cap,
            hide=self._private(),
        )
        failure = _run_failure(result, self.timeout_s, self.memory_mb)
        if failure is not None:
            return failure
        at = result.stdout.rfind(_RESULT)
        if at == -1:
            why = _last_line(result.stderr) or f"exit status {result.returncode}, no result"
            return f"runtime error: {_clip(why, 200)[1:-1]}"
        got_text = result.stdout[at + len(_RESULT) :].strip()
        try:
            got, want = json.loads(got_text), json.loads(test.output)
        except json.JSONDecodeError:
            return f"wrong answer: unreadable result {_clip(got_text)}"
        if _values_match(got, want):
            return None
        return f"wrong answer: expected {_clip(test.output.strip())}, got {_clip(got_text)}"

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """A program that looks up each test's expected output; when not `correct`, one of them
        is perturbed, so the real judge fails it."""
        tests: tuple[TestCase, ...] = item.meta["tests"]
        functional = item.meta["testtype"] == "functional"
        expected: list[Any] = [json.loads(t.output) if functional else t.output for t in tests]
        if not correct:
            rng = random.Random(f"{item.id}\x1f{seed}")
            index = rng.randrange(len(tests))
            expected[index] = (
                _perturb_value(expected[index], rng)
                if functional
                else _perturb_text(expected[index], rng)
            )
        head = _SIM_CORRECT if correct else _SIM_WRONG
        if functional:
            table = {
                _canonical_args(t.input): value for t, value in zip(tests, expected, strict=True)
            }
            return (
                f"{head}\nimport json\n\n{_table_source(table)}\n\n\nclass Solution:\n"
                f"    def {item.meta['func_name']}(self, *args):\n"
                "        return TABLE[json.dumps(list(args), sort_keys=True)]\n"
            )
        table = {t.input: value for t, value in zip(tests, expected, strict=True)}
        return (
            f"{head}\nimport json\nimport sys\n\n{_table_source(table)}\n"
            'sys.stdout.write(TABLE.get(sys.stdin.read(), ""))\n'
        )

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the response is the simulator's correct program (its first line says so)."""
        return response.lstrip().startswith(_SIM_CORRECT + "\n")


def _canonical_args(text: str) -> str:
    stripped = text.strip()
    args = [json.loads(line) for line in stripped.split("\n")] if stripped else []
    return json.dumps(args, sort_keys=True)


def _table_source(table: dict[str, Any]) -> str:
    """`TABLE = ...` as Python source; large tables are compressed to keep the program short."""
    encoded = json.dumps(table, sort_keys=True)
    if len(encoded) <= 4000:
        return f"TABLE = json.loads({encoded!r})"
    packed = base64.b85encode(zlib.compress(encoded.encode("utf-8"), 9)).decode("ascii")
    return (
        "import base64\nimport zlib\n\n"
        f"TABLE = json.loads(zlib.decompress(base64.b85decode({packed!r})))"
    )


def _perturb_text(expected: str, rng: random.Random) -> str:
    """A stdin test's expected output with one line changed so that it no longer matches."""
    lines = expected.rstrip("\n").split("\n")
    index = rng.randrange(len(lines))
    tokens = lines[index].split()
    if tokens:
        last = tokens[-1]
        if _INTEGER.fullmatch(last):
            tokens[-1] = str(int(last) + rng.choice((-2, -1, 1, 2)))
        elif last in ("Yes", "No", "YES", "NO"):
            tokens[-1] = {"Yes": "No", "No": "Yes", "YES": "NO", "NO": "YES"}[last]
        else:
            try:
                tokens[-1] = repr(float(last) + 1.0 + abs(float(last)))
            except ValueError:
                tokens[-1] = last + "x"
    lines[index] = " ".join(tokens) if tokens else "0"
    wrong = "\n".join(lines) + "\n"
    return wrong if not outputs_match(wrong, expected) else expected.rstrip("\n") + "\n0\n"


def _perturb_value(value: Any, rng: random.Random) -> Any:
    """A JSON value of the same shape that `_values_match` tells apart from `value`."""
    if isinstance(value, bool):
        wrong: Any = not value
    elif isinstance(value, int):
        wrong = value + rng.choice((-2, -1, 1, 2))
    elif isinstance(value, float):
        wrong = value + 1.0 + abs(value)
    elif isinstance(value, str):
        wrong = value + "x"
    elif isinstance(value, list) and value:
        index = rng.randrange(len(value))
        wrong = [*value[:index], _perturb_value(value[index], rng), *value[index + 1 :]]
    elif isinstance(value, list):
        wrong = [0]
    else:
        wrong = [value]
    return wrong if not _values_match(wrong, value) else [value]
