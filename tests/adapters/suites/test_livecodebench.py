"""The LiveCodeBench suite: loading, the release window, decoding, judging, prompts, the sim."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import pickle
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.sandbox import _sandbox
from ttc.adapters.sim import answers_for
from ttc.adapters.suites import _templates
from ttc.adapters.suites._lcb_judge import (
    LCB_IMPORTS,
    extract_code,
    lcb_prelude,
    outputs_match,
    values_match,
)
from ttc.adapters.suites._lcb_records import TestCase, unpack
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Demo, Item, Suite, Verdict

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "lcb_fixture.jsonl"
RECORDS: list[dict[str, Any]] = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
REFERENCE = {record["question_id"]: record["reference_solution"] for record in RECORDS}
IN_WINDOW = ["lcb_sum_pairs", "lcb_mean", "lcb_max_subarray", "lcb_rotate", "lcb_palindromes"]


@pytest.fixture(scope="module")
def suite() -> LiveCodeBenchSuite:
    return LiveCodeBenchSuite(FIXTURE, start=None, end=None)


@pytest.fixture(scope="module")
def items(suite: LiveCodeBenchSuite) -> dict[str, Item]:
    return {item.id: item for item in suite.items()}


def compress(payload: object) -> str:
    """LiveCodeBench's private-test encoding: base64(zlib(pickle(...)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(payload))).decode()


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def record(question_id: str, **changes: Any) -> dict[str, Any]:
    base = next(r for r in RECORDS if r["question_id"] == question_id)
    return {**base, **changes}


# Loading and the release window


def test_default_window_is_the_papers_with_both_days_included() -> None:
    default = LiveCodeBenchSuite(FIXTURE)
    assert isinstance(default, Suite)
    assert (str(default.start), str(default.end)) == ("2024-10-05", "2025-01-04")
    # lcb_sum_pairs is on the first day, lcb_mean late on the last; the other two are a second
    # before and exactly at midnight after.
    assert [item.id for item in default.items()] == IN_WINDOW


def test_other_windows_and_bad_settings() -> None:
    assert len(LiveCodeBenchSuite(FIXTURE, None, None).items()) == 7
    assert [i.id for i in LiveCodeBenchSuite(FIXTURE, "2024-12-01", "2024-12-01").items()] == [
        "lcb_rotate"
    ]
    assert [i.id for i in LiveCodeBenchSuite(FIXTURE, "2025-01-05", None).items()] == [
        "lcb_count_vowels"
    ]
    assert [i.id for i in LiveCodeBenchSuite(FIXTURE, None, "2024-10-04").items()] == [
        "lcb_reverse_words"
    ]
    with pytest.raises(ConfigError, match="start"):
        LiveCodeBenchSuite(FIXTURE, "2025-01-05", "2025-01-04")
    with pytest.raises(ConfigError, match="end"):
        LiveCodeBenchSuite(FIXTURE, "2024-10-05", "next week")
    with pytest.raises(ConfigError, match="timeout_s"):
        LiveCodeBenchSuite(FIXTURE, timeout_s=0)


def test_items_carry_their_tests_and_metadata(items: dict[str, Item]) -> None:
    pairs = items["lcb_sum_pairs"]
    assert pairs.question == record("lcb_sum_pairs")["question_content"]
    assert pairs.reference == ""
    assert pairs.meta["testtype"] == "stdin"
    assert pairs.meta["func_name"] is None
    assert pairs.meta["starter_code"] == ""
    tests = pairs.meta["tests"]
    assert [t.public for t in tests] == [True, True, False, False, False]
    # The fixture is ours: a plain pickle.loads is safe here, and tells what the loader saw.
    private = json.loads(
        pickle.loads(
            zlib.decompress(base64.b64decode(record("lcb_sum_pairs")["private_test_cases"]))
        )
    )
    assert [(t.input, t.output) for t in tests[2:]] == [(p["input"], p["output"]) for p in private]
    subarray = items["lcb_max_subarray"]
    assert subarray.meta["testtype"] == "functional"
    assert subarray.meta["func_name"] == "maxSubArray"
    assert subarray.meta["starter_code"].startswith("class Solution:\n    def maxSubArray(")
    assert subarray.meta["tests"][0] == TestCase("[1, -2, 3, 4]", "7", "functional", True)
    assert len(items["lcb_rotate"].meta["tests"]) == 5  # private tests as plain JSON


def test_restricted_unpickler_refuses_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    blob = compress(Evil())
    with pytest.raises(pickle.UnpicklingError, match="system"):
        unpack(blob)
    path = write(
        tmp_path / "evil.jsonl", [json.dumps(record("lcb_sum_pairs", private_test_cases=blob))]
    )
    with pytest.raises(DataError) as caught:
        LiveCodeBenchSuite(path).items()
    message = str(caught.value)
    assert message.startswith(f"{path}:1: field 'private_test_cases': undecodable")
    assert "refusing to load the global" in message
    assert not marker.exists()


def test_pickles_of_anything_but_a_json_string_are_refused(tmp_path: Path) -> None:
    tests = [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]
    with pytest.raises(ValueError, match="not a JSON string"):
        unpack(compress(tests))  # the list itself rather than its JSON text
    assert json.loads(unpack(compress(json.dumps(tests)))) == tests


def without(field: str) -> Any:
    return lambda r: {k: v for k, v in r.items() if k != field}


def with_(**changes: Any) -> Any:
    return lambda r: {**r, **changes}


ONE_TEST = '[{"input": "1", "output": "1", "testtype": "%s"}]'
BAD_LINES = [
    ("malformed JSON", lambda r: "{not json", "malformed JSON"),
    ("missing field", without("question_content"), "field 'question_content': missing"),
    ("empty question", with_(question_content=" \n"), "field 'question_content': empty"),
    ("missing tests", without("private_test_cases"), "field 'private_test_cases': missing"),
    ("missing metadata", without("metadata"), "field 'metadata': missing"),
    ("bad date", with_(contest_date="yesterday"), "field 'contest_date': not an ISO date"),
    (
        "duplicate id",
        with_(question_id="lcb_sum_pairs"),
        "field 'question_id': duplicate id 'lcb_sum_pairs' (first on line 1)",
    ),
    (
        "undecodable tests",
        with_(private_test_cases="!!not-base64!!"),
        "field 'private_test_cases': undecodable",
    ),
    (
        "truncated compression",
        lambda r: {**r, "private_test_cases": r["private_test_cases"][:40]},
        "field 'private_test_cases': undecodable",
    ),
    (
        "malformed JSON tests",
        with_(public_test_cases='[{"input": "1", "output": "1", "testtype": "stdin"'),
        "field 'public_test_cases': malformed JSON (Expecting ',' delimiter, column 51)",
    ),
    (
        "tests not a list",
        with_(public_test_cases='{"input": "1"}'),
        "field 'public_test_cases': expected a list",
    ),
    (
        "bad testtype",
        with_(public_test_cases=ONE_TEST % "interactive"),
        "field 'public_test_cases': test 0 has testtype 'interactive'",
    ),
    (
        "test without output",
        with_(public_test_cases='[{"input": "1", "testtype": "stdin"}]'),
        "field 'public_test_cases': test 0 has no string 'output'",
    ),
    ("bad metadata", with_(metadata="{oops"), "field 'metadata': malformed JSON"),
    ("id not a string", with_(question_id=17), "field 'question_id': expected a string"),
    (
        "no test at all",
        with_(public_test_cases="[]", private_test_cases="[]"),
        "field 'public_test_cases': the problem has no test cases",
    ),
    (
        "mixed test types",
        with_(public_test_cases=ONE_TEST % "functional"),
        "field 'private_test_cases': mixes stdin and functional",
    ),
    ("not an object", lambda r: [1, 2], "expected a JSON object"),
]


@pytest.mark.parametrize(
    ("change", "fragment"), [b[1:] for b in BAD_LINES], ids=[b[0] for b in BAD_LINES]
)
def test_bad_input_names_file_line_and_field(tmp_path: Path, change: Any, fragment: str) -> None:
    changed = change(record("lcb_mean"))
    second = changed if isinstance(changed, str) else json.dumps(changed)
    path = write(tmp_path / "broken.jsonl", [json.dumps(record("lcb_sum_pairs")), second])
    with pytest.raises(DataError) as caught:
        LiveCodeBenchSuite(path).items()
    assert str(caught.value).startswith(f"{path}:2: ")
    assert fragment in str(caught.value)


def test_functional_tests_need_a_func_name(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", [json.dumps(record("lcb_max_subarray", metadata="{}"))])
    with pytest.raises(DataError, match=r"f\.jsonl:1: field 'metadata': functional"):
        LiveCodeBenchSuite(path).items()


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nowhere\.jsonl"):
        LiveCodeBenchSuite(tmp_path / "nowhere.jsonl").items()


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(record("lcb_sum_pairs")).encode()
    bad = json.dumps(record("lcb_mean", question_title="caf\u00e9"), ensure_ascii=False)
    path.write_bytes(good + b"\n" + bad.encode("latin-1") + b"\n")
    with pytest.raises(DataError) as caught:
        LiveCodeBenchSuite(path).items()
    assert str(caught.value).startswith(f"{path}:2: not UTF-8 text")


def test_a_sandbox_that_does_not_work_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Found when the suite is made, not as a verdict of 0 for every response.
    def broken() -> Any:
        raise _sandbox.SandboxUnavailable("sandbox: no Python interpreter runs under the sandbox")

    monkeypatch.setattr(_sandbox, "_setup", broken)
    with pytest.raises(ConfigError, match=r"livecodebench: .*sandbox.*no Python interpreter"):
        LiveCodeBenchSuite(FIXTURE)


def test_records_outside_the_window_are_checked_but_not_decoded(tmp_path: Path) -> None:
    early = record("lcb_reverse_words", private_test_cases="!!not-base64!!")
    path = write(tmp_path / "w.jsonl", [json.dumps(early), json.dumps(record("lcb_mean"))])
    assert [item.id for item in LiveCodeBenchSuite(path).items()] == ["lcb_mean"]
    late = {k: v for k, v in record("lcb_count_vowels").items() if k != "question_content"}
    path = write(tmp_path / "x.jsonl", [json.dumps(late)])
    with pytest.raises(DataError, match="question_content"):
        LiveCodeBenchSuite(path).items()


# Judging


def test_every_reference_solution_passes(suite: LiveCodeBenchSuite, items: dict[str, Item]) -> None:
    assert set(items) == set(REFERENCE)
    for item_id, item in items.items():
        verdict = suite.judge(item, REFERENCE[item_id])
        total = len(item.meta["tests"])
        assert verdict == Verdict(1.0, f"{total}/{total} tests passed", f"all {total} tests passed")


def method(name: str, body: str, args: str = "nums") -> str:
    return f"class Solution:\n    def {name}(self, {args}):\n        {body}\n"


WRONG = [
    ("lcb_sum_pairs", "print(0)", "test 1/5 (public): wrong answer: expected 2 line(s), got 1"),
    (
        "lcb_sum_pairs",
        "import sys\nsys.stdin.read()\nprint(1 // 0)",
        "test 1/5 (public): runtime error: ZeroDivisionError: integer division or modulo by zero",
    ),
    ("lcb_sum_pairs", "def broken(:\n    pass", "runtime error: SyntaxError"),
    ("lcb_sum_pairs", "x = bytearray(64 * 1024**3)", "memory limit exceeded (1024 MB)"),
    (
        "lcb_palindromes",
        "t = int(input())\nfor _ in range(t):\n    print('Yes')",
        "test 1/4 (public): wrong answer: line 2: expected 'No', got 'Yes'",
    ),
    ("lcb_mean", "print(int(input()))", "wrong answer: line 1: expected '2.3333333333', got '3'"),
    (
        "lcb_max_subarray",
        method("maxSubArray", "return max(nums)"),
        "test 1/6 (public): wrong answer: expected '7', got '4'",
    ),
    (
        "lcb_max_subarray",
        method("other", "return 0"),
        "runtime error: missing entry point maxSubArray",
    ),
    (
        "lcb_max_subarray",
        method("maxSubArray", "return set(nums)"),
        "runtime error: the result is not JSON: set",
    ),
    (
        "lcb_max_subarray",
        method("maxSubArray", "return nums[10]"),
        "runtime error: IndexError: list index out of range",
    ),
    (
        "lcb_rotate",
        method("rotateList", "return nums", "nums, k"),
        "test 1/5 (public): wrong answer: expected '[4, 5, 1, 2, 3]', got '[1, 2, 3, 4, 5]'",
    ),
    ("lcb_rotate", "", "no code in the response"),
]


@pytest.mark.parametrize(("item_id", "program", "reason"), WRONG)
def test_wrong_programs_fail_with_the_reason(
    suite: LiveCodeBenchSuite, items: dict[str, Item], item_id: str, program: str, reason: str
) -> None:
    verdict = suite.judge(items[item_id], program)
    assert verdict.score == 0.0
    assert reason in verdict.detail, verdict.detail


def test_timeouts_fail_within_the_limit(items: dict[str, Item]) -> None:
    quick = LiveCodeBenchSuite(FIXTURE, None, None, timeout_s=1.0)
    for item_id, program in [
        ("lcb_sum_pairs", "while True:\n    pass"),
        ("lcb_rotate", method("rotateList", "while True: pass", "nums, k")),
    ]:
        started = time.monotonic()
        verdict = quick.judge(items[item_id], program)
        assert time.monotonic() - started < 1.0 + 2.0
        assert verdict.score == 0.0
        assert verdict.detail.endswith("(public): time limit exceeded (1 s)"), verdict.detail


def test_huge_outputs_are_not_dumped_into_the_detail(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    verdict = suite.judge(items["lcb_sum_pairs"], "print('9' * 100000)\nprint(2)")
    assert verdict.score == 0.0
    assert len(verdict.detail) < 300, verdict.detail
    flood = suite.judge(items["lcb_sum_pairs"], "while True:\n    print('x' * 10000)")
    assert flood.detail.endswith("output limit exceeded")


def test_programs_that_exit_are_graded_on_their_output(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    # As LiveCodeBench's `except SystemExit`: the output counts, not the exit status.
    program = REFERENCE["lcb_sum_pairs"] + "import sys\nsys.exit(1)\n"
    assert suite.judge(items["lcb_sum_pairs"], program).score == 1.0
    # LiveCodeBench's import prelude is there: no `import sys` needed, `exit` exists.
    bare = (
        "data = stdin.read().split()\n"
        "print('\\n'.join(str(int(a) + int(b)) for a, b in zip(data[1::2], data[2::2])))\n"
        "exit()\n"
    )
    assert suite.judge(items["lcb_sum_pairs"], bare).score == 1.0


def test_functional_programs_may_print_and_use_the_prelude(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    program = (
        "class Solution:\n"
        "    def rotateList(self, nums: List[int], k: int) -> List[int]:\n"
        "        print('debugging output is ignored')\n"
        "        d = deque(nums)\n"
        "        d.rotate(k)\n"
        "        return tuple(d)\n"
    )
    assert suite.judge(items["lcb_rotate"], program).score == 1.0


def test_prelude_keeps_exactly_the_lines_that_bind_names_the_program_mentions() -> None:
    plain = lcb_prelude("n = int(input())\nprint(n * 2)")
    assert plain == "from builtins import *\nimport sys\nsys.setrecursionlimit(50000)\n"
    mixed = lcb_prelude("print(pow(2, 10, 7), gcd(4, 6), Counter('aab'), mean([1, 2]))")
    # pow comes from math and operator too, and builtins, later, binds it back; typing exports
    # a Counter that shadows collections.Counter: as in the full prelude.
    modules = ("collections", "math", "statistics", "operator", "builtins", "typing")
    assert mixed.splitlines() == [
        line
        for line in LCB_IMPORTS.splitlines()
        if line.startswith(("import sys", "sys."))
        or (line.startswith("from ") and line.split()[1] in modules)
    ]


def test_prelude_names_behave_as_in_livecodebench(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    program = (
        "t = int(input())\n"
        "for _ in range(t):\n"
        "    s = input().strip()\n"
        "    ok = pow(3, len(s), 1000) == pow(3, len(s[::-1]), 1000) and s == s[::-1]\n"
        "    print('Yes' if ok and gcd(len(s), 1) == 1 else 'No')\n"
    )
    assert suite.judge(items["lcb_palindromes"], program).score == 1.0


def test_fences_are_stripped(suite: LiveCodeBenchSuite, items: dict[str, Item]) -> None:
    item = items["lcb_max_subarray"]
    code = REFERENCE["lcb_max_subarray"]
    for response in (
        f"```python\n{code}```",
        f"Here is my solution:\n\n```python\n{code}```\n\nIt runs in O(n).",
        f"```\n{code}```",
        f"<think>try ```python\nprint(1)\n``` first</think>\n```py\n{code}\n```",
        f"```python\n{code}",  # truncated before the closing fence
    ):
        assert suite.judge(item, response).score == 1.0, response


def test_extract_code_picks_the_last_python_block() -> None:
    assert extract_code("print(1)\n") == "print(1)"
    assert extract_code("```python\na = 1\n```\ntext\n```python\nb = 2\n```") == "b = 2"
    assert extract_code("```python\na = 1\n```\n```text\nsample output\n```") == "a = 1"
    assert extract_code("```python\nprint(3)```") == "print(3)"


@pytest.mark.parametrize(
    ("got", "want", "accepted"),
    [
        ("3\n7\n", "3\n7", True),
        ("  3 \r\n7\n\n", "3\n7\n", True),
        ("1  2   3", "1 2 3", True),
        ("1.0", "1", True),
        ("1e3", "1000", True),
        ("2.3333333333333335", "2.3333333333", True),
        ("0.0000001", "0", False),
        ("1e-7", "0", False),
        ("1000001.0", "1000000", False),
        ("1000000.5", "1000000", False),
        ("7.0", "7", True),
        ("-0", "0", True),
        ("1000000.5", "1000000.0", True),
        ("0.0000001", "0.0", True),
        ("1e-7", "0e0", True),
        ("2.334", "2.3333333333", False),
        ("1000000000000000001", "1000000000000000000", False),
        ("yes", "Yes", False),
        ("3", "3\n7", False),
        ("3 7", "3\n7", False),
        ("1 2", "1 2 3", False),
        ("nan", "0", False),
    ],
)
def test_stdout_comparison(got: str, want: str, accepted: bool) -> None:
    assert outputs_match(got, want) is accepted


@pytest.mark.parametrize(
    ("got", "want", "accepted"),
    [
        (7.0, 7, True),
        (1000001.0, 1000000, False),
        (1e-7, 0, False),
        ([1, 2.0000001], [1, 2], False),
        ({"a": 3.0}, {"a": 3}, True),
        (0.1 + 0.2, 0.3, True),
        (1000000, 1000000.5, True),
        ("1", 1, False),
    ],
)
def test_functional_result_comparison(got: Any, want: Any, accepted: bool) -> None:
    assert values_match(got, want) is accepted


@pytest.fixture
def public_copy() -> Iterator[Path]:
    """The fixture in a world-readable directory outside those the sandbox always hides."""
    folder = Path(tempfile.mkdtemp(prefix="ttc-lcb-"))
    folder.chmod(0o755)
    shutil.copy(FIXTURE, folder / "problems.jsonl")
    (folder / "problems.jsonl").chmod(0o644)
    yield folder / "problems.jsonl"
    shutil.rmtree(folder)


def test_programs_cannot_read_the_expected_outputs(
    monkeypatch: pytest.MonkeyPatch, public_copy: Path
) -> None:
    if not _sandbox.protections()["private_root"]:
        pytest.skip("no private root here: the problems file is as readable as its mode says")
    suite = LiveCodeBenchSuite(public_copy, None, None)
    item = next(i for i in suite.items() if i.id == "lcb_sum_pairs")
    cheat = (
        "import base64, json, pickle, sys, zlib\n"
        "data = sys.stdin.read()\n"
        f"for line in open({str(public_copy)!r}):\n"
        "    r = json.loads(line)\n"
        "    if r['question_id'] == 'lcb_sum_pairs':\n"
        "        blob = zlib.decompress(base64.b64decode(r['private_test_cases']))\n"
        "        tests = json.loads(r['public_test_cases']) + json.loads(pickle.loads(blob))\n"
        "        print(next(t['output'] for t in tests if t['input'] == data), end='')\n"
    )
    verdict = suite.judge(item, cheat)
    assert verdict.score == 0.0
    assert "FileNotFoundError" in verdict.detail, verdict.detail


# Prompts, pickling, the simulator


def test_prompts_equal_the_papers_templates(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    stdin_item, functional = items["lcb_sum_pairs"], items["lcb_max_subarray"]
    warm = suite.warmup_prompt(stdin_item)
    assert warm == _templates.warmup_prompt("livecodebench", stdin_item.question, starter_code="")
    assert "\nStarter (optional):\nN/A\n" in warm
    assert warm.startswith("You are a competitive programming assistant.\n")
    warm_f = suite.warmup_prompt(functional)
    assert warm_f == _templates.warmup_prompt(
        "livecodebench", functional.question, starter_code=functional.meta["starter_code"]
    )
    assert functional.meta["starter_code"] in warm_f
    demos = [Demo("lcb_sum_pairs", stdin_item.question, REFERENCE["lcb_sum_pairs"], 0.5)]
    adaptive = suite.adaptive_prompt(functional, demos)
    assert adaptive == _templates.adaptive_prompt(
        "livecodebench",
        functional.question,
        [(stdin_item.question, REFERENCE["lcb_sum_pairs"])],
        starter_code=functional.meta["starter_code"],
    )
    assert adaptive.endswith("Base prompt (appended verbatim):\n" + warm_f)


def _judge_pairs(suite: LiveCodeBenchSuite, pairs: list[tuple[Item, str]]) -> list[Verdict]:
    return [suite.judge(item, text) for item, text in pairs]


def test_pickle_round_trip_then_judge_in_a_spawned_process(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    state = suite.__getstate__()
    assert "_items" not in state
    clone = pickle.loads(pickle.dumps(suite))
    assert (clone.path, clone.start, clone.end, clone.timeout_s) == (
        suite.path,
        suite.start,
        suite.end,
        suite.timeout_s,
    )
    item = items["lcb_rotate"]
    pairs = [
        (item, REFERENCE["lcb_rotate"]),
        (item, answers_for(suite).sim_response(item, False, 1)),
    ]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        verdicts = pool.submit(_judge_pairs, clone, pairs).result(timeout=120)
    assert [v.score for v in verdicts] == [1.0, 0.0]


@pytest.mark.slow  # every problem's programs under the sandbox
def test_sim_programs_pass_and_fail_under_the_real_judge(
    suite: LiveCodeBenchSuite, items: dict[str, Item]
) -> None:
    assert answers_for(suite).sim_prose is False
    for item in items.values():
        for seed in (0, 1):
            right = answers_for(suite).sim_response(item, True, seed)
            wrong = answers_for(suite).sim_response(item, False, seed)
            assert answers_for(suite).sim_is_correct(item, right)
            assert not answers_for(suite).sim_is_correct(item, wrong)
            assert suite.judge(item, right).score == 1.0, item.id
            verdict = suite.judge(item, wrong)
            assert verdict.score == 0.0, item.id
            assert "wrong answer" in verdict.detail, verdict
        assert answers_for(suite).sim_response(item, False, 5) == answers_for(suite).sim_response(
            item, False, 5
        )


def test_sim_handles_large_tables(suite: LiveCodeBenchSuite) -> None:
    def case(n: int) -> TestCase:
        values = list(range(n, n + 400))
        text = f"{len(values)}\n" + " ".join(map(str, values)) + "\n"
        return TestCase(text, f"{sum(values)}\n", "stdin", public=n == 0)

    tests = tuple(case(n) for n in range(6))
    item = Item(
        "big",
        "Sum of pairs",
        "",
        {"testtype": "stdin", "func_name": None, "tests": tests, "starter_code": ""},
    )
    right = answers_for(suite).sim_response(item, True, 0)
    assert "b85decode" in right  # compressed to stay short
    assert len(right) < sum(len(t.input) for t in tests)
    assert suite.judge(item, right).score == 1.0
    assert suite.judge(item, answers_for(suite).sim_response(item, False, 0)).score == 0.0
