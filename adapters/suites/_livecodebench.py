"""The paper's LiveCodeBench suite: code_generation_lite problems of a release window, judged by
running the program against every test case in the sandbox (`ttc.adapters.sandbox.run_python`).

Records are LiveCodeBench's JSONL lines: of one file, or of several read in turn (the Hub's
release files, `_hub.download_lcb`). Used fields: question_id (the item id), question_content
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

The expected outputs never enter the sandbox: the program gets a test's input only, and its
output comes back here to be compared. The program cannot see the directories holding the
problems files either (nor the others the sandbox hides): they are absent from its private root,
outside its Landlock allow-list, or covered in its mount namespace, so it cannot look its expected
outputs up. Constructing the suite checks that the sandbox works here and hides them (a
ConfigError if not); with `visible_tests=True` (`--allow-visible-tests`) it judges where nothing
hides them, and `judging` says so in summary.json.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ttc.adapters.sandbox import RunOptions, SandboxUnavailable, protections, run_python
from ttc.adapters.suites._base import TemplatedSuite
from ttc.adapters.suites._lcb_judge import (
    HARNESS,
    RESULT_MARKER,
    TestReport,
    clip,
    extract_code,
    first_mismatch,
    last_line,
    lcb_prelude,
    read_json,
    run_failure,
    values_match,
)
from ttc.adapters.suites._lcb_records import TestCase, read_problems
from ttc.engine import ConfigError, Item, Verdict

__all__ = ["WINDOW", "LiveCodeBenchSuite", "window"]

WINDOW = ("2024-10-05", "2025-01-04")
"""The paper's release window, both days included."""


def _day(value: str | date | None, name: str) -> date | None:
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, datetime):
        return value.date()
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a YYYY-MM-DD date or None, got {value!r}") from None


def window(start: str | date | None, end: str | date | None) -> tuple[date | None, date | None]:
    """The release window as days, checked (None: no bound)."""
    first, last = _day(start, "start"), _day(end, "end")
    if first is not None and last is not None and first > last:
        raise ConfigError(f"start: {first} is after end {last}")
    return first, last


def _judging(report: Mapping[str, Any], visible_tests: bool) -> dict[str, Any] | None:
    """What summary.json says of the judging under the sandbox's `report` (None: nothing, the
    tests are hidden); a ConfigError where they are not and `visible_tests` was not asked for."""
    if report["hidden_inputs"] != "not hidden":
        return None
    missing = report["missing"]
    why = "; ".join(
        f"{layer}: {missing[layer]}"
        for layer in ("namespaces", "private root", "landlock")
        if layer in missing
    )
    if not visible_tests:
        raise ConfigError(
            "livecodebench: the sandbox here cannot keep the test cases from the programs it "
            f"judges (no private root and no Landlock allow-list: {why}), so a program could "
            "print the expected outputs and pass. Run where namespaces or Landlock work "
            "(docs/suites.md, 'The code sandbox'), or pass --allow-visible-tests to judge "
            "anyway (summary.json records it)"
        )
    return {"tests_visible_to_programs": True, "why": why or "no file allow-list"}


class LiveCodeBenchSuite(TemplatedSuite):
    """The paper's LiveCodeBench benchmark: the problems of a release window, judged by tests."""

    name = "livecodebench"

    def __init__(
        self,
        path: str | Path | Sequence[str | Path],
        start: str | date | None = WINDOW[0],
        end: str | date | None = WINDOW[1],
        timeout_s: float = 6.0,
        memory_mb: int = 1024,
        source: Mapping[str, object] | None = None,
        visible_tests: bool = False,
    ) -> None:
        paths = [path] if isinstance(path, str | Path) else list(path)
        if not paths:
            raise ConfigError("livecodebench: no problems file")
        self.paths = tuple(Path(p) for p in paths)
        self.path = self.paths[0]
        # Where the problems came from, as the run records it: the file, or the Hub's files.
        self.source = dict(source) if source is not None else {"file": str(self.path)}
        self.start, self.end = window(start, end)
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(f"timeout_s: must be a positive number, got {timeout_s!r}")
        if memory_mb < 64:
            raise ConfigError(f"memory_mb: must be >= 64, got {memory_mb}")
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self._items: list[Item] | None = None
        try:  # here rather than in the verifier workers, where a failure breaks the pool
            report = protections()
        except SandboxUnavailable as exc:
            raise ConfigError(
                f"livecodebench: judging runs programs in a sandbox, which does not work on this "
                f"machine: {exc}"
            ) from None
        self.judging = _judging(report, visible_tests)

    # Workers receive the suite pickled: judging needs only the settings (each Item carries its
    # tests), so the parsed file stays behind.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "paths": self.paths,
            "source": self.source,
            "start": self.start,
            "end": self.end,
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "judging": self.judging,
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
        return read_problems(self.paths, self._in_window)

    def starter_code(self, item: Item) -> str:
        """The problem's starter code (the prompts say N/A when it has none)."""
        return str(item.meta["starter_code"])

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
        """What the program must not see: the directories of the problems, with their answers,
        as named and as they really are (the sandbox resolves links in each)."""
        hidden: list[str] = []
        for path in self.paths:
            real = os.path.realpath(path)
            hidden += [os.path.dirname(os.path.abspath(path)), real, os.path.dirname(real)]
        return tuple(dict.fromkeys(hidden))

    def _run_test(self, code: str, test: TestCase, func_name: str | None) -> str | None:
        """None if the program passes `test`, else why not."""
        cap = max(1 << 20, 2 * len(test.output) + (64 << 10))
        if test.testtype == "stdin":
            options = RunOptions(
                timeout_s=self.timeout_s,
                memory_mb=self.memory_mb,
                max_output_bytes=cap,
                prelude=lcb_prelude(code),
                hide=self._private(),
            )
            result = run_python(code, test.input, options)
            failure = run_failure(result, self.timeout_s, self.memory_mb)
            if failure is not None:
                return failure
            mismatch = first_mismatch(result.stdout, test.output)
            return None if mismatch is None else f"wrong answer: {mismatch}"
        harness = (
            f"SOURCE = {code!r}\nFUNC = {func_name!r}\nIMPORTS = {lcb_prelude(code)!r}\n"
            f"MARKER = {RESULT_MARKER!r}\n{HARNESS}"
        )
        options = RunOptions(
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            max_output_bytes=cap,
            hide=self._private(),
        )
        result = run_python(harness, test.input, options)
        failure = run_failure(result, self.timeout_s, self.memory_mb)
        if failure is not None:
            return failure
        at = result.stdout.rfind(RESULT_MARKER)
        if at == -1:
            why = last_line(result.stderr) or f"exit status {result.returncode}, no result"
            return f"runtime error: {clip(why, 200)[1:-1]}"
        got_text = result.stdout[at + len(RESULT_MARKER) :].strip()
        got, unreadable = read_json(got_text)
        if unreadable is not None:
            return f"wrong answer: unreadable result ({unreadable}) {clip(got_text)}"
        want, bad = read_json(test.output)
        if bad is not None:
            return f"the test's expected output is not JSON ({bad}): {clip(test.output)}"
        if values_match(got, want):
            return None
        return f"wrong answer: expected {clip(test.output.strip())}, got {clip(got_text)}"
