"""The paper's Reasoning Gym suite: 400 hard problems generated locally, judged by reasoning-gym.

"Hard" is the Reasoning Gym benchmark's own hard setting (Stojanovski et al., arXiv 2505.24760,
Appendix A.3; its `eval/yaml/hard/` configurations), every other field at its dataset default:

- decimal_arithmetic: 5-8 decimal places, 5-8 terms, precision 10 (significant digits);
- advanced_geometry: integer coordinates in [-100, 100]; orthocenter, incircle radius and angle
  measure questions;
- binary_alternation: strings of 50-500 characters, 80% of them solvable;
- letter_counting: spans of 25-50 words.

Every range is inclusive. Each task is generated with the same fixed seed, and `reasoning-gym` is
pinned to one version (pyproject.toml), so the 400 problems do not change with an upgrade.
An item keeps its task and its index, not reasoning-gym's whole entry (a letter-counting entry
holds its text twice, once as a list of words: 3 kB an item, 3 GB at a million): the scorer
regenerates the entry from the dataset (reasoning-gym's entries are a pure function of the seed
and the index), and keeps the latest few thousand it regenerated. An item made elsewhere with
an `entry` in its meta is scored on that entry.
Scoring uses the `score_answer` of the dataset that generated the entries:
`reasoning_gym.get_score_answer_fn(task)` would build a dataset with the task's default config,
and decimal_arithmetic reads its tolerance from the config (10^-3 by default, 10^-8 for hard).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ttc.adapters.suites._answers import extract_last_boxed
from ttc.adapters.suites._base import TemplatedSuite
from ttc.engine import ConfigError, Item, Verdict

__all__ = ["DEFAULT_TASKS", "HARD_CONFIGS", "ReasoningGymSuite", "extract_last_boxed"]

DEFAULT_TASKS: tuple[str, ...] = (
    "decimal_arithmetic",
    "advanced_geometry",
    "binary_alternation",
    "letter_counting",
)
"""The paper's four task categories."""


HARD_CONFIGS: dict[str, dict[str, Any]] = {
    "decimal_arithmetic": {
        "min_num_decimal_places": 5,
        "max_num_decimal_places": 8,
        "min_terms": 5,
        "max_terms": 8,
        "precision": 10,
    },
    "advanced_geometry": {"min_coord": -100, "max_coord": 100},
    "binary_alternation": {"min_n": 50, "max_n": 500},
    "letter_counting": {"min_words": 25, "max_words": 50},
}
"""The Reasoning Gym benchmark's hard setting of each task ttc generates (keyword arguments of
its dataset config; the fields not named keep their defaults)."""


@functools.lru_cache(maxsize=4096)
def _regenerated(dataset: Any, index: int) -> dict[str, Any]:
    """Entry `index` of `dataset`, regenerated (the same entry on every call); the latest
    thousands are kept, as an item is judged once per sample."""
    entry: dict[str, Any] = dataset[index]
    return entry


def _hard_config(task: str, seed: int, size: int) -> dict[str, Any]:
    """The keyword arguments of `create_dataset` for `task` in the benchmark's hard setting."""
    return {**HARD_CONFIGS[task], "seed": seed, "size": size}


class ReasoningGymSuite(TemplatedSuite):
    """The paper's Reasoning Gym benchmark: `per_task` hard problems of each task, interleaved."""

    name = "reasoning_gym"

    def __init__(
        self, per_task: int = 100, seed: int = 42, tasks: Sequence[str] = DEFAULT_TASKS
    ) -> None:
        if per_task < 1:
            raise ConfigError(f"per_task: must be >= 1, got {per_task}")
        tasks = tuple(tasks)
        if not tasks:
            raise ConfigError("tasks: at least one reasoning-gym task is needed")
        for task in tasks:
            if task not in HARD_CONFIGS:
                known = ", ".join(HARD_CONFIGS)
                raise ConfigError(f"tasks: {task!r} has no hard setting here; known: {known}")
        if len(set(tasks)) != len(tasks):
            raise ConfigError(f"tasks: duplicate task names in {tasks}")
        self.per_task = per_task
        self.seed = seed
        self.tasks = tasks
        self._items: list[Item] | None = None
        self._datasets: dict[str, Any] = {}

    # Workers receive the suite pickled: ship only plain settings, and rebuild the generated items
    # and the reasoning-gym scorers lazily on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return {"per_task": self.per_task, "seed": self.seed, "tasks": self.tasks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.per_task = state["per_task"]
        self.seed = state["seed"]
        self.tasks = tuple(state["tasks"])
        self._items = None
        self._datasets = {}

    def items(self) -> list[Item]:
        """All items, interleaved across tasks so that any prefix is balanced."""
        if self._items is None:
            import reasoning_gym

            per_task: list[list[tuple[str, str]]] = []
            for task in self.tasks:
                config = _hard_config(task, self.seed, self.per_task)
                dataset = reasoning_gym.create_dataset(task, **config)
                entries = (dataset[i] for i in range(self.per_task))
                per_task.append([(e["question"], str(e["answer"])) for e in entries])
            self._items = [
                Item(
                    id=f"{task}/{index}",
                    question=questions[index][0],
                    reference=questions[index][1],
                    meta={"task": task, "index": index},
                )
                for index in range(self.per_task)
                for task, questions in zip(self.tasks, per_task, strict=True)
            ]
        return list(self._items)

    def prepare(self) -> None:
        """Build every task's dataset now (verifier workers call this at start-up)."""
        for task in self.tasks:
            self._dataset(task)

    def _dataset(self, task: str) -> Any:
        dataset = self._datasets.get(task)
        if dataset is None:
            import reasoning_gym

            # The generating config, not the default one: see the module docstring.
            config = _hard_config(task, self.seed, self.per_task)
            dataset = reasoning_gym.create_dataset(task, **config)
            self._datasets[task] = dataset
        return dataset

    def entry(self, item: Item) -> dict[str, Any]:
        """reasoning-gym's entry of an item: the one its meta holds, or regenerated."""
        given = item.meta.get("entry")
        if given is not None:
            return dict(given)
        return dict(_regenerated(self._dataset(item.meta["task"]), int(item.meta["index"])))

    def score(self, item: Item, answer: str) -> float:
        """The task's own reasoning-gym score of an extracted `answer` (it may raise)."""
        dataset = self._dataset(item.meta["task"])
        return float(dataset.score_answer(answer, self.entry(item)))

    def judge(self, item: Item, response: str) -> Verdict:
        """Scores the last `\\boxed{}` answer with the task's own reasoning-gym scorer."""
        answer = extract_last_boxed(response)
        if answer is None:
            return Verdict(0.0, None, "no \\boxed{} answer")
        try:
            score = self.score(item, answer)
        except Exception as exc:  # a scorer bug must cost one verdict, not the run
            return Verdict(0.0, answer, f"scorer raised {type(exc).__name__}: {exc}")
        return Verdict(score, answer)
