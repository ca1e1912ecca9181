"""The GPQA suite: loading, option shuffling, judging, errors, and the simulator's answers.

GPQA's authors ask that its questions never appear in plain text, so the tests on the real data
compare ids, letters, counts and hashes only: no assertion here can print a question or option.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import multiprocessing
import pickle
import re
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.suites import _templates
from ttc.adapters.suites._gpqa import LETTERS, OPTION_FIELDS, GPQASuite
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Demo, Item, Suite

REAL = Path(__file__).resolve().parents[4] / "shared" / "data" / "gpqa_diamond"
REAL_FILE = REAL / "gpqa_diamond.jsonl.gz"
needs_real = pytest.mark.skipif(not REAL_FILE.exists(), reason="GPQA-Diamond data not present")

COLUMNS = ["Record ID", "Question", *OPTION_FIELDS, "Subdomain"]


def digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def record(i: int, **changes: Any) -> dict[str, Any]:
    """A made-up GPQA-format record."""
    rec: dict[str, Any] = {
        "Record ID": f"syn-{i}",
        "Question": f"Made-up question {i}: which of the options is right?",
        "Correct Answer": f"right answer {i}",
        "Incorrect Answer 1": f"wrong answer {i}a",
        "Incorrect Answer 2": f"wrong answer {i}b",
        "Incorrect Answer 3": f"wrong answer {i}c",
        "Subdomain": "Made-up",
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not None}  # None drops the column


def write_jsonl(path: Path, records: list[dict[str, Any]], raw: Sequence[str] = ()) -> Path:
    lines = [json.dumps(r) for r in records] + list(raw)
    text = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_csv(path: Path, records: list[dict[str, Any]], columns: list[str] = COLUMNS) -> Path:
    opener: Callable[..., Any] = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for rec in records:
            writer.writerow([rec.get(c, "") for c in columns])
    return path


def split_options(question: str) -> tuple[str, dict[str, str]]:
    """The question's stem and its options by letter, found from the end of the text."""
    ends = len(question)
    options: dict[str, str] = {}
    for letter in reversed(LETTERS):
        marker = f"\n\n{letter}) " if letter == "A" else f"\n{letter}) "
        at = question.rfind(marker, 0, ends)
        assert at != -1, f"option {letter} not found"
        options[letter] = question[at + len(marker) : ends]
        ends = at
    return question[:ends], options


# --- the real GPQA-Diamond ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> GPQASuite:
    if not REAL_FILE.exists():
        pytest.skip("GPQA-Diamond data not present")
    return GPQASuite(REAL_FILE)


@pytest.fixture(scope="module")
def raw_records() -> dict[str, dict[str, str]]:
    if not REAL_FILE.exists():
        pytest.skip("GPQA-Diamond data not present")
    with gzip.open(REAL_FILE, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["Record ID"]: row for row in rows}


# Pytest explains a failed assert with the reprs of the calls in it, and an Item's repr holds its
# question: so every value below is computed first, and the asserts see ids, letters, digests.


@needs_real
def test_real_file_has_198_items_with_unique_record_ids(real: GPQASuite) -> None:
    ids = [item.id for item in real.items()]
    letters = {item.reference for item in real.items()}
    meta_agrees = all(item.meta["letter"] == item.reference for item in real.items())
    assert isinstance(real, Suite)
    assert len(ids) == 198
    assert len(set(ids)) == 198
    assert all(item_id.startswith("rec") for item_id in ids)
    assert letters == set(LETTERS)
    assert meta_agrees


@needs_real
def test_real_letters_are_spread_over_abcd(real: GPQASuite) -> None:
    counts = Counter(item.reference for item in real.items())
    # 198 fair draws: each letter ~49.5 +- 6; [30, 70] fails only on a broken shuffle.
    assert all(30 <= counts[letter] <= 70 for letter in LETTERS), counts


@needs_real
def test_real_letters_depend_on_the_seed_only(real: GPQASuite) -> None:
    letters = [(item.id, item.reference) for item in real.items()]
    again = [(item.id, item.reference) for item in GPQASuite(REAL_FILE, seed=0).items()]
    other = [(item.id, item.reference) for item in GPQASuite(REAL_FILE, seed=1).items()]
    changed = sum(a != b for a, b in zip(letters, other, strict=True))
    assert again == letters
    assert 100 <= changed <= 198 * 0.9  # ~3/4 of the letters move


@needs_real
def test_real_correct_option_sits_at_the_reference_letter(
    real: GPQASuite, raw_records: dict[str, dict[str, str]]
) -> None:
    for item in real.items():
        raw = raw_records[item.id]
        stem, options = split_options(item.question)
        got = {letter: digest(text) for letter, text in options.items()}
        order = item.meta["order"]
        want = {x: digest(raw[field]) for x, field in zip(LETTERS, order, strict=True)}
        stem_ok = digest(stem) == digest(raw["Question"])
        correct_ok = got[item.reference] == digest(raw["Correct Answer"])
        assert stem_ok, item.id
        assert correct_ok, (item.id, item.reference)
        assert got == want, item.id
        assert sorted(order) == sorted(OPTION_FIELDS), item.id


@needs_real
def test_real_sim_answers_score_as_decided(real: GPQASuite) -> None:
    for item in real.items():
        right = answers_for(real).sim_response(item, True, 0)
        right_score = real.judge(item, right).score
        right_seen = answers_for(real).sim_is_correct(item, right)
        assert (right_score, right_seen) == (1.0, True), item.id
        for seed in range(4):
            wrong = answers_for(real).sim_response(item, False, seed)
            repeatable = wrong == answers_for(real).sim_response(item, False, seed)
            wrong_score = real.judge(item, wrong).score
            wrong_seen = answers_for(real).sim_is_correct(item, wrong)
            assert (repeatable, wrong_score, wrong_seen) == (True, 0.0, False), (item.id, seed)


@needs_real
def test_real_suite_survives_pickling(real: GPQASuite) -> None:
    data = pickle.dumps(real)
    clone = pickle.loads(data)
    items = real.items()
    scores = [clone.judge(item, f"so \\boxed{{{item.reference}}}").score for item in items]
    same_ids = [i.id for i in clone.items()] == [i.id for i in items]
    same_texts = [digest(i.question) for i in clone.items()] == [digest(i.question) for i in items]
    assert len(data) < 1_000  # the path and the seed, never the questions
    assert scores == [1.0] * len(items)
    assert same_ids
    assert same_texts


# --- judging -----------------------------------------------------------------------------------

ITEM = Item("syn-1", "Made-up question?\n\nA) a\nB) b\nC) c\nD) d", "C", {"letter": "C"})


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{C}",
        "Thinking... so the answer is \\boxed{ C }.",
        "\\boxed{\\text{C}}",
        "\\boxed{\\textbf{C}}",
        "\\boxed{(C)}",
        "\\boxed{C)}",
        "\\boxed{C.}",
        "\\boxed{\\text{(C)}}",
        "\\boxed {C}",
        "\\boxed{c}",
        "first \\boxed{A}, then on reflection \\boxed{C}",
    ],
)
def test_judge_accepts_the_letter_forms(tmp_path: Path, response: str) -> None:
    suite = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(1)]))
    verdict = suite.judge(ITEM, response)
    assert (verdict.score, verdict.answer) == (1.0, "C")


@pytest.mark.parametrize(
    ("response", "detail"),
    [
        ("\\boxed{B}", ""),
        ("\\boxed{C} at first, but then \\boxed{B}", ""),
        ("the answer is C", "no \\boxed{} answer"),
        ("\\boxed{C", "no \\boxed{} answer"),
        ("\\boxed{A, C}", "not a single letter"),
        ("\\boxed{AC}", "not a single letter"),
        ("\\boxed{C and D}", "not a single letter"),
        ("\\boxed{C) c}", "not a single letter"),
        ("\\boxed{the option c}", "not a single letter"),
        ("\\boxed{E}", "not a single letter"),
        ("\\boxed{}", "not a single letter"),
    ],
)
def test_judge_rejects_other_answers_with_a_reason(
    tmp_path: Path, response: str, detail: str
) -> None:
    suite = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(1)]))
    verdict = suite.judge(ITEM, response)
    assert verdict.score == 0.0
    assert detail in verdict.detail
    if not detail:
        assert verdict.answer == "B"


def test_wrong_sim_letters_vary_with_the_seed(tmp_path: Path) -> None:
    suite = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(1)]))
    wrong = {answers_for(suite).sim_response(ITEM, False, seed)[-2] for seed in range(40)}
    assert wrong == {"A", "B", "D"}
    assert answers_for(suite).sim_prose is True


# --- loading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["g.jsonl", "g.jsonl.gz", "g.csv", "g.csv.gz"])
def test_every_format_loads_the_same_items(tmp_path: Path, name: str) -> None:
    records = [record(i) for i in range(1, 9)]
    reference = GPQASuite(write_jsonl(tmp_path / "ref.jsonl", records)).items()
    path = tmp_path / name
    (write_csv if ".csv" in name else write_jsonl)(path, records)
    items = GPQASuite(path).items()
    assert items == reference
    assert [item.id for item in items] == [f"syn-{i}" for i in range(1, 9)]


def test_options_are_rendered_after_the_question(tmp_path: Path) -> None:
    item = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(1)])).items()[0]
    stem, options = split_options(item.question)
    assert stem == "Made-up question 1: which of the options is right?"
    assert options[item.reference] == "right answer 1"
    assert sorted(options.values()) == sorted(record(1)[f] for f in OPTION_FIELDS)
    assert re.fullmatch(
        r"(?s).*\?\n\nA\) [^\n]+\nB\) [^\n]+\nC\) [^\n]+\nD\) [^\n]+", item.question
    )
    order = item.meta["order"]
    assert item.meta == {"letter": item.reference, "order": order, "subdomain": "Made-up"}
    assert item.meta["order"][LETTERS.index(item.reference)] == "Correct Answer"


def test_whitespace_around_texts_is_dropped(tmp_path: Path) -> None:
    padded = record(1, Question="  Made-up question?\n", **{"Correct Answer": " right \n"})
    item = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [padded])).items()[0]
    stem, options = split_options(item.question)
    assert (stem, options[item.reference]) == ("Made-up question?", "right")


def test_without_record_ids_ids_are_line_numbers(tmp_path: Path) -> None:
    records = [record(i, **{"Record ID": None}) for i in range(1, 4)]
    assert [i.id for i in GPQASuite(write_jsonl(tmp_path / "g.jsonl", records)).items()] == [
        "gpqa-1",
        "gpqa-2",
        "gpqa-3",
    ]
    columns = [c for c in COLUMNS if c != "Record ID"]
    csv_items = GPQASuite(write_csv(tmp_path / "g.csv", records, columns)).items()
    assert [i.id for i in csv_items] == ["gpqa-2", "gpqa-3", "gpqa-4"]  # line 1 is the header


def test_letters_depend_on_seed_and_id_not_on_position(tmp_path: Path) -> None:
    records = [record(i) for i in range(1, 41)]
    forward = {
        i.id: i.reference for i in GPQASuite(write_jsonl(tmp_path / "a.jsonl", records)).items()
    }
    backward = GPQASuite(write_jsonl(tmp_path / "b.jsonl", records[::-1])).items()
    assert {i.id: i.reference for i in backward} == forward
    reseeded = GPQASuite(tmp_path / "a.jsonl", seed=7).items()
    assert sum(forward[i.id] != i.reference for i in reseeded) > 10
    assert len(set(forward.values())) == 4


def test_duplicate_incorrect_options_are_kept(tmp_path: Path) -> None:
    # GPQA-Diamond has two such questions: ambiguity only arises if the correct text repeats.
    rec = record(1, **{"Incorrect Answer 3": "wrong answer 1a"})
    item = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [rec])).items()[0]
    _, options = split_options(item.question)
    assert sorted(options.values()).count("wrong answer 1a") == 2


def test_seed_must_be_an_integer(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "g.jsonl", [record(1)])
    with pytest.raises(ConfigError, match="seed"):
        GPQASuite(path, seed="1")  # type: ignore[arg-type]


# (file name, writer, expected line, expected field, words of the message)
def _bad_json(p: Path) -> Path:
    return write_jsonl(p, [record(1)], raw=['{"Question": "Made-up question 2"'])


def _not_object(p: Path) -> Path:
    return write_jsonl(p, [record(1)], raw=["[1, 2]"])


def _missing_column(p: Path) -> Path:
    return write_jsonl(p, [record(1), record(2), record(3, **{"Incorrect Answer 2": None})])


def _empty_question(p: Path) -> Path:
    return write_jsonl(p, [record(1), record(2, Question="   ")])


def _list_value(p: Path) -> Path:
    return write_jsonl(p, [record(1, **{"Correct Answer": ["right", "answer"]})])


def _duplicate_id(p: Path) -> Path:
    return write_jsonl(p, [record(1), record(2), record(3, **{"Record ID": "syn-1"})])


def _duplicate_option(p: Path) -> Path:
    return write_jsonl(p, [record(1), record(2, **{"Incorrect Answer 3": " right answer 2 "})])


def _empty_record_id(p: Path) -> Path:
    return write_jsonl(p, [record(1, **{"Record ID": ""})])


def _csv_extra_cell(p: Path) -> Path:
    write_csv(p, [record(1), record(2)])
    with p.open("a", encoding="utf-8", newline="") as f:
        csv.writer(f).writerow([*record(3).values(), "surplus"])
    return p


def _csv_missing_column(p: Path) -> Path:
    return write_csv(p, [record(1)], [c for c in COLUMNS if c != "Incorrect Answer 1"])


def _csv_empty_cell(p: Path) -> Path:
    # Record 1's question spans lines 2-4, so record 2 starts on line 5.
    return write_csv(
        p,
        [record(1, Question="Made-up\nthree-line\nquestion?"), record(2, **{"Correct Answer": ""})],
    )


def _csv_open_quote(p: Path) -> Path:
    write_csv(p, [record(1)])
    with p.open("a", encoding="utf-8") as f:
        f.write('syn-2,"Made-up question 2 never closes its quote,a,b,c,d,x\n')
    return p


def _gz_duplicate_id(p: Path) -> Path:
    return write_csv(p, [record(1), record(1)])


BAD_INPUTS = [
    ("g.jsonl", _bad_json, 2, None, "malformed JSON"),
    ("g.jsonl", _not_object, 2, None, "JSON object"),
    ("g.jsonl", _missing_column, 3, "Incorrect Answer 2", "missing"),
    ("g.jsonl", _empty_question, 2, "Question", "empty"),
    ("g.jsonl", _list_value, 1, "Correct Answer", "expected text"),
    ("g.jsonl", _duplicate_id, 3, "Record ID", "duplicate id 'syn-1' (first on line 1)"),
    ("g.jsonl", _duplicate_option, 2, "Incorrect Answer 3", "same text as 'Correct Answer'"),
    ("g.jsonl", _empty_record_id, 1, "Record ID", "empty"),
    ("g.csv", _csv_extra_cell, 4, None, "malformed CSV row"),
    ("g.csv", _csv_missing_column, 2, "Incorrect Answer 1", "missing"),
    ("g.csv", _csv_empty_cell, 5, "Correct Answer", "empty"),
    ("g.csv", _csv_open_quote, 3, None, "malformed CSV row"),
    ("g.csv.gz", _gz_duplicate_id, 3, "Record ID", "duplicate id"),
]


@pytest.mark.parametrize(
    ("name", "write", "line", "field", "words"),
    BAD_INPUTS,
    ids=[w.__name__.strip("_") for _, w, *_ in BAD_INPUTS],
)
def test_bad_input_names_file_line_and_field(
    tmp_path: Path,
    name: str,
    write: Callable[[Path], Path],
    line: int,
    field: str | None,
    words: str,
) -> None:
    path = write(tmp_path / name)
    with pytest.raises(DataError) as caught:
        GPQASuite(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    assert words in message
    if field is not None:
        assert f"field {field!r}" in message
    # The data is never quoted: no question and no option text.
    assert "Made-up" not in message
    assert "right answer" not in message
    assert "wrong answer" not in message


def test_missing_empty_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nothing\.jsonl: no such file"):
        GPQASuite(tmp_path / "nothing.jsonl")
    (tmp_path / "empty.csv").write_text(",".join(COLUMNS) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.csv: no records"):
        GPQASuite(tmp_path / "empty.csv")
    (tmp_path / "g.txt").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match=r"g\.txt: unknown format"):
        GPQASuite(tmp_path / "g.txt")
    (tmp_path / "plain.jsonl.gz").write_text(json.dumps(record(1)), encoding="utf-8")
    with pytest.raises(DataError, match=r"plain\.jsonl\.gz: not a readable gzip file"):
        GPQASuite(tmp_path / "plain.jsonl.gz")
    (tmp_path / "latin.jsonl").write_bytes(b'{"Question": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin\.jsonl:1: not UTF-8"):
        GPQASuite(tmp_path / "latin.jsonl")


# --- prompts and workers -------------------------------------------------------------------------


def test_prompts_are_the_papers_gpqa_templates(tmp_path: Path) -> None:
    suite = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(1), record(2)]))
    target, neighbour = suite.items()
    assert suite.warmup_prompt(target) == _templates.warmup_prompt("gpqa", target.question)
    assert suite.warmup_prompt(target) == (
        "Solve the problem step by step.\n"
        "Select one selection and answer A, B, C or D in \\boxed{}.\n\n"
        f"Question: {target.question}"
    )
    demo = Demo(neighbour.id, neighbour.question, f"so \\boxed{{{neighbour.reference}}}")
    prompt = suite.adaptive_prompt(target, [demo])
    assert prompt == _templates.adaptive_prompt(
        "gpqa", target.question, [(neighbour.question, demo.response)]
    )
    assert f"Example 1\n{neighbour.question}\nAnswer: {demo.response}\n\n---\n\n" in prompt
    assert prompt.endswith(f"Question: {target.question}")


def test_judge_in_a_spawned_worker(tmp_path: Path) -> None:
    suite = GPQASuite(write_jsonl(tmp_path / "g.jsonl", [record(i) for i in range(4)]))
    items = suite.items()
    responses = [
        answers_for(suite).sim_response(item, i % 2 == 0, i) for i, item in enumerate(items)
    ]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        verdicts = list(pool.map(suite.judge, items, responses))
    assert [v.score for v in verdicts] == [1.0, 0.0, 1.0, 0.0]
