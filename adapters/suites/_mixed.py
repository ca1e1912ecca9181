"""The failure-mode test set (the paper's Appendix D, Table 7): questions of several suites in one
test set, chosen to be far apart, each judged by its own suite's verifier.

The paper combines 60 questions, 20 each from LiveCodeBench, MATH-500 and GPQA-Diamond, "and
further enforce[s] diversity by selecting semantically distant instances based on cosine
similarity in embedding space", so that nearest neighbours are weak. Here the choice is a greedy
max-min one: the sources take turns, and each turn takes the question of that source whose
highest cosine similarity to every question already chosen is the lowest (the first turn of each
source takes its lowest such question as well; ties go to the earlier question). Questions are
embedded with the engine's lexical embedder unless another is given, so the 60 are the same on
every machine (the paper used its own embedding model). A source with fewer questions than asked
gives all it has (the LiveCodeBench test fixture has 7).

An item is its source's item with the id `<source>/<id>` and its meta plus `source` and
`inner_id`; its prompts are its source's templates (a question's demonstrations may come from
other sources, as in the paper), and `judge` dispatches on its source. Nothing here prints a
question (GPQA's must never appear in plain text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ttc.engine import ConfigError, Demo, Embedder, Item, Suite, Verdict
from ttc.retrieval import LexicalEmbedder

__all__ = ["MIXED_SOURCES", "MixedSuite", "far_apart"]

# The paper's three sources, in the order they take turns.
MIXED_SOURCES = ("livecodebench", "math500", "gpqa")


def far_apart(
    groups: Mapping[str, Sequence[Item]], per_source: int, embedder: Embedder
) -> list[tuple[str, Item]]:
    """Up to `per_source` items of each group, chosen greedily to be far apart (see the module
    doc), in the order chosen: the sources take turns, so any prefix is balanced."""
    pool = [(name, item) for name, items in groups.items() for item in items]
    if not pool:
        return []
    vectors = np.asarray(embedder.embed([item.question for _, item in pool]), dtype=np.float64)
    nearest = np.full(len(pool), -np.inf)  # each candidate's highest similarity to the chosen
    taken = np.zeros(len(pool), dtype=bool)
    source_of = np.array([list(groups).index(name) for name, _ in pool])
    chosen: list[tuple[str, Item]] = []
    for _ in range(per_source):
        for g in range(len(groups)):
            free = np.flatnonzero((source_of == g) & ~taken)
            if free.size == 0:
                continue
            pick = int(free[np.argmin(nearest[free])])  # argmin: the first of equals
            taken[pick] = True
            chosen.append(pool[pick])
            nearest = np.maximum(nearest, vectors @ vectors[pick])
    return chosen


class MixedSuite(Suite):
    """A test set drawn from several suites (default: the paper's three, 20 each, far apart),
    each question prompted and judged as its own suite does."""

    name = "mixed"

    def __init__(
        self,
        suites: Mapping[str, Suite],
        per_source: int = 20,
        embedder: Embedder | None = None,
    ) -> None:
        if not suites:
            raise ConfigError("mixed: no source suites")
        if per_source < 1:
            raise ConfigError(f"mixed: per_source must be >= 1, got {per_source}")
        self.suites = dict(suites)
        self.per_source = per_source
        groups = {name: suite.items() for name, suite in self.suites.items()}
        picked = far_apart(groups, per_source, embedder or LexicalEmbedder())
        self._items = [
            Item(
                f"{name}/{item.id}",
                item.question,
                item.reference,
                {**item.meta, "source": name, "inner_id": item.id},
            )
            for name, item in picked
        ]
        from ttc.adapters.suites._suites import data_source

        # Where the questions came from, per source (None: generated), as a run records it.
        self.source: dict[str, Any] = {
            name: data_source(suite) for name, suite in self.suites.items()
        }
        # What summary.json must say of a source's judging (e.g. LiveCodeBench's tests visible
        # to the programs), per source.
        judging = {name: dict(s.judging) for name, s in self.suites.items() if s.judging}
        self.judging = judging or None

    # Workers only judge: they get the source suites (each pickles what its judge needs).
    def __getstate__(self) -> dict[str, Any]:
        return {"suites": self.suites, "per_source": self.per_source, "source": self.source}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._items = []

    def items(self) -> list[Item]:
        """The chosen questions, the sources taking turns."""
        return list(self._items)

    def source_of(self, item: Item) -> tuple[Suite, Item]:
        """The item's own suite and the item as that suite knows it."""
        name = item.meta.get("source")
        suite = self.suites.get(name) if isinstance(name, str) else None
        if suite is None:
            raise ConfigError(f"mixed: item {item.id!r} names no known source ({name!r})")
        inner = Item(str(item.meta["inner_id"]), item.question, item.reference, item.meta)
        return suite, inner

    def warmup_prompt(self, item: Item) -> str:
        """The warm-up prompt of the item's own suite."""
        suite, inner = self.source_of(item)
        return suite.warmup_prompt(inner)

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The adaptive prompt of the item's own suite, whatever suites the demos come from."""
        suite, inner = self.source_of(item)
        return suite.adaptive_prompt(inner, demos)

    def prepare(self) -> None:
        """Each source's verifiers, built once per verifier process."""
        for suite in self.suites.values():
            suite.prepare()

    def judge(self, item: Item, response: str) -> Verdict:
        """The verdict of the item's own suite's verifier."""
        suite, inner = self.source_of(item)
        return suite.judge(inner, response)
