"""GPQA (Diamond): graduate-level multiple-choice questions, four options, one right.

The data has the public GPQA columns (`Question`, `Correct Answer`, `Incorrect Answer 1..3`, and
optionally `Record ID`) in CSV or JSONL, optionally gzipped, or comes as the rows of the gated
Hub dataset `Idavidrein/gpqa` (`_hub`). The options are not shuffled in the data, so the loader
shuffles them with a seed per question derived from (seed, id): the correct letter of a question
depends on nothing else, in any process or Python version.

An item's question is the question, a blank line, then the options as "A) ...", one per line, as
in simple-evals; the paper's template puts it after "Question: ". Its reference is the letter.

Two options with the same text make a question ambiguous when one of them is the correct answer:
that is a DataError. Two identical *incorrect* options only make the question easier, and
GPQA-Diamond itself has two such questions, so they are kept, as simple-evals keeps them.

GPQA's authors ask that its questions never appear in plain text: nothing here prints, logs or
quotes a question or an option, errors name the file, line and field only.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ttc.adapters.suites._answers import choice_letter, extract_last_boxed
from ttc.adapters.suites._base import TemplatedSuite
from ttc.adapters.suites._records import Table, check_unique, read_records, record_text
from ttc.engine import ConfigError, DataError, Item, Verdict

__all__ = ["LETTERS", "OPTION_FIELDS", "GPQASuite"]

LETTERS = "ABCD"
OPTION_FIELDS: tuple[str, ...] = (
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
)
"""The option columns; an item's `meta["order"]` lists them in the order of A, B, C, D."""

_ID_FIELD = "Record ID"


def _option_order(seed: int, item_id: str) -> tuple[str, ...]:
    """The option columns shuffled by a generator seeded with (seed, id)."""
    rng = random.Random(f"{seed}/{item_id}")  # str seeds hash with SHA-512: stable everywhere
    order = list(OPTION_FIELDS)
    # Fisher-Yates on rng.random(), whose stream Python guarantees; shuffle()'s is not.
    for i in range(len(order) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        order[i], order[j] = order[j], order[i]
    return tuple(order)


class GPQASuite(TemplatedSuite):
    """GPQA from a CSV or JSONL(.gz) file or the rows of the Hub's dataset, options shuffled per
    question by `seed`."""

    name = "gpqa"

    def __init__(self, path: str | Path | Table, seed: int = 0) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"seed: must be an integer, got {seed!r}")
        # The file, or None for a Hub dataset's rows; `source`: where the questions came from,
        # as the run records it.
        self.path = None if isinstance(path, Table) else Path(path)
        self.source: dict[str, Any] = (
            dict(path.source) if isinstance(path, Table) else {"file": str(self.path)}
        )
        self.seed = seed
        self._items: list[Item] | None = self._load(path if isinstance(path, Table) else None)

    # Workers only judge: they get the path and the seed, never the questions.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": None if self.path is None else str(self.path),
            "source": self.source,
            "seed": self.seed,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = None if state["path"] is None else Path(state["path"])
        self.source = state["source"]
        self.seed = state["seed"]
        self._items = None

    def _data(self) -> Path | Table:
        """The file, or (in a worker, which got no questions) the Hub's rows again."""
        if self.path is not None:
            return self.path
        from ttc.adapters.suites._hub import HubDataset, load_table

        src = self.source
        return load_table(
            self.name, HubDataset(src["hub"], src["split"], src["config"], True, src["revision"])
        )

    def _load(self, table: Table | None = None) -> list[Item]:
        where = table if table is not None else self._data()
        records = where.records() if isinstance(where, Table) else read_records(where)
        items: list[Item] = []
        first_line: dict[str, int] = {}
        for line, record in records:
            question = record_text(where, line, record, "Question")
            texts = {f: record_text(where, line, record, f) for f in OPTION_FIELDS}
            for field in OPTION_FIELDS[1:]:
                if texts[field] == texts[OPTION_FIELDS[0]]:
                    raise DataError(
                        f"{where}:{line}: field {field!r}: the same text as {OPTION_FIELDS[0]!r}"
                    )
            item_id = f"gpqa-{line}"
            if _ID_FIELD in record:
                item_id = record_text(where, line, record, _ID_FIELD)
            check_unique(first_line, item_id, where, line, _ID_FIELD)
            order = _option_order(self.seed, item_id)
            letter = LETTERS[order.index(OPTION_FIELDS[0])]
            options = "\n".join(f"{x}) {texts[f]}" for x, f in zip(LETTERS, order, strict=True))
            meta: dict[str, Any] = {"letter": letter, "order": order}
            subdomain = record.get("Subdomain")  # the simulator's hidden skill cluster
            if isinstance(subdomain, str) and subdomain.strip():
                meta["subdomain"] = subdomain.strip()
            items.append(Item(item_id, f"{question}\n\n{options}", letter, meta))
        if not items:
            raise DataError(f"{where}: no records")
        return items

    def items(self) -> list[Item]:
        """Every question, in file order."""
        if self._items is None:
            self._items = self._load()
        return list(self._items)

    def judge(self, item: Item, response: str) -> Verdict:
        """1.0 iff the last `\\boxed{}` holds exactly the reference letter (see `choice_letter`)."""
        answer = extract_last_boxed(response)
        if answer is None:
            return Verdict(0.0, None, "no \\boxed{} answer")
        letter = choice_letter(answer, LETTERS)
        if letter is None:
            return Verdict(0.0, answer, "the boxed answer is not a single letter A-D")
        return Verdict(float(letter == item.reference), letter)
