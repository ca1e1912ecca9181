"""The custom suite: config files, loaders, each verifier, templates, the simulator's answers."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import multiprocessing
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import math_verify
import numpy as np
import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.suites import _templates
from ttc.adapters.suites._answers import choice_letter, parse_number
from ttc.adapters.suites._generic import GenericConfig, GenericSuite, _as_score
from ttc.engine.cli._rescore import rescore
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Demo, Item, Suite

CHECKS = """
def contains(response, reference):
    return reference in response

def half(response, reference):
    return 0.5

def broken(response, reference):
    raise RuntimeError("boom")

def chatty(response, reference):
    return "yes"

def close(response, reference):
    import numpy
    return numpy.isclose(float(response.split("{")[-1].rstrip("}")), float(reference))

class Checks:
    @staticmethod
    def last_word(response, reference):
        return response.split()[-1].strip("}{.\\\\boxed") == reference

NOT_CALLABLE = 3
"""


@pytest.fixture
def checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A verifier module, `my_checks`, importable from a folder on sys.path."""
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "my_checks.py").write_text(CHECKS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return "my_checks"


def write_jsonl(path: Path, records: Sequence[dict[str, Any]], raw: Sequence[str] = ()) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records) + "".join(x + "\n" for x in raw)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_csv(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    columns = list(records[0])
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows([r[c] for c in columns] for r in records)
    return path


def config(verifier: str = "exact", **changes: Any) -> GenericConfig:
    return GenericConfig(question_field="q", answer_field="a", verifier=verifier, **changes)


def suite_of(
    tmp_path: Path, answers: Sequence[Any], verifier: str = "exact", **changes: Any
) -> GenericSuite:
    records = [{"q": f"question {i}?", "a": a} for i, a in enumerate(answers)]
    return GenericSuite(write_jsonl(tmp_path / "data.jsonl", records), config(verifier, **changes))


def scores(suite: GenericSuite, item: Item, responses: Sequence[str]) -> list[float]:
    return [suite.judge(item, r).score for r in responses]


# --- verifiers ---------------------------------------------------------------------------------


def test_exact_verifier_strips_and_optionally_casefolds(tmp_path: Path) -> None:
    strict = suite_of(tmp_path, ["Paris"])
    item = strict.items()[0]
    assert isinstance(strict, Suite)
    assert strict.name == "custom"
    assert scores(strict, item, ["\\boxed{Paris}", "\\boxed{ Paris }", "\\boxed{paris}"]) == [
        1.0,
        1.0,
        0.0,
    ]
    assert strict.judge(item, "Paris").detail == "no answer (boxed extraction)"
    folded = suite_of(tmp_path, ["Paris"], casefold=True)
    assert scores(folded, item, ["\\boxed{PARIS}", "\\boxed{Lyon}"]) == [1.0, 0.0]


def test_exact_verifier_unwraps_text_wrappers(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["Paris", "\\text{Rome}"])
    paris, rome = suite.items()
    good = [
        "\\boxed{\\text{Paris}}",
        "\\boxed{\\textbf{Paris}}",
        "\\boxed{\\mathrm{ Paris }}",
        "\\boxed{\\mathbf{\\text{Paris}}}",
    ]
    assert scores(suite, paris, good) == [1.0] * 4
    bad = ["\\boxed{\\text{Paris} \\text{x}}", "\\boxed{\\text{Pa}ris}", "\\boxed{\\text{Lyon}}"]
    assert scores(suite, paris, bad) == [0.0] * 3
    assert scores(suite, rome, ["\\boxed{Rome}", "\\boxed{\\text{Rome}}"]) == [1.0, 1.0]
    last_line = suite_of(tmp_path, ["Paris"], extract="last_line")
    assert last_line.judge(paris, "So:\n\\text{Paris}").score == 1.0


def test_rejections_say_why_briefly(tmp_path: Path) -> None:
    exact = suite_of(tmp_path, ["12"])
    item = exact.items()[0]
    assert exact.judge(item, "\\boxed{12}").detail == ""
    assert exact.judge(item, "\\boxed{13}").detail == "expected 12, got 13"
    huge = exact.judge(item, "\\boxed{" + "x" * 100_000 + "}").detail
    assert huge.startswith("expected 12, got xxx")
    assert len(huge) < 80
    numeric = suite_of(tmp_path, ["12"], "numeric")
    assert numeric.judge(item, "\\boxed{13}").detail == "expected 12, got 13"
    assert numeric.judge(item, "\\boxed{12.0}").detail == ""
    math = suite_of(tmp_path, ["12"], "math")
    assert math.judge(item, "\\boxed{13}").detail == "not equivalent to the reference"


@pytest.mark.parametrize(
    ("extract", "right", "wrong"),
    [
        ("boxed", "so \\boxed{7}", "\\boxed{7} no, \\boxed{8}"),
        ("last_line", "Working.\nThe answer:\n  7  \n\n", "7\n8"),
        ("full", "  7\n", "The answer is 7"),
    ],
)
def test_extraction_modes(tmp_path: Path, extract: str, right: str, wrong: str) -> None:
    suite = suite_of(tmp_path, ["7"], extract=extract)
    item = suite.items()[0]
    assert scores(suite, item, [right, wrong]) == [1.0, 0.0]
    assert answers_for(suite).sim_prose is (extract != "full")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", Fraction(42)),
        (" -7 ", Fraction(-7)),
        ("1,234.5", Fraction(2469, 2)),
        ("1,234,567", Fraction(1234567)),
        ("3/4", Fraction(3, 4)),
        ("-3/4", Fraction(-3, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("-\\dfrac{1}{2}", Fraction(-1, 2)),
        ("1e-3", Fraction(1, 1000)),
        ("2.5E2", Fraction(250)),
        (".5", Fraction(1, 2)),
        ("$2.50", Fraction(5, 2)),
        ("\\$2.50", Fraction(5, 2)),
        ("−3", Fraction(-3)),
        ("1{,}000", Fraction(1000)),
        ("12,34", None),
        ("1/0", None),
        ("inf", None),
        ("nan", None),
        ("seven", None),
        ("", None),
        ("1 2", None),
        ("1e1000", Fraction(10**1000)),
        ("-2.5E-1000", Fraction(-25, 10**1001)),
        ("1e1001", None),
        ("1e-10000000", None),
        ("1" * 5000, None),  # more digits than int() converts
    ],
)
def test_parse_number(text: str, value: Fraction | None) -> None:
    assert parse_number(text) == value


def test_huge_exponents_are_refused_quickly(tmp_path: Path) -> None:
    start = time.perf_counter()
    for text in ("1e-10000000", "-3e+99999999999", "5/1e-10000000", "\\frac{1}{1e9999999}"):
        assert parse_number(text) is None, text
    suite = suite_of(tmp_path, ["1e-3"], "numeric")
    verdict = suite.judge(suite.items()[0], "\\boxed{1e-10000000}")
    assert (verdict.score, verdict.detail) == (0.0, "not a number")
    assert time.perf_counter() - start < 1.0


def test_numeric_verifier_relative_and_absolute_tolerance(tmp_path: Path) -> None:
    relative = suite_of(tmp_path, ["100"], "numeric", tolerance=0.01)
    item = relative.items()[0]
    responses = ["\\boxed{100.9}", "\\boxed{99.1}", "\\boxed{101.1}", "\\boxed{1e2}"]
    assert scores(relative, item, responses) == [1.0, 1.0, 0.0, 1.0]
    absolute = suite_of(tmp_path, ["100"], "numeric", tolerance=0.5, tolerance_mode="absolute")
    assert scores(absolute, item, ["\\boxed{100.4}", "\\boxed{100.6}"]) == [1.0, 0.0]
    assert absolute.judge(item, "\\boxed{a hundred}").detail == "not a number"
    exact = suite_of(tmp_path, ["0.3"], "numeric", tolerance=0)
    assert scores(exact, exact.items()[0], ["\\boxed{3/10}", "\\boxed{0.30000001}"]) == [1.0, 0.0]


def test_numeric_tolerance_is_decimal_and_inclusive(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["1"], "numeric", tolerance=0.3, tolerance_mode="absolute")
    item = suite.items()[0]
    assert scores(suite, item, ["\\boxed{1.3}", "\\boxed{0.7}", "\\boxed{1.3000001}"]) == [
        1.0,
        1.0,
        0.0,
    ]


def test_numeric_default_tolerance_is_one_in_a_million(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, [1234.5, "1,000,000"], "numeric")
    first, second = suite.items()
    assert first.reference == "1234.5"  # JSON numbers become text
    assert scores(
        suite, first, ["\\boxed{1,234.5}", "\\boxed{1234.5012}", "\\boxed{1234.502}"]
    ) == [
        1.0,
        1.0,
        0.0,
    ]
    assert scores(suite, second, ["\\boxed{1000000.9}", "\\boxed{1000001.1}"]) == [1.0, 0.0]


def test_math_verifier_compares_mathematically(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["\\frac{1}{2}", "x^2+1", "\\text{Monday}"], "math")
    half, poly, day = suite.items()
    assert scores(suite, half, ["\\boxed{0.5}", "\\boxed{1/2}", "\\boxed{1/3}", "1/2"]) == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]
    assert scores(suite, poly, ["\\boxed{1 + x^{2}}", "\\boxed{x^2}"]) == [1.0, 0.0]
    assert scores(suite, day, ["\\boxed{\\text{Monday}}", "\\boxed{\\text{Tuesday}}"]) == [
        1.0,
        0.0,
    ]
    whole = suite_of(tmp_path, ["\\frac{1}{2}"], "math", extract="full")
    assert scores(whole, half, ["So it is $\\frac{2}{4}$.", "0.5", "It is $3$."]) == [
        1.0,
        1.0,
        0.0,
    ]


def test_math_verifier_reads_e_notation_and_small_numbers(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["1.5e-3", "3.89e-10", "4.5e33"], "math")
    milli, tiny, big = suite.items()
    milli_answers = ["0.0015", "1.5 \\times 10^{-3}", "1.5e-3", "1.077", "0.0016"]
    assert scores(suite, milli, [f"\\boxed{{{a}}}" for a in milli_answers]) == [
        1.0,
        1.0,
        1.0,
        0.0,  # 1.5·e−3, as the reference would read without the rewrite
        0.0,
    ]
    tiny_answers = ["0.000000000389", "0.0000004", "0.000000000001", "3.89 \\cdot 10^{-10}"]
    assert scores(suite, tiny, [f"\\boxed{{{a}}}" for a in tiny_answers]) == [1.0, 0.0, 0.0, 1.0]
    verdict = suite.judge(tiny, "\\boxed{0.0000004}")
    assert verdict.detail == "not the reference to six significant digits"
    assert scores(suite, big, ["\\boxed{4.5 \\times 10^{33}}", "\\boxed{4.6e33}"]) == [1.0, 0.0]


def test_a_reference_math_verify_cannot_parse_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = suite_of(tmp_path, ["\\frac{1}{2}"], "math")
    item = suite.items()[0]
    real = math_verify.parse
    monkeypatch.setattr(math_verify, "parse", lambda *args, **kwargs: [])  # as after a timeout
    verdict = suite.judge(item, "\\boxed{0.5}")
    assert (verdict.score, verdict.detail) == (0.0, "math-verify cannot parse the reference")
    monkeypatch.setattr(math_verify, "parse", real)
    assert suite.judge(item, "\\boxed{0.5}").score == 1.0


def test_choice_verifier_reads_one_letter(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["b", "(E)"], "choice")
    b, e = suite.items()
    assert (b.reference, e.reference) == ("B", "E")
    good = ["\\boxed{B}", "\\boxed{(b)}", "\\boxed{\\text{B}}", "\\boxed{B)}"]
    assert scores(suite, b, good) == [1.0] * 4
    assert scores(suite, b, ["\\boxed{C}", "\\boxed{B, C}", "\\boxed{Bee}"]) == [0.0] * 3
    assert suite.judge(b, "\\boxed{B or C}").detail == "not a single option letter"
    assert suite.judge(e, "\\boxed{E}").score == 1.0


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("C", "C"),
        ("  c ", "C"),
        ("(C)", "C"),
        ("C)", "C"),
        ("C.", "C"),
        ("\\text{C}", "C"),
        ("\\textbf{(C)}", "C"),
        ("\\mathrm{ C }", "C"),
        ("E", None),
        ("CD", None),
        ("C, D", None),
        ("C) the option", None),
        ("", None),
    ],
)
def test_choice_letter(text: str, letter: str | None) -> None:
    assert choice_letter(text, "ABCD") == letter


def test_callable_verifier(tmp_path: Path, checks: str) -> None:
    suite = suite_of(tmp_path, ["Paris"], f"{checks}:contains")
    item = suite.items()[0]
    verdict = suite.judge(item, "I think Paris. \\boxed{Paris}")
    assert (verdict.score, verdict.answer) == (1.0, "Paris")
    assert suite.judge(item, "Lyon, surely").score == 0.0  # the callable sees the whole response
    assert suite.judge(item, "no box, but Paris").score == 1.0
    assert suite_of(tmp_path, ["x"], f"{checks}:half").judge(item, "").score == 0.5
    method = suite_of(tmp_path, ["Paris"], f"{checks}:Checks.last_word")
    assert method.judge(item, "so \\boxed{Paris}").score == 1.0
    broken = suite_of(tmp_path, ["x"], f"{checks}:broken").judge(item, "\\boxed{x}")
    assert (broken.score, broken.detail) == (0.0, f"{checks}:broken raised RuntimeError: boom")
    chatty = suite_of(tmp_path, ["x"], f"{checks}:chatty").judge(item, "x")
    assert chatty.score == 0.0
    assert "returned 'yes', not a bool or a score in [0, 1]" in chatty.detail


@pytest.mark.parametrize(
    "spec",
    ["no_such_module_xyz:check", "my_checks:missing", "my_checks:NOT_CALLABLE", "my_checks:"],
)
def test_callable_verifier_errors_name_the_key(tmp_path: Path, checks: str, spec: str) -> None:
    with pytest.raises(ConfigError, match=r"^verifier: "):
        suite_of(tmp_path, ["x"], spec)


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (True, 1.0),
        (False, 0.0),
        (np.True_, 1.0),
        (np.False_, 0.0),
        (np.float64(0.25), 0.25),
        (np.float32(0.5), 0.5),
        (np.int64(1), 1.0),
        (Decimal("0.5"), 0.5),
        (Decimal("1"), 1.0),
        (Decimal("NaN"), None),
        (Decimal("1.5"), None),
        (Fraction(1, 4), 0.25),
        (1, 1.0),
        (float("nan"), None),
        (-0.1, None),
        (2, None),
        ("1", None),
        (None, None),
        (np.array([True]), None),
    ],
)
def test_verifier_results_as_scores(value: object, score: float | None) -> None:
    assert _as_score(value) == score


def test_callable_verifier_returning_a_numpy_bool(tmp_path: Path, checks: str) -> None:
    suite = suite_of(tmp_path, ["0.5"], f"{checks}:close")
    item = suite.items()[0]
    assert scores(suite, item, ["\\boxed{0.5}", "\\boxed{0.6}"]) == [1.0, 0.0]


@pytest.fixture
def isolated_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("beside_config"):
            del sys.modules[name]


def test_a_verifier_next_to_its_config_file_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_sys_path: None
) -> None:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "beside_config_checks.py").write_text(
        "def check(response, reference):\n    return reference in response\n", encoding="utf-8"
    )
    data = write_jsonl(folder / "data.jsonl", [{"q": "Capital of France?", "a": "Paris"}])
    toml = 'question_field = "q"\nanswer_field = "a"\nverifier = "beside_config_checks:check"\n'
    (folder / "suite.toml").write_text(toml, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the current directory is not the config's, nor on sys.path
    assert str(folder.resolve()) not in sys.path
    cfg = GenericConfig.from_file(folder / "suite.toml")
    assert cfg.config_dir == str(folder.resolve())
    suite = GenericSuite(data, cfg)
    GenericSuite(data, cfg)
    assert sys.path.count(str(folder.resolve())) == 1  # once, and last: it hides nothing
    assert sys.path[-1] == str(folder.resolve())
    item = suite.items()[0]
    assert suite.judge(item, "\\boxed{Paris}").score == 1.0
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        verdicts = list(pool.map(suite.judge, [item, item], ["Paris!", "Lyon"]))
    assert [v.score for v in verdicts] == [1.0, 0.0]
    (folder / "bad.toml").write_text(f'{toml}config_dir = "/elsewhere"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key 'config_dir'"):
        GenericConfig.from_file(folder / "bad.toml")


# --- templates ----------------------------------------------------------------------------------


def test_default_prompts_are_the_papers_math500_templates(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, ["1", "2", "3", "4"])
    target, *others = suite.items()
    assert suite.warmup_prompt(target) == _templates.warmup_prompt("math500", target.question)
    for m in (1, 3):
        demos = [Demo(o.id, o.question, f"so \\boxed{{{o.reference}}}") for o in others[:m]]
        pairs = [(d.question, d.response) for d in demos]
        expected = _templates.adaptive_prompt("math500", target.question, pairs)
        assert suite.adaptive_prompt(target, demos) == expected
    with pytest.raises(ValueError, match="at least one"):
        suite.adaptive_prompt(target, [])


def test_template_files_override_the_prompts(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "warm.txt").write_text(
        "Answer in \\boxed{}.\nQ: {question}\nA:\n", encoding="utf-8"
    )
    (tmp_path / "prompts" / "adapt.txt").write_text(
        "Solved before:\n{examples}\n===\nQ: {question}\nA:", encoding="utf-8"
    )
    (tmp_path / "suite.toml").write_text(
        'name = "mine"\nquestion_field = "q"\nanswer_field = "a"\nverifier = "exact"\n'
        'warmup_template = "prompts/warm.txt"\nadaptive_template = "prompts/adapt.txt"\n'
        'example_template = "[{n}] {question} => {response}"\nexample_separator = "\\n--\\n"\n',
        encoding="utf-8",
    )
    records = [
        {"q": "What is {examples}?", "a": "1"},
        {"q": "Two?", "a": "2"},
        {"q": "3?", "a": "3"},
    ]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    suite = GenericSuite(data, GenericConfig.from_file(tmp_path / "suite.toml"))
    target, one, two = suite.items()
    assert suite.name == "mine"
    # Braces other than the placeholders are literal, and a question is never substituted into.
    assert suite.warmup_prompt(target) == "Answer in \\boxed{}.\nQ: What is {examples}?\nA:"
    demos = [Demo(one.id, one.question, "r1"), Demo(two.id, two.question, "r2 {n}")]
    assert suite.adaptive_prompt(target, demos) == (
        "Solved before:\n[1] Two? => r1\n--\n[2] 3? => r2 {n}\n===\nQ: What is {examples}?\nA:"
    )


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("warmup_template", "Solve this.", "cannot read template file"),
        ("adaptive_template", "{examples} but no question", "no {question} placeholder"),
        ("example_template", "{question} but no response", "no {response} placeholder"),
    ],
)
def test_bad_templates_name_the_key(tmp_path: Path, key: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}: .*{words}"):
        suite_of(tmp_path, ["1"], **{key: value})


# --- config files -------------------------------------------------------------------------------

TOML = """
name = "capitals"
question_field = "question"
answer_field = "answer"
id_field = "id"
verifier = "numeric"
extract = "last_line"
tolerance = 0.001
tolerance_mode = "absolute"
"""


def test_toml_and_json_configs_read_the_same(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(TOML, encoding="utf-8")
    from_toml = GenericConfig.from_file(tmp_path / "c.toml")
    values: dict[str, Any] = {
        "name": "capitals",
        "question_field": "question",
        "answer_field": "answer",
        "id_field": "id",
        "verifier": "numeric",
        "extract": "last_line",
        "tolerance": 0.001,
        "tolerance_mode": "absolute",
        "warmup_template": None,
    }
    (tmp_path / "c.json").write_text(json.dumps(values), encoding="utf-8")
    assert GenericConfig.from_file(tmp_path / "c.json") == from_toml
    direct = GenericConfig(**{k: v for k, v in values.items() if v is not None})
    assert direct.config_dir is None
    assert from_toml == dataclasses.replace(direct, config_dir=str(tmp_path.resolve()))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (TOML + 'verfier = "exact"\n', "unknown key 'verfier'"),
        (TOML.replace('answer_field = "answer"\n', ""), "missing required key 'answer_field'"),
        (TOML.replace('"numeric"', '"fuzzy"'), "key verifier: 'fuzzy'"),
        (TOML.replace('"numeric"', '"my module:f"'), "key verifier: "),
        (TOML.replace('"last_line"', '"first_line"'), "key extract: "),
        (TOML.replace("0.001", "-1.0"), "key tolerance: must be a finite number >= 0"),
        (TOML.replace('"absolute"', '"ratio"'), "key tolerance_mode: "),
        (TOML + "casefold = 1\n", "key casefold: expected true or false, got int"),
        (TOML.replace('"capitals"', '"my suite"'), "key name: "),
        (
            TOML.replace('id_field = "id"', "id_field = 3"),
            "key id_field: expected a string, got int",
        ),
        ("question_field = \n", ":1: not valid TOML (Invalid value, column 18)"),
    ],
)
def test_config_errors_name_the_key_and_file(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        GenericConfig.from_file(path)
    assert str(caught.value).startswith(f"{path}:")
    assert words in str(caught.value)


def test_json_null_means_absent(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"question_field": "q", "answer_field": None}), encoding="utf-8")
    with pytest.raises(ConfigError, match="missing required key 'answer_field'"):
        GenericConfig.from_file(path)


def test_config_file_kinds(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml: no such file"):
        GenericConfig.from_file(tmp_path / "missing.toml")
    (tmp_path / "c.yaml").write_text("a: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c\.yaml: a suite config is a \.json or \.toml"):
        GenericConfig.from_file(tmp_path / "c.yaml")
    (tmp_path / "c.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match="top level"):
        GenericConfig.from_file(tmp_path / "c.json")
    (tmp_path / "d.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"d\.json:1: malformed JSON \(Expecting property"):
        GenericConfig.from_file(tmp_path / "d.json")


# --- data files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz", "d.csv", "d.csv.gz"])
def test_jsonl_and_csv_load_the_same(tmp_path: Path, name: str) -> None:
    records = [
        {"id": f"k{i}", "q": f"Question {i},\n with a comma?", "a": str(i)} for i in range(5)
    ]
    path = tmp_path / name
    (write_csv if ".csv" in name else write_jsonl)(path, records)
    suite = GenericSuite(path, config(id_field="id"))
    items = suite.items()
    assert [(i.id, i.question, i.reference) for i in items] == [
        (r["id"], r["q"], r["a"]) for r in records
    ]


def test_default_ids_are_line_numbers(tmp_path: Path) -> None:
    records = [{"q": "one?", "a": "1"}, {"q": "two?", "a": "2"}]
    jsonl = tmp_path / "d.jsonl"
    write_jsonl(jsonl, records[:1], raw=["", json.dumps(records[1])])
    assert [i.id for i in GenericSuite(jsonl, config()).items()] == ["1", "3"]
    csv_path = write_csv(tmp_path / "d.csv", records)
    assert [i.id for i in GenericSuite(csv_path, config()).items()] == ["2", "3"]


GOOD = {"id": "k", "q": "A question?", "a": "1"}


@pytest.mark.parametrize(
    ("name", "lines", "line", "words"),
    [
        ("d.jsonl", [GOOD, '{"q": "broken'], 2, "malformed JSON"),
        ("d.jsonl", [GOOD, {"id": "k2", "a": "1"}], 2, "field 'q': missing"),
        ("d.jsonl", [GOOD, {"id": "k2", "q": "  ", "a": "1"}], 2, "field 'q': empty"),
        ("d.jsonl", [GOOD, {"id": "k2", "q": "Q?", "a": None}], 2, "field 'a': empty"),
        ("d.jsonl", [GOOD, {"id": "k2", "q": "Q?", "a": [1]}], 2, "field 'a': expected text"),
        ("d.jsonl", [GOOD, {"id": "k2", "q": "Q?"}, GOOD], 2, "field 'a': missing"),
        (
            "d.jsonl",
            [GOOD, {**GOOD, "q": "B?"}],
            2,
            "field 'id': duplicate id 'k' (first on line 1)",
        ),
        ("d.jsonl", [{"q": "Q?", "a": "1"}], 1, "field 'id': missing"),
        ("d.csv", ["id,q,a", "k,Q?,1", "k2,Q?,1,surplus"], 3, "malformed CSV row"),
        ("d.csv", ["id,q,a", 'k,"Two\nlines?",1', "k2,,1"], 4, "field 'q': empty"),
        ("d.csv", ["id,q", "k,Q?"], 2, "field 'a': missing"),
    ],
)
def test_data_errors_name_file_line_and_field(
    tmp_path: Path, name: str, lines: list[Any], line: int, words: str
) -> None:
    path = tmp_path / name
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    with pytest.raises(DataError) as caught:
        GenericSuite(path, config(id_field="id"))
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert words in str(caught.value)


def test_undecodable_bytes_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"q": "1?", "a": "1"}\n{"q": "2?", "a": "2"}\n{"q": "caf\xe9", "a": "3"}\n')
    with pytest.raises(DataError, match=r"d\.jsonl:3: not UTF-8 text"):
        GenericSuite(path, config())


def test_references_must_suit_the_verifier(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"data\.jsonl:2: field 'a': not a number"):
        suite_of(tmp_path, ["1", "one"], "numeric")
    with pytest.raises(DataError, match=r"data\.jsonl:1: field 'a': not an option letter"):
        suite_of(tmp_path, ["B or C"], "choice")
    with pytest.raises(DataError, match=r"nothing\.jsonl: no such file"):
        GenericSuite(tmp_path / "nothing.jsonl", config())
    with pytest.raises(DataError, match=r"empty\.jsonl: no records"):
        GenericSuite(write_jsonl(tmp_path / "empty.jsonl", []), config())


# --- the simulator and workers ------------------------------------------------------------------

ANSWERS = ["7", "-2.5", "3/4", "1,234", "0", "Paris"]
NUMBERS = ANSWERS[:5]
KINDS: list[tuple[str, list[str], dict[str, Any]]] = [
    ("exact", ANSWERS, {}),
    ("exact", ANSWERS, {"casefold": True, "extract": "last_line"}),
    ("numeric", NUMBERS, {}),
    ("numeric", NUMBERS, {"tolerance": 0.9, "tolerance_mode": "relative"}),
    ("numeric", NUMBERS, {"tolerance": 5.0, "tolerance_mode": "absolute", "extract": "full"}),
    ("math", [*NUMBERS, "\\frac{\\pi}{2}", "x^2+1"], {}),
    ("choice", ["A", "B", "c", "D", "G"], {}),
    ("my_checks:contains", ANSWERS, {}),
    ("my_checks:Checks.last_word", ANSWERS, {}),
]


@pytest.mark.parametrize(
    ("verifier", "answers", "changes"), KINDS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(KINDS)]
)
def test_sim_responses_agree_with_the_judge(
    tmp_path: Path, checks: str, verifier: str, answers: list[str], changes: dict[str, Any]
) -> None:
    suite = suite_of(tmp_path, answers, verifier, **changes)
    for item in suite.items():
        right = answers_for(suite).sim_response(item, True, 0)
        assert suite.judge(item, right).score == 1.0, right
        assert answers_for(suite).sim_is_correct(item, right)
        for seed in range(5):
            wrong = answers_for(suite).sim_response(item, False, seed)
            assert wrong == answers_for(suite).sim_response(item, False, seed)
            assert suite.judge(item, wrong).score < 1.0, wrong
            assert not answers_for(suite).sim_is_correct(item, wrong), wrong


def test_pickle_round_trip_then_judge(tmp_path: Path, checks: str) -> None:
    suite = suite_of(tmp_path, ["Paris", "Rome"], f"{checks}:contains", id_field=None)
    clone = pickle.loads(pickle.dumps(suite))
    for item in suite.items():
        assert clone.judge(item, f"\\boxed{{{item.reference}}}").score == 1.0
        assert clone.judge(item, answers_for(suite).sim_response(item, False, 1)).score == 0.0
    assert clone.items() == suite.items()
    assert clone.warmup_prompt(suite.items()[0]) == suite.warmup_prompt(suite.items()[0])


def test_judge_in_a_spawned_worker(tmp_path: Path, checks: str) -> None:
    # The worker re-imports the verifier by its dotted path (spawn passes sys.path along).
    suite = suite_of(tmp_path, ["Paris", "Rome", "Oslo"], f"{checks}:contains")
    items = suite.items()
    responses = ["\\boxed{Paris}", "\\boxed{Milan}", "Oslo, I think"]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        verdicts = list(pool.map(suite.judge, items, responses))
    assert [v.score for v in verdicts] == [1.0, 0.0, 1.0]


SLOW_CHECKS = """
import os, time

def slow(response, reference):
    start = time.monotonic()
    time.sleep(0.3)
    with open(os.environ["TTC_TEST_CALLS"], "a") as f:
        f.write(f"{os.getpid()} {start} {time.monotonic()}\\n")
    return reference in response
"""


async def test_ttc_verify_keeps_every_worker_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "slow_checks.py").write_text(SLOW_CHECKS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("TTC_TEST_CALLS", str(calls))  # spawned workers inherit the environment
    suite = suite_of(tmp_path, ["a", "b", "c", "d"], "slow_checks:slow")
    order = [("4", "d"), ("2", "x"), ("3", "c"), ("1", "a")]
    responses = write_jsonl(tmp_path / "r.jsonl", [{"id": i, "response": r} for i, r in order])
    out = tmp_path / "r.verdicts.jsonl"
    summary = await rescore(suite, responses, out, workers=2)
    assert (summary.judged, summary.passed) == (4, 3)
    verdicts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(v["line"], v["id"], v["passed"]) for v in verdicts] == [
        (1, "4", True),
        (2, "2", False),
        (3, "3", True),
        (4, "1", True),
    ]
    spans: dict[int, list[tuple[float, float]]] = {}
    for line in calls.read_text(encoding="utf-8").splitlines():
        pid, start, end = line.split()
        spans.setdefault(int(pid), []).append((float(start), float(end)))
    assert len(spans) == 2, spans  # both workers judged ...
    first, second = spans.values()
    # ... at the same time
    assert any(a < d and c < b for a, b in first for c, d in second), spans
