"""The paper's Reasoning Gym suite: 400 hard problems generated locally, judged by reasoning-gym.

"Hard" is each task's curriculum set to its highest level, and the default (inclusive) curriculum
context, so every range runs from the easiest level to the hardest (reasoning-gym 0.1.19):

- decimal_arithmetic: 2-8 decimal places, 2-10 terms, answers to 12 significant digits;
- advanced_geometry: integer coordinates in [-10000, 10000]; orthocenter, incircle radius and
  angle measure questions;
- binary_alternation: strings of 10-1000 characters, 80% of them solvable;
- letter_counting: spans of 5-19 words.

Each task is generated with the same fixed seed. Scoring uses the `score_answer` of the dataset
that generated the entries: `reasoning_gym.get_score_answer_fn(task)` would build a dataset with
the task's default config, and decimal_arithmetic reads its tolerance from the config (10^-3 by
default, 10^-8 for the hard config).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from ttc.adapters.suites import _templates
from ttc.engine import ConfigError, Demo, Item, Verdict

__all__ = ["DEFAULT_TASKS", "ReasoningGymSuite", "extract_last_boxed"]

DEFAULT_TASKS: tuple[str, ...] = (
    "decimal_arithmetic",
    "advanced_geometry",
    "binary_alternation",
    "letter_counting",
)
"""The paper's four task categories."""

# Above every curriculum's top level: set_global_level clamps each attribute to its maximum.
_HARDEST_LEVEL = 1_000
_BOXED = re.compile(r"\\boxed\s*\{")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LEADS = ("The final answer is", "Therefore, the answer is", "So the final answer is")

Scorer = Callable[[str | None, dict[str, Any]], float]


def extract_last_boxed(text: str) -> str | None:
    """The stripped content of the last `\\boxed{...}` in `text` (braces balanced), else None."""
    # Search from the end: responses are long and the answer is near their end.
    at = len(text)
    while (at := text.rfind("\\boxed", 0, at)) != -1:
        match = _BOXED.match(text, at)
        if match is not None:
            break
    else:
        return None
    start = match.end()
    depth = 1
    for pos in range(start, len(text)):
        char = text[pos]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:pos].strip()
    return None  # the last box never closes (e.g. a truncated response): no answer


def _hard_config(task: str, seed: int, size: int) -> dict[str, Any]:
    """The keyword arguments of `create_dataset` for `task` at its curriculum's highest level."""
    from reasoning_gym.factory import create_curriculum

    curriculum = create_curriculum(task)
    curriculum.set_global_level(_HARDEST_LEVEL)
    config = curriculum.generate_configuration({"seed": seed, "size": size})
    return dict(vars(config))


def _perturb_number(text: str, rng: random.Random) -> str:
    """`text` (a decimal literal) changed in one of its leading digits, same decimal places."""
    value = Decimal(text)
    places = len(text.split(".")[1]) if "." in text else 0
    if places == 0:
        step = Decimal(rng.randint(1, 3))
    else:
        # Change one of the five leading significant digits, so the answer is visibly wrong
        # rather than wrong in a last digit the scorer's tolerance would forgive.
        top = value.copy_abs().adjusted() if value != 0 else 0
        exponent = rng.randint(max(-places, top - 4), max(-places, top))
        step = Decimal(rng.randint(1, 3)).scaleb(exponent)
    new = value + step if rng.random() < 0.5 else value - step
    if value >= 0 > new:  # counts, radii and angles stay non-negative
        new = value + step
    return f"{new:.{places}f}"


def _wrong_answer(task: str, reference: str, rng: random.Random, attempt: int) -> str:
    """A plausibly wrong answer in the format of `reference`; later attempts are cruder."""
    if task == "binary_alternation" and reference != "-1" and rng.random() < 0.25:
        return "-1"  # the classic mistake: calling a solvable string impossible
    if reference == "-1":
        return str(rng.randint(0, 5))
    numbers = list(_NUMBER.finditer(reference))
    if not numbers:
        return reference + " (unsure)"
    if attempt >= 3:  # off by one unit: beyond any reasoning-gym tolerance
        first = numbers[0]
        bumped = Decimal(first.group()) + 1
        places = len(first.group().split(".")[1]) if "." in first.group() else 0
        return f"{reference[: first.start()]}{bumped:.{places}f}{reference[first.end() :]}"
    # Perturb each number with probability 1/2, and at least one of them.
    chosen = {i for i in range(len(numbers)) if rng.random() < 0.5} or {rng.randrange(len(numbers))}
    out, last = [], 0
    for i, match in enumerate(numbers):
        out.append(reference[last : match.start()])
        out.append(_perturb_number(match.group(), rng) if i in chosen else match.group())
        last = match.end()
    out.append(reference[last:])
    return "".join(out)


class ReasoningGymSuite:
    """The paper's Reasoning Gym benchmark: `per_task` hard problems of each task, interleaved."""

    name = "reasoning_gym"
    sim_prose: bool = True

    def __init__(
        self, per_task: int = 100, seed: int = 42, tasks: Sequence[str] = DEFAULT_TASKS
    ) -> None:
        from reasoning_gym.factory import CURRICULA, DATASETS

        if per_task < 1:
            raise ConfigError(f"per_task: must be >= 1, got {per_task}")
        tasks = tuple(tasks)
        if not tasks:
            raise ConfigError("tasks: at least one reasoning-gym task is needed")
        for task in tasks:
            if task not in DATASETS or task not in CURRICULA:
                raise ConfigError(f"tasks: {task!r} is not a reasoning-gym task with a curriculum")
        if len(set(tasks)) != len(tasks):
            raise ConfigError(f"tasks: duplicate task names in {tasks}")
        self.per_task = per_task
        self.seed = seed
        self.tasks = tasks
        self._items: list[Item] | None = None
        self._scorers: dict[str, Scorer] = {}

    # Workers receive the suite pickled: ship only plain settings, and rebuild the generated items
    # and the reasoning-gym scorers lazily on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return {"per_task": self.per_task, "seed": self.seed, "tasks": self.tasks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.per_task = state["per_task"]
        self.seed = state["seed"]
        self.tasks = tuple(state["tasks"])
        self._items = None
        self._scorers = {}

    def items(self) -> list[Item]:
        """All items, interleaved across tasks so that any prefix is balanced."""
        if self._items is None:
            import reasoning_gym

            per_task: list[list[dict[str, Any]]] = []
            for task in self.tasks:
                config = _hard_config(task, self.seed, self.per_task)
                dataset = reasoning_gym.create_dataset(task, **config)
                per_task.append([dataset[i] for i in range(self.per_task)])
            self._items = [
                Item(
                    id=f"{task}/{index}",
                    question=entries[index]["question"],
                    reference=str(entries[index]["answer"]),
                    meta={"task": task, "entry": entries[index]},
                )
                for index in range(self.per_task)
                for task, entries in zip(self.tasks, per_task, strict=True)
            ]
        return list(self._items)

    def warmup_prompt(self, item: Item) -> str:
        """The paper's Reasoning Gym warm-up prompt."""
        return _templates.warmup_prompt(self.name, item.question)

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The paper's Reasoning Gym adaptive prompt, with the demos in order."""
        return _templates.adaptive_prompt(
            self.name, item.question, [(d.question, d.response) for d in demos]
        )

    def prepare(self) -> None:
        """Build every task's scorer now (verifier workers call this at start-up)."""
        for task in self.tasks:
            self._scorer(task)

    def _scorer(self, task: str) -> Scorer:
        scorer = self._scorers.get(task)
        if scorer is None:
            import reasoning_gym

            # The generating config, not the default one: see the module docstring.
            config = _hard_config(task, self.seed, self.per_task)
            scorer = reasoning_gym.create_dataset(task, **config).score_answer
            self._scorers[task] = scorer
        return scorer

    def _score(self, item: Item, answer: str) -> float:
        return float(self._scorer(item.meta["task"])(answer, item.meta["entry"]))

    def judge(self, item: Item, response: str) -> Verdict:
        """Scores the last `\\boxed{}` answer with the task's own reasoning-gym scorer."""
        answer = extract_last_boxed(response)
        if answer is None:
            return Verdict(0.0, None, "no \\boxed{} answer")
        try:
            score = self._score(item, answer)
        except Exception as exc:  # a scorer bug must cost one verdict, not the run
            return Verdict(0.0, answer, f"scorer raised {type(exc).__name__}: {exc}")
        return Verdict(score, answer)

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final-answer sentence of a response: the reference if `correct`, else a near miss."""
        rng = random.Random(f"{item.id}\x1f{seed}")
        lead = rng.choice(_LEADS)
        if correct:
            return f"{lead} \\boxed{{{item.reference}}}"
        task = str(item.meta["task"])
        answer = item.reference
        for attempt in range(4):
            answer = _wrong_answer(task, item.reference, rng, attempt)
            # A perturbation can land inside the scorer's tolerance; only a miss will do.
            try:
                if answer.strip() != item.reference.strip() and self._score(item, answer) < 1.0:
                    break
            except Exception:
                break  # the scorer cannot read it: judge() scores that 0.0, a miss all the same
        return f"{lead} \\boxed{{{answer}}}"

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the last boxed answer is the reference string: the simulator's cheap check."""
        answer = extract_last_boxed(response)
        return answer is not None and answer == item.reference.strip()
