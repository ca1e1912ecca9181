"""Every suite's judge against hostile outputs: a bad output is a wrong answer with a reason,
never an exception (issue 31, item 4: one sNaN, a 200,000-deep result or a 5,000-digit integer
made the LiveCodeBench judge raise, which stopped `ttc run` on every resume and left `ttc verify`
without verdicts).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ttc.adapters.suites import make_suite
from ttc.adapters.suites._generic import GenericConfig, GenericSuite
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._lcb_judge import RESULT_MARKER
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._mixed import MixedSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine import Item, Suite, Verdict

DEEP = 200_000
# name -> the text a model (or the program it wrote) puts out
HOSTILE: dict[str, str] = {
    "snan": "sNaN",
    "signed-snan": "-sNaN123",
    "nan": "NaN",
    "negative-nan": "-nan",
    "inf": "inf",
    "negative-infinity": "-Infinity",
    "huge-exponent": "1e999999999",
    "beyond-any-exponent": "1e99999999999999999999999",
    "tiny-exponent": "1e-999999999",
    "deep-list": "[" * DEEP + "]" * DEEP,
    "deep-object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "deep-unclosed": "[" * DEEP,
    "deep-braces": "{" * DEEP + "}" * DEEP,
    "digits": "9" * 5000,
    "negative-digits": "-" + "7" * 5000,
    "digits-point": "3" * 5000 + ".5",
    "invalid-utf8": "\udcff\udcfe\ud800 3",
    "megabytes": "7 " * (2 << 20),
    "megabyte-line": "x" * (3 << 20),
    "nul-bytes": "\x00" * 1000 + "3",
}


def _check(suite: Suite, item: Item, response: str) -> Verdict:
    verdict = suite.judge(item, response)
    assert isinstance(verdict, Verdict)
    assert 0.0 <= verdict.score <= 1.0
    return verdict


def _jsonl(path: Path, records: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def text_suites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Suite]:
    """A suite of each kind that judges a response's text, over a few questions each."""
    folder = tmp_path_factory.mktemp("suites")
    answers = ["3", "0.5", "\\frac{1}{2}", "-7", "10^{5}"]
    math500 = _jsonl(
        folder / "math500.jsonl",
        [
            {"problem": f"q{i}", "answer": a, "subject": "s", "level": 1, "unique_id": f"m{i}"}
            for i, a in enumerate(answers)
        ],
    )
    minerva = _jsonl(
        folder / "minerva.jsonl",
        [
            {"problem": f"q{i}", "solution": f"so \\boxed{{{a}}}", "type": "t", "idx": i}
            for i, a in enumerate(answers)
        ],
    )
    gpqa = _jsonl(
        folder / "gpqa.jsonl",
        [
            {
                "Question": "Which?",
                "Correct Answer": "3",
                "Incorrect Answer 1": "4",
                "Incorrect Answer 2": "5",
                "Incorrect Answer 3": "6",
            }
        ],
    )
    generic_data = _jsonl(
        folder / "custom.jsonl",
        [{"q": "q", "a": "3"}, {"q": "q", "a": "0.5"}, {"q": "q", "a": "B"}],
    )
    suites: dict[str, Suite] = {
        "math500": MathSuite("math500", math500),
        "minerva": MathSuite("minerva", minerva),
        "gpqa": GPQASuite(gpqa),
        "reasoning_gym": ReasoningGymSuite(per_task=1, seed=3),
    }
    # each verifier of the custom suite once, and each way of extracting its answer once
    for verifier, extract in (
        ("exact", "full"),
        ("numeric", "last_line"),
        ("math", "boxed"),
        ("choice", "full"),
    ):
        config = GenericConfig(
            question_field="q", answer_field="a", verifier=verifier, extract=extract
        )
        data = generic_data
        if verifier in ("numeric", "math"):
            data = _jsonl(folder / f"n-{verifier}.jsonl", [{"q": "q", "a": "0.5"}])
        if verifier == "choice":
            data = _jsonl(folder / "c.jsonl", [{"q": "q", "a": "B"}])
        suites[f"custom-{verifier}-{extract}"] = GenericSuite(data, config)
    return suites


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_text_judges_never_raise(text_suites: dict[str, Suite], name: str) -> None:
    # One question of each (a judge's handling of a response does not depend on which); bare
    # and boxed, as the suites extract answers from either.
    for response in (HOSTILE[name], "The answer is \\boxed{" + HOSTILE[name] + "}."):
        for suite in text_suites.values():
            item = suite.items()[0]
            verdict = _check(suite, item, response)
            # a wrong answer says why: in its detail, or by the answer it read
            assert verdict.score > 0 or verdict.detail or verdict.answer, (suite.name, verdict)


# LiveCodeBench: the program prints the hostile text; expected outputs of every kind.
STDIN_EXPECTED = ["3\n7\n", "3\n", "0.5\n", "1e5\n", "NaN\n", "sNaN\n"]
FUNCTIONAL_EXPECTED = ["3", "0.5", "[1, 2]", '{"a": 1.5}', "[[1.5], [2]]"]


def _lcb_records() -> list[dict[str, object]]:
    records: list[dict[str, object]] = []

    def record(number: int, tests: list[dict[str, str]], func: str | None) -> None:
        records.append(
            {
                "question_id": f"hostile{number}",
                "question_content": "Print the answer.",
                "contest_date": "2024-11-01T00:00:00",
                "starter_code": "",
                "public_test_cases": json.dumps(tests),
                "private_test_cases": "[]",
                "metadata": json.dumps({"func_name": func} if func else {}),
            }
        )

    for number, want in enumerate(STDIN_EXPECTED):
        record(number, [{"input": "", "output": want, "testtype": "stdin"}], None)
    for number, want in enumerate(FUNCTIONAL_EXPECTED, start=len(STDIN_EXPECTED)):
        record(number, [{"input": "1", "output": want, "testtype": "functional"}], "answer")
    return records


def _program(text: str, functional: bool) -> str:
    """A response whose program writes `text` (lone surrogates as invalid UTF-8 bytes) to
    the real stdout, after the result marker for a functional test, and exits at once."""
    data = (RESULT_MARKER if functional else "") + text
    payload = data.encode("utf-8", "surrogatepass")
    return (
        "import os\n"
        f"data = {payload!r}\n"
        "view = memoryview(data)\n"
        "while view:\n"
        "    view = view[os.write(1, view):]\n"
        "os._exit(0)\n"
    )


@pytest.mark.slow
def test_livecodebench_judge_never_raises(tmp_path: Path) -> None:
    suite = LiveCodeBenchSuite(_jsonl(tmp_path / "lcb.jsonl", _lcb_records()), start=None, end=None)
    items = suite.items()
    assert len(items) == len(STDIN_EXPECTED) + len(FUNCTIONAL_EXPECTED)
    failures = []
    for name, text in HOSTILE.items():
        for item in items:
            functional = item.meta.get("func_name") is not None
            try:
                verdict = _check(suite, item, _program(text, functional))
            except Exception as exc:  # collected: one line per case that raised
                failures.append(f"{name} on {item.id}: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            if verdict.score == 0.0:
                assert verdict.detail, (name, item.id, verdict)
    assert failures == []
    # a response that is not even valid Unicode (lone surrogates) is judged like any other: in
    # a comment it is harmless, in the code a syntax error
    assert _check(suite, items[0], "print(3)\nprint(7)  # \udcff\ud800").score == 1.0
    broken = _check(suite, items[0], "print(3)\nprint(7) \udcff\ud800")
    assert broken.score == 0.0
    assert "SyntaxError" in (broken.detail or ""), broken


@pytest.mark.slow
def test_mixed_judges_by_source_without_raising(text_suites: dict[str, Suite]) -> None:
    mixed = MixedSuite(
        {"math500": text_suites["math500"], "gpqa": text_suites["gpqa"]}, per_source=2
    )
    for item in mixed.items():
        for response in ("\\boxed{sNaN}", "\\boxed{" + "9" * 5000 + "}", "[" * DEEP):
            _check(mixed, item, response)


@pytest.mark.slow
def test_verify_writes_a_verdict_for_every_hostile_program(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "lcb.jsonl", _lcb_records())
    chosen = ["snan", "deep-list", "digits", "huge-exponent", "invalid-utf8"]
    items = make_suite("livecodebench", data).items()
    lines = [
        {"id": item.id, "response": _program(HOSTILE[name], "func_name" in item.meta)}
        for name in chosen
        for item in items
    ]
    responses = _jsonl(tmp_path / "responses.jsonl", lines)
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ttc")),
            "verify",
            "--suite",
            "livecodebench",
            "--data",
            str(data),
            "--lcb-start",
            "2024-01-01",
            "--responses",
            str(responses),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = tmp_path / "responses.verdicts.jsonl"
    written = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert len(written) == len(lines)
    assert all(v["score"] == 0.0 and v["detail"] for v in written), written
