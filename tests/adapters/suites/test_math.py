"""MATH-500 and MinervaMath: loading the public files, the math-verify judge, the simulator's
answers, pickling into spawned workers, bad input, and the paper's prompts.

The data is read from the shared folder next to the repository, never copied into it. The
checks over every reference run in a pool of two spawned workers, as the engine judges.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.suites import _templates
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._reasoning_gym import extract_last_boxed
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Demo, Item, Suite, Verdict

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
FILES = {
    "math500": DATA / "math500" / "test.jsonl",
    "minerva": DATA / "minerva_math" / "test.jsonl",
}
SIZES = {"math500": 500, "minerva": 272}

# Minerva references math-verify cannot turn into an expression: they verify by exact string
# only, so an equivalent answer written differently is scored wrong.
STRING_ONLY = {
    "27": "an ODE with \\odot subscripts: the LaTeX parser fails",
    "261": "\\hbar \\omega(v+1 / 2) - ...: the LaTeX parser fails",
    "269": "a list of two symbols, E_{1},E_{2}",
}
# Minerva references math-verify parses, but wrongly: each is a (reference id, answer) that is
# wrong yet accepted, with why. Listed so that a change in math-verify shows here.
MISPARSED = {
    "116": ("\\frac{1}{m}", "the trailing t of \\frac{1}{m} t is stripped as a unit (tonne)"),
    "137": (
        "\\frac{1}{\\sqrt{2}}",
        "the trailing c of \\frac{1}{\\sqrt{2}}c is stripped as a unit",
    ),
    "138": (
        "m_{p} c^{2}\\left(\\gamma^{2}-2\\right) \\sin ^{2} \\theta",
        "\\gamma^{2} parses as zoo, so the bracket is lost",
    ),
    "268": ("2/3", "\\frac{1}{3} E_{1}+\\frac{2}{3} E_{2} parses as 2/3"),
}
# References below 1e-18: math-verify's numeric comparison chops differences below about 1e-16,
# so on its own it accepts a reference with one digit changed; the suite's six-significant-digit
# check rejects it (Minerva ids).
TINY = {"264": "2.88e-19", "265": "1.325e-27", "267": "4.6e-24"}
# Small Minerva references for which math-verify alone, rounding to six decimal places, takes a
# plain decimal 30% off (or further) as right.
SMALL = ("129", "156", "174", "178", "179", "184", "191", "197", "198", "200", "208", "218", "228")

SAMPLE_SEEDS = (1, 2, 3)


def _data(kind: str) -> Path:
    path = FILES[kind]
    if not path.exists():
        pytest.skip(f"public data not found: {path} (expected next to the repository)")
    return path


@pytest.fixture(scope="module")
def suites() -> dict[str, MathSuite]:
    return {kind: MathSuite(kind, _data(kind)) for kind in FILES}


# The pool's workers hold both suites, installed once each, as the engine's verifier pool does.
_WORKER_SUITES: dict[str, MathSuite] = {}


def _install(suites: dict[str, MathSuite]) -> None:
    _WORKER_SUITES.update(suites)
    for suite in suites.values():
        suite.prepare()


def _judge_all(kind: str, pairs: list[tuple[Item, str]]) -> list[Verdict]:
    return [_WORKER_SUITES[kind].judge(item, text) for item, text in pairs]


def _sim_checks(
    kind: str, items: list[Item], seeds: Sequence[int]
) -> list[tuple[str, str, float, float, bool, bool]]:
    """Per item and seed: the wrong answer, its score, the correct answer's score, and what
    the simulator itself says of both."""
    suite = _WORKER_SUITES[kind]
    out = []
    for item in items:
        for seed in seeds:
            wrong = answers_for(suite).sim_response(item, False, seed)
            right = answers_for(suite).sim_response(item, True, seed)
            out.append(
                (
                    item.id,
                    wrong,
                    suite.judge(item, wrong).score,
                    suite.judge(item, right).score,
                    answers_for(suite).sim_is_correct(item, wrong),
                    answers_for(suite).sim_is_correct(item, right),
                )
            )
    return out


@pytest.fixture(scope="module")
def pool(suites: dict[str, MathSuite]) -> Iterator[ProcessPoolExecutor]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=2, mp_context=context, initializer=_install, initargs=(suites,)
    ) as executor:
        yield executor


def _chunks(items: Sequence[Any], size: int = 32) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _judge_in_pool(
    pool: ProcessPoolExecutor, kind: str, pairs: list[tuple[Item, str]]
) -> list[Verdict]:
    futures = [pool.submit(_judge_all, kind, chunk) for chunk in _chunks(pairs)]
    return [verdict for future in futures for verdict in future.result()]


def _records(kind: str) -> list[dict[str, Any]]:
    lines = _data(kind).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# --- loading ---------------------------------------------------------------------------------


def test_math500_items_match_the_file(suites: dict[str, MathSuite]) -> None:
    suite = suites["math500"]
    assert isinstance(suite, Suite)
    assert suite.name == "math500"
    items = suite.items()
    assert len(items) == SIZES["math500"]
    assert len({item.id for item in items}) == SIZES["math500"]
    for item, record in zip(items, _records("math500"), strict=True):
        assert item.id == record["unique_id"]
        assert item.question == record["problem"]
        assert item.reference == record["answer"]
        assert dict(item.meta) == {"subject": record["subject"], "level": record["level"]}
    assert items[0].id == "test/precalculus/807.json"
    assert items[0].reference == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_minerva_items_match_the_file(suites: dict[str, MathSuite]) -> None:
    suite = suites["minerva"]
    assert suite.name == "minerva"
    items = suite.items()
    assert [item.id for item in items] == [str(i) for i in range(SIZES["minerva"])]
    for item, record in zip(items, _records("minerva"), strict=True):
        assert item.question == record["problem"]
        assert record["solution"].count("\\boxed") == 1
        assert item.reference == extract_last_boxed(record["solution"])
        assert dict(item.meta) == {"type": record["type"]}
    by_id = {item.id: item.reference for item in items}
    assert by_id["0"] == "1.6"
    assert by_id["1"] == "4.5e33"
    assert by_id["5"] == "np.arcsin(10/13)"
    assert by_id["72"] == "x_{0} \\cos (\\omega t)+$ $\\dot{x}_{0} \\sin (\\omega t) / \\omega"


def test_unknown_kind_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--suite"):
        MathSuite("gsm8k", tmp_path / "x.jsonl")


# --- judging ---------------------------------------------------------------------------------


@pytest.mark.slow  # every item of the real data set
@pytest.mark.parametrize("kind", ["math500", "minerva"])
def test_every_reference_verifies_itself(
    kind: str, suites: dict[str, MathSuite], pool: ProcessPoolExecutor
) -> None:
    items = suites[kind].items()
    pairs = [(item, f"Some reasoning.\n\nSo \\boxed{{{item.reference}}}.") for item in items]
    verdicts = _judge_in_pool(pool, kind, pairs)
    failed = [
        (i.id, i.reference, v.detail)
        for i, v in zip(items, verdicts, strict=True)
        if v.score != 1.0
    ]
    assert failed == []
    assert all(v.answer == item.reference for item, v in zip(items, verdicts, strict=True))


@pytest.mark.slow  # every item of the real data set
@pytest.mark.parametrize("kind", ["math500", "minerva"])
def test_sim_answers_for_every_item(
    kind: str, suites: dict[str, MathSuite], pool: ProcessPoolExecutor
) -> None:
    """Seed 0 for every item, three more seeds for every eleventh item."""
    items = suites[kind].items()
    futures = [pool.submit(_sim_checks, kind, chunk, (0,)) for chunk in _chunks(items)]
    # Not Minerva 132: math-verify spends its whole 5 s timeout on any near miss of that
    # equation (then rejects it), so it is checked with seed 0 only.
    sample = items[5::11]
    futures += [pool.submit(_sim_checks, kind, chunk, SAMPLE_SEEDS) for chunk in _chunks(sample)]
    rows = [row for future in futures for row in future.result()]
    assert len(rows) == len(items) + len(sample) * len(SAMPLE_SEEDS)
    accepted_wrong = [(item_id, wrong) for item_id, wrong, score, *_ in rows if score != 0.0]
    assert accepted_wrong == []
    rejected_right = [item_id for item_id, _, _, score, _, _ in rows if score != 1.0]
    assert rejected_right == []
    # The simulator's own cheap check agrees on both.
    assert not any(sim_wrong for *_, sim_wrong, _ in rows)
    assert all(sim_right for *_, sim_right in rows)


def test_sim_responses_are_deterministic_and_in_latex(suites: dict[str, MathSuite]) -> None:
    suite = suites["math500"]
    item = next(i for i in suite.items() if i.reference == "\\frac{14}{3}")
    assert answers_for(suite).sim_response(item, False, 7) == answers_for(suite).sim_response(
        item, False, 7
    )
    answers = {
        extract_last_boxed(answers_for(suite).sim_response(item, False, s)) for s in range(12)
    }
    assert len(answers) > 1
    for answer in answers:
        assert answer is not None
        assert re.fullmatch(r"\\frac\{\d+\}\{\d+\}", answer), answer
    correct = answers_for(suite).sim_response(item, True, 3)
    assert correct.endswith("\\boxed{\\frac{14}{3}}")
    assert answers_for(suite).sim_prose


def _by_id(suites: dict[str, MathSuite], kind: str) -> dict[str, Item]:
    return {item.id: item for item in suites[kind].items()}


@pytest.mark.parametrize(
    ("kind", "item_id", "answer", "score"),
    [
        # equivalent forms are accepted
        ("math500", "test/precalculus/807.json", "(3, \\pi/2)", 1.0),
        ("math500", "test/algebra/2584.json", "14/3", 1.0),
        ("minerva", "1", "4.5 \\times 10^{33}", 1.0),  # the reference is written 4.5e33
        ("minerva", "1", "4.5\\cdot10^{33}\\ \\mathrm{erg/s}", 1.0),
        ("minerva", "38", "-\\frac{1}{3}", 1.0),  # the reference is written -1./3
        ("minerva", "5", "\\arcsin\\left(\\frac{10}{13}\\right)", 1.0),  # np.arcsin(10/13)
        ("minerva", "0", "1.6 \\mathrm{~cm}", 1.0),
        # perturbed ones are not
        ("math500", "test/precalculus/807.json", "\\left( 3, \\frac{\\pi}{3} \\right)", 0.0),
        ("math500", "test/algebra/2584.json", "\\frac{14}{5}", 0.0),
        ("minerva", "1", "4.6e33", 0.0),
        ("minerva", "1", "4.5e34", 0.0),
        ("minerva", "1", "4.5", 0.0),
        ("minerva", "0", "1.7", 0.0),
        ("minerva", "184", "3.62e-10", 0.0),
        ("minerva", "261", "2", 0.0),  # plain-expression extraction would have read it as 2
        ("minerva", "265", "1", 0.0),
    ],
)
def test_equivalent_and_perturbed_answers(
    suites: dict[str, MathSuite], kind: str, item_id: str, answer: str, score: float
) -> None:
    item = _by_id(suites, kind)[item_id]
    verdict = suites[kind].judge(item, f"Working.\nThe answer is \\boxed{{{answer}}}.")
    assert verdict.score == score, verdict
    assert verdict.answer == answer


def _bump_first_digit(reference: str) -> str:
    found = re.search(r"\d", reference)
    assert found is not None
    digit = int(found.group())
    bumped = digit + 1 if digit < 9 else digit - 1
    return f"{reference[: found.start()]}{bumped}{reference[found.end() :]}"


@pytest.mark.slow  # every item of the real data set
@pytest.mark.parametrize("kind", ["math500", "minerva"])
def test_references_with_a_digit_changed_fail(
    kind: str, suites: dict[str, MathSuite], pool: ProcessPoolExecutor
) -> None:
    items = [item for item in suites[kind].items() if re.search(r"\d", item.reference)]
    pairs = [(item, f"\\boxed{{{_bump_first_digit(item.reference)}}}") for item in items]
    verdicts = _judge_in_pool(pool, kind, pairs)
    accepted = {i.id for i, verdict in zip(items, verdicts, strict=True) if verdict.score != 0.0}
    known = {"268"} if kind == "minerva" else set()
    assert accepted == known


def test_known_limitations_of_math_verify(suites: dict[str, MathSuite]) -> None:
    suite, items = suites["minerva"], _by_id(suites, "minerva")
    for item_id in STRING_ONLY:  # exact text only: a respaced equivalent is not recognised
        item = items[item_id]
        assert suite.judge(item, f"\\boxed{{{item.reference}}}").score == 1.0
        respaced = item.reference.replace("{", "{ ").replace(",", " , ")
        assert suite.judge(item, f"\\boxed{{{respaced}}}").score == 0.0
    for item_id, (wrong, _why) in MISPARSED.items():
        assert suite.judge(items[item_id], f"\\boxed{{{wrong}}}").score == 1.0
    for item_id, reference in TINY.items():
        assert items[item_id].reference == reference
        bumped = _bump_first_digit(reference)
        assert suite.judge(items[item_id], f"\\boxed{{{bumped}}}").score == 0.0


@pytest.mark.parametrize("item_id", SMALL)
def test_small_references_need_six_significant_digits(
    suites: dict[str, MathSuite], item_id: str
) -> None:
    suite, item = suites["minerva"], _by_id(suites, "minerva")[item_id]
    value = float(item.reference)
    assert 0 < value < 1e-5
    for factor in (0.7, 1.3, 2.0, 1.0001):
        wrong = f"{value * factor:.20f}".rstrip("0")
        verdict = suite.judge(item, f"\\boxed{{{wrong}}}")
        assert verdict.score == 0.0, wrong
        assert verdict.detail
    for right in (f"{value:.20f}".rstrip("0"), f"{value * (1 + 2e-6):.20f}", f"{value:.3e}"):
        assert suite.judge(item, f"\\boxed{{{right}}}").score == 1.0, right


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("0.0000004", 0.0),  # math-verify alone: 1.0
        ("0.000000000001", 0.0),  # math-verify alone: 1.0
        ("0", 0.0),
        ("3.888e-10", 0.0),  # more digits than the reference, and not the same number
        ("3.9e-10", 0.0),
        ("0.000000000389", 1.0),
        ("3.89 \\times 10^{-10}", 1.0),
        ("3.89 \\cdot 10^{-10} \\mathrm{~m}", 1.0),
        ("0.0000000003890001", 1.0),  # within six significant digits
        ("3.890001e-10", 0.0),  # math-verify compares two e-notations exactly
        ("x = 3.89e-10", 1.0),
        ("x = 0.0000004", 0.0),
        ("3.89 \\times 10^{-10} \\mathrm{~m}", 1.0),
        ("-3.89e-10", 0.0),
    ],
)
def test_minerva_174_is_compared_relatively(
    suites: dict[str, MathSuite], answer: str, score: float
) -> None:
    item = _by_id(suites, "minerva")["174"]
    assert item.reference == "3.89e-10"
    assert suites["minerva"].judge(item, f"So \\boxed{{{answer}}}.").score == score


def test_fractions_keep_math_verifys_rounding_at_six_significant_digits(
    suites: dict[str, MathSuite],
) -> None:
    suite, items = suites["math500"], _by_id(suites, "math500")
    third = next(i for i in suite.items() if i.reference == "\\frac{14}{3}")
    assert suite.judge(third, "\\boxed{4.666667}").score == 1.0
    assert suite.judge(third, "\\boxed{4.67}").score == 0.0
    small = items["test/intermediate_algebra/1197.json"]  # 3/56 = 0.05357142...
    assert small.reference == "\\frac{3}{56}"
    assert suite.judge(small, "\\boxed{0.0535714}").score == 1.0
    assert suite.judge(small, "\\boxed{0.053571}").score == 0.0  # five significant digits
    assert suite.judge(small, "\\boxed{0.0536}").score == 0.0


def test_judge_off_the_main_thread(suites: dict[str, MathSuite]) -> None:
    # signal.alarm only works in a main thread: there math-verify runs without its timeouts.
    suite = suites["minerva"]
    items = _by_id(suites, "minerva")
    cases = [(items["1"], "4.5 \\times 10^{33}", 1.0), (items["0"], "1.6", 1.0)]
    cases += [(items["0"], "1.7", 0.0), (items["174"], "0.0000004", 0.0)]
    with ThreadPoolExecutor(max_workers=1) as executor:
        verdicts = list(executor.map(lambda c: suite.judge(c[0], f"\\boxed{{{c[1]}}}"), cases))
    assert [v.score for v in verdicts] == [score for *_, score in cases], verdicts
    assert all("raised" not in v.detail for v in verdicts)


def test_no_boxed_answer_scores_zero(suites: dict[str, MathSuite]) -> None:
    suite = suites["math500"]
    item = suite.items()[0]
    for response in ("The answer is 3.", "", "unclosed \\boxed{3", "\\boxed{}"):
        verdict = suite.judge(item, response)
        assert verdict.score == 0.0
        assert verdict.detail
    assert suite.judge(item, "no box").answer is None
    # Only the last box counts.
    reference = item.reference
    assert suite.judge(item, f"\\boxed{{{reference}}} or rather \\boxed{{7}}").score == 0.0
    assert suite.judge(item, f"\\boxed{{7}} or rather \\boxed{{{reference}}}").score == 1.0


def test_sim_is_correct_compares_strings(suites: dict[str, MathSuite]) -> None:
    suite = suites["minerva"]
    item = _by_id(suites, "minerva")["1"]
    assert answers_for(suite).sim_is_correct(item, "so \\boxed{ 4.5e33 }")
    assert not answers_for(suite).sim_is_correct(
        item, "so \\boxed{4.5 \\times 10^{33}}"
    )  # string compare
    assert not answers_for(suite).sim_is_correct(item, "no box")


# --- processes -------------------------------------------------------------------------------


def test_judge_in_a_spawned_worker(suites: dict[str, MathSuite]) -> None:
    suite = suites["minerva"]
    suite.judge(suite.items()[0], "\\boxed{1.6}")  # fill the cache: it must not travel
    state = suite.__getstate__()
    assert set(state) == {"kind", "path", "source", "items"}
    clone = pickle.loads(pickle.dumps(suite))
    assert clone.items() == suite.items()
    assert clone.name == "minerva"
    items = suite.items()[:6]
    responses = [f"\\boxed{{{item.reference}}}" for item in items] + ["\\boxed{0.5}"]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        verdicts = list(executor.map(suite.judge, [*items, items[0]], responses))
    assert [v.score for v in verdicts] == [1.0] * 6 + [0.0]


# --- bad input -------------------------------------------------------------------------------

_MATH_OK = {
    "problem": "What is $1+1$?",
    "solution": "It is $\\boxed{2}$.",
    "answer": "2",
    "subject": "Prealgebra",
    "level": 1,
    "unique_id": "test/prealgebra/1.json",
}
_MINERVA_OK = {"problem": "Compute 2.", "solution": "So $\\boxed{2}$.", "type": "X", "idx": 0}


_DROP = object()  # as a field's value: leave the field out


def _line(base: dict[str, Any], **changes: Any) -> str:
    record = {**base, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not _DROP})


@pytest.mark.parametrize(
    ("kind", "lines", "lineno", "field"),
    [
        ("math500", [_line(_MATH_OK), "{not json"], 2, "malformed JSON"),
        ("math500", ["", _line(_MATH_OK), "[1, 2]"], 3, "expected a JSON object"),
        ("math500", [_line(_MATH_OK, answer=_DROP)], 1, "'answer'"),
        ("math500", [_line(_MATH_OK, unique_id=_DROP)], 1, "'unique_id'"),
        ("math500", [_line(_MATH_OK, problem=3)], 1, "'problem'"),
        ("math500", [_line(_MATH_OK, answer=None)], 1, "'answer'"),
        ("math500", [_line(_MATH_OK, level="1")], 1, "'level'"),
        ("math500", [_line(_MATH_OK, problem="  \n")], 1, "'problem'"),
        ("math500", [_line(_MATH_OK, answer=" ")], 1, "'answer'"),
        ("math500", [_line(_MATH_OK), "", "  ", _line(_MATH_OK)], 4, "'unique_id'"),
        ("minerva", [_line(_MINERVA_OK, solution="no box here")], 1, "'solution'"),
        ("minerva", [_line(_MINERVA_OK, solution="\\boxed{2")], 1, "'solution'"),
        ("minerva", [_line(_MINERVA_OK, idx="0")], 1, "'idx'"),
        ("minerva", [_line(_MINERVA_OK, idx=True)], 1, "'idx'"),
        ("minerva", [_line(_MINERVA_OK, type=_DROP)], 1, "'type'"),
        ("minerva", [_line(_MINERVA_OK, problem="")], 1, "'problem'"),
        ("minerva", [_line(_MINERVA_OK), _line(_MINERVA_OK, problem="Again.")], 2, "'idx'"),
    ],
)
def test_bad_lines_name_file_line_and_field(
    tmp_path: Path, kind: str, lines: list[str], lineno: int, field: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        MathSuite(kind, path)
    message = str(caught.value)
    assert f"{path}:{lineno}:" in message
    assert field in message


def test_duplicate_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text(f"{_line(_MATH_OK)}\n\n{_line(_MATH_OK)}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dup\.jsonl:3: field 'unique_id': duplicate .*line 1"):
        MathSuite("math500", path)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(DataError, match=re.escape(str(missing))):
        MathSuite("minerva", missing)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no items"):
        MathSuite("math500", empty)


def test_blank_lines_are_skipped_and_lines_counted(tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    second = _line(_MINERVA_OK, idx=7, solution="a \\boxed{1} then \\boxed{\\frac{1}{2}}")
    path.write_text(f"\n{_line(_MINERVA_OK)}\n   \n{second}\n\n", encoding="utf-8")
    suite = MathSuite("minerva", path)
    assert [(i.id, i.reference) for i in suite.items()] == [("0", "2"), ("7", "\\frac{1}{2}")]


# --- prompts ---------------------------------------------------------------------------------


def test_prompts_are_the_papers(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(_line(_MATH_OK) + "\n", encoding="utf-8")
    math = MathSuite("math500", path)
    item = math.items()[0]
    demos = [Demo("a", "Q1", "R1 \\boxed{1}", 0.9), Demo("b", "Q2", "R2", 0.5)]
    assert math.warmup_prompt(item) == (
        "Reason step by step and put the final answer in \\boxed{}.\n"
        "Problem:\nWhat is $1+1$?\n\nSolution:"
    )
    assert math.adaptive_prompt(item, demos) == (
        "Example 1\nProblem:\nQ1\n\nSolution:\nR1 \\boxed{1}\n\n"
        "Example 2\nProblem:\nQ2\n\nSolution:\nR2\n\n---\n\n"
        "Now solve the following. Put the final answer in \\boxed{}.\n"
        "Problem:\nWhat is $1+1$?\n\nSolution:"
    )
    path.write_text(_line(_MINERVA_OK) + "\n", encoding="utf-8")
    minerva = MathSuite("minerva", path)
    item = minerva.items()[0]
    instruction = (
        "Let's solve this step by step and put the final answer in \\boxed{} "
        "with just the numeric value."
    )
    assert minerva.warmup_prompt(item) == f"{instruction}\nProblem:\nCompute 2.\n\nSolution:"
    assert minerva.adaptive_prompt(item, demos[:1]) == (
        "Example 1\nProblem:\nQ1\n\nSolution:\nR1 \\boxed{1}\n\n---\n\n"
        f"{instruction}\nProblem:\nCompute 2.\n\nSolution:"
    )
    pairs = [(d.question, d.response) for d in demos]
    assert minerva.adaptive_prompt(item, demos) == _templates.adaptive_prompt(
        "minerva", "Compute 2.", pairs
    )
