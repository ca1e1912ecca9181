"""The paper's test sets from the Hugging Face Hub (`ttc.adapters.suites._hub`), offline: small
local copies laid out as the Hub's repositories are, read through the same `datasets.load_dataset`
call a run makes, give the same questions as the same records in a `--data` file; a bad row is
named by its row; where the Hub cannot serve, the error says what to give instead.

The command-line side (offline, a gated dataset, LiveCodeBench's release files from a fake Hub)
is in tests/e2e/test_hub_cli.py.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import datasets
import pytest

from ttc.adapters.suites import (
    HUB,
    GPQASuite,
    HubDataset,
    HubUnavailable,
    MathSuite,
    Table,
    data_source,
)
from ttc.adapters.suites._hub import lcb_files, load_table
from ttc.engine import DataError
from ttc.engine.journal import items_sha256

MATH = [
    {"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$.", "answer": "2",
     "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"},
    {"problem": "Simplify $\\frac{4}{8}$.", "solution": "$\\boxed{\\frac12}$", "answer": "\\frac12",
     "subject": "Algebra", "level": 2, "unique_id": "test/algebra/2.json"},
    {"problem": "Find $x$ if $2x=6$.", "solution": "$x=\\boxed{3}$", "answer": "3",
     "subject": "Algebra", "level": 3, "unique_id": "test/algebra/3.json"},
]  # fmt: skip
MINERVA = [
    {"problem": "A star has mass 2 solar masses. Give it in grams.",
     "solution": "It is $\\boxed{4e33}$ grams.", "type": "Astrophysics", "idx": 0},
    {"problem": "Compute $\\sin(0)$.", "solution": "$\\boxed{0}$", "type": "Calculus", "idx": 1},
]  # fmt: skip
GPQA_COLUMNS = ["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                "Incorrect Answer 3", "Record ID", "Explanation"]  # fmt: skip
# Made-up questions in GPQA's columns: an option of digits only, a cell with a comma and a line
# break, and an empty cell in a column the suite does not read.
GPQA = [
    ["Which number is even?", "4", "3", "5", "7", "recA", ""],
    ["Pick the colour\nof clear sky", "blue, mostly", "green", "red", "black", "recB", "Rayleigh"],
    ["Which gas is inert?", "argon", "oxygen", "hydrogen", "chlorine", "recC", ""],
]  # fmt: skip


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`datasets` writes its Arrow cache under the test's directory, not the user's home."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))


def _jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _csv(path: Path, rows: Sequence[Sequence[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([GPQA_COLUMNS, *rows])
    return path


def _gpqa_repo(root: Path, rows: Sequence[Sequence[str]]) -> Path:
    """A directory laid out as the Hub's Idavidrein/gpqa: a CSV per config, named in the card."""
    _csv(root / "gpqa_diamond.csv", rows)
    _csv(root / "gpqa_main.csv", rows[:1])
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: gpqa_diamond\n  data_files: gpqa_diamond.csv\n"
        "- config_name: gpqa_main\n  data_files: gpqa_main.csv\n---\n",
        encoding="utf-8",
    )
    return root


def _local(name: str, repo: Path) -> HubDataset:
    """The suite's Hub dataset, read from the local directory `repo` instead."""
    hub = HUB[name]
    return HubDataset(str(repo), hub.split, hub.config, hub.gated)


def test_the_hub_datasets_are_the_papers() -> None:
    assert HUB["math500"] == HubDataset("HuggingFaceH4/MATH-500", "test")
    assert HUB["minerva"] == HubDataset("svc-huggingface/minerva-math", "test")
    assert HUB["gpqa"] == HubDataset("Idavidrein/gpqa", "train", "gpqa_diamond", gated=True)


@pytest.mark.parametrize(("kind", "records"), [("math500", MATH), ("minerva", MINERVA)])
def test_hub_rows_give_the_same_questions_as_the_file(
    tmp_path: Path, kind: str, records: list[dict[str, Any]]
) -> None:
    file = _jsonl(tmp_path / "file" / "test.jsonl", records)
    repo = tmp_path / "repo"
    _jsonl(repo / "test.jsonl", records)  # the Hub repositories hold one test.jsonl
    table = load_table(kind, _local(kind, repo))
    from_hub, from_file = MathSuite(kind, table), MathSuite(kind, file)
    assert from_hub.items() == from_file.items()
    assert len(from_hub.items()) == len(records)
    assert items_sha256(from_hub.items()) == items_sha256(from_file.items())
    assert data_source(from_hub) == {"hub": str(repo), "config": None, "split": "test",
                                     "revision": None}  # fmt: skip
    assert data_source(from_file) == {"file": str(file)}


def test_gpqa_hub_rows_give_the_same_questions_as_the_csv(tmp_path: Path) -> None:
    file = _csv(tmp_path / "gpqa_diamond.csv", GPQA)
    table = load_table("gpqa", _local("gpqa", _gpqa_repo(tmp_path / "repo", GPQA)))
    from_hub, from_file = GPQASuite(table), GPQASuite(file)
    assert from_hub.items() == from_file.items()
    assert [i.id for i in from_hub.items()] == ["recA", "recB", "recC"]
    assert data_source(from_hub) == {"hub": str(tmp_path / "repo"), "config": "gpqa_diamond",
                                     "split": "train", "revision": None}  # fmt: skip


def test_a_gpqa_worker_reloads_the_hub_rows_and_judges(tmp_path: Path) -> None:
    """Workers get no questions: a pickled Hub GPQA suite loads its rows again, the same."""
    import pickle

    table = load_table("gpqa", _local("gpqa", _gpqa_repo(tmp_path / "repo", GPQA)))
    suite = GPQASuite(table)
    state = suite.__getstate__()
    assert "Which number is even?" not in repr(state)
    clone = pickle.loads(pickle.dumps(suite))
    assert clone.items() == suite.items()
    item = suite.items()[0]
    assert clone.judge(item, f"\\boxed{{{item.reference}}}").score == 1.0


@pytest.mark.parametrize(
    ("kind", "records", "bad", "field"),
    [
        ("math500", MATH, {**MATH[1], "answer": None}, "answer"),
        ("minerva", MINERVA, {**MINERVA[1], "solution": "no box here"}, "solution"),
    ],
)
def test_a_bad_hub_row_is_named_by_its_row(
    tmp_path: Path, kind: str, records: list[dict[str, Any]], bad: dict[str, Any], field: str
) -> None:
    _jsonl(tmp_path / "repo" / "test.jsonl", [records[0], bad])
    table = load_table(kind, _local(kind, tmp_path / "repo"))
    with pytest.raises(DataError) as caught:
        MathSuite(kind, table)
    message = str(caught.value)
    assert message.startswith(f"{table.name}:2: field {field!r}")
    assert bad["problem"] not in message


def test_a_bad_gpqa_hub_row_names_the_row_and_quotes_nothing(tmp_path: Path) -> None:
    rows = [GPQA[0], [*GPQA[2][:1], "argon", "argon", *GPQA[2][3:]]]
    table = load_table("gpqa", _local("gpqa", _gpqa_repo(tmp_path / "repo", rows)))
    with pytest.raises(DataError) as caught:
        GPQASuite(table)
    message = str(caught.value)
    assert message == (
        f"{table.name}:2: field 'Incorrect Answer 1': the same text as 'Correct Answer'"
    )
    assert table.name.endswith("/gpqa_diamond/train")


def test_an_empty_gpqa_hub_cell_is_empty_not_nan(tmp_path: Path) -> None:
    """A CSV cell the Hub's reader gives as missing is an empty field, as in the file."""
    rows = [GPQA[0], [*GPQA[2][:4], "", *GPQA[2][5:]]]
    table = load_table("gpqa", _local("gpqa", _gpqa_repo(tmp_path / "repo", rows)))
    with pytest.raises(DataError, match=r":2: field 'Incorrect Answer 3': empty$"):
        GPQASuite(table)


def test_a_table_numbers_its_rows_from_one() -> None:
    table = Table("hf://datasets/x/y/test", [{"a": 1}, {"a": 2}], {"hub": "x/y"})
    assert list(table.records()) == [(1, {"a": 1}), (2, {"a": 2})]
    assert str(table) == "hf://datasets/x/y/test"


def test_an_unknown_split_is_one_error_naming_the_dataset(tmp_path: Path) -> None:
    _jsonl(tmp_path / "repo" / "test.jsonl", MATH)
    data = HubDataset(str(tmp_path / "repo"), "validation")
    with pytest.raises(HubUnavailable) as caught:
        load_table("math500", data)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("--data: the math500 questions were to come from the Hugging Face")
    assert str(tmp_path / "repo") in message
    assert message.endswith("give --data FILE with a local copy")


def test_lcb_files_cover_the_window() -> None:
    # The paper's window: v5's problems, and v6's in case it holds early January.
    assert lcb_files(date(2024, 10, 5), date(2025, 1, 4)) == ("test5.jsonl", "test6.jsonl")
    assert lcb_files(date(2024, 4, 10), date(2024, 4, 20)) == ("test2.jsonl",)
    assert lcb_files(date(2024, 9, 15), date(2024, 9, 20)) == ("test4.jsonl", "test5.jsonl")
    assert len(lcb_files(None, None)) == 6
    assert lcb_files(date(2022, 1, 1), date(2022, 12, 31)) == ()


def test_the_gated_message_names_the_token_and_the_terms() -> None:
    """The reason given for a gated dataset, from the library's error as `datasets` raises it."""
    from datasets.exceptions import DatasetNotFoundError

    from ttc.adapters.suites._hub import _reason

    exc = DatasetNotFoundError(
        "Dataset 'Idavidrein/gpqa' is a gated dataset on the Hub. You must be authenticated"
    )
    error = HubUnavailable("gpqa", HUB["gpqa"], _reason(HUB["gpqa"], exc, offline=False))
    message = str(error)
    assert "HF_TOKEN" in message
    assert "https://huggingface.co/datasets/Idavidrein/gpqa" in message
    assert "or give --data FILE" in message
