"""The simulator's answers, per suite: a final answer in the suite's real format, right or wrong
on purpose, and a cheap check of whether a response is right.

They are the simulator's business, not the suite's: a suite judges responses, the simulator writes
them. `answers_for(suite)` finds the implementation of the suite's type (by its class, base classes
included); a suite object that itself has `sim_response` and `sim_is_correct` (a test's fake
suite) answers for itself. A wrong answer is checked against the suite's real verifier where one
could slip through it (a near miss inside a tolerance), so that "wrong" is judged wrong.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from ttc.adapters.sim._code_answers import CodeAnswers
from ttc.adapters.suites import (
    GenericSuite,
    GPQASuite,
    LiveCodeBenchSuite,
    MathSuite,
    MixedSuite,
    ReasoningGymSuite,
    extract_last_boxed,
)
from ttc.adapters.suites._answers import OPTION_LETTERS, choice_letter, parse_number
from ttc.adapters.suites._gpqa import LETTERS
from ttc.engine import ConfigError, Item

__all__ = ["SimAnswers", "answers_for"]

_LEADS = ("The final answer is", "Therefore, the answer is", "So the final answer is")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_DIGITS = re.compile(r"\d+")
_SIGNS = re.compile(r"[+-]")
_CHOICE = re.compile(r"\\text\{\(([A-Z])\)\}")
_TEXT = re.compile(r"\\text\{[^{}]*\}")


@runtime_checkable
class SimAnswers(Protocol):
    """What the simulator needs to answer one suite's questions in its real format."""

    @property
    def sim_prose(self) -> bool:
        """Whether reasoning prose may come before the answer (not when all of it is judged)."""
        ...

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """A final answer to `item`, right iff `correct`; the same for the same seed."""
        ...

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether `response` is right: the simulator's cheap check, no verifier run."""
        ...


def answers_for(suite: object) -> SimAnswers:
    """The simulator's answers for `suite`; ConfigError for a suite the simulator cannot answer."""
    if isinstance(suite, SimAnswers):
        return suite
    for cls in type(suite).__mro__:
        make = _BY_SUITE.get(cls)
        if make is not None:
            return make(suite)
    raise ConfigError(f"sim: cannot answer the questions of a {type(suite).__name__}")


def _lead(item: Item, seed: int, leads: tuple[str, ...] = _LEADS) -> tuple[random.Random, str]:
    """The answer's random stream, seeded by (item, seed), and its opening words."""
    rng = random.Random(f"{item.id}\x1f{seed}")
    return rng, rng.choice(leads)


class _Boxed:
    """Answers in a closing `\\boxed{}`; right iff the box holds the reference string."""

    sim_prose = True

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the last boxed answer is the reference string: the simulator's cheap check."""
        answer = extract_last_boxed(response)
        return answer is not None and answer == item.reference.strip()


# --- Reasoning Gym ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReasoningGymAnswers(_Boxed):
    """Reasoning Gym: the reference, or a near miss the task's own scorer rejects."""

    suite: ReasoningGymSuite
    sim_prose = True

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final-answer sentence of a response: the reference if `correct`, else a near miss."""
        rng, lead = _lead(item, seed)
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

    def _score(self, item: Item, answer: str) -> float:
        return self.suite.score(item, answer)


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


# --- MATH-500 and Minerva --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MathAnswers(_Boxed):
    """MATH-500 and Minerva: the reference, or a miss math-verify rejects."""

    suite: MathSuite
    # Few distinct candidates per item, and some take math-verify its whole timeout.
    _accepts: dict[tuple[str, str], bool] = field(default_factory=dict, init=False, repr=False)
    sim_prose = True

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final-answer sentence of a response: the reference if `correct`, else a miss."""
        rng, lead = _lead(item, seed)
        if correct:
            return f"{lead} \\boxed{{{item.reference}}}"
        answer = ""
        for answer in _wrong_answers(item.reference, rng):
            if answer.strip() != item.reference.strip() and not self._accepted(item, answer):
                break
        return f"{lead} \\boxed{{{answer}}}"

    def _accepted(self, item: Item, answer: str) -> bool:
        accepted = self._accepts.get((item.id, answer))
        if accepted is None:
            # Off the main thread (an event loop in a thread) the candidates are checked without
            # timeouts: they are small edits of a reference that parses.
            try:
                accepted, _ = self.suite.check(item, answer)
            except Exception:
                accepted = False  # judge() scores an unreadable answer 0.0: a miss all the same
            self._accepts[item.id, answer] = accepted
        return accepted


def _perturb_digits(reference: str, rng: random.Random) -> str:
    """`reference` with one digit of one of its numbers moved by 1 or 2."""
    runs = list(_DIGITS.finditer(reference))
    run = rng.choice(runs)
    pos = run.start() + rng.randrange(len(run.group()))
    digit = int(reference[pos])
    # No new leading zero, and no 0 for a lone digit (which may be a denominator).
    lowest = 1 if pos == run.start() and (len(run.group()) > 1 or digit != 0) else 0
    choices = [d for d in (digit - 2, digit - 1, digit + 1, digit + 2) if lowest <= d <= 9]
    return f"{reference[:pos]}{rng.choice(choices)}{reference[pos + 1 :]}"


def _wrong_answers(reference: str, rng: random.Random) -> Iterator[str]:
    """Plausibly wrong answers in the style of `reference`, then cruder ones."""
    choice = _CHOICE.fullmatch(reference)
    if choice is not None:
        others = [c for c in "ABCDE" if c != choice.group(1)]
        rng.shuffle(others)
        for letter in others:
            yield f"\\text{{({letter})}}"
    elif _TEXT.fullmatch(reference) is None and _DIGITS.search(reference):
        for _ in range(3):
            yield _perturb_digits(reference, rng)
    elif signs := list(_SIGNS.finditer(reference)):
        for _ in range(2):  # a sign error, the symbolic near miss
            at = rng.choice(signs).start()
            flipped = "+" if reference[at] == "-" else "-"
            yield f"{reference[:at]}{flipped}{reference[at + 1 :]}"
    if _TEXT.fullmatch(reference) is None:
        # Beyond math-verify's rounding even for tiny references, and fine for symbolic ones.
        yield f"{reference} + 1"
    yield "\\text{none}"
    yield "\\text{no answer}"


# --- GPQA ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GPQAAnswers:
    """GPQA: the reference letter, or another of A-D."""

    suite: GPQASuite
    sim_prose = True

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final-answer sentence: the reference letter if `correct`, else another letter."""
        leads = ("The final answer is", "Therefore, the answer is", "So the correct option is")
        rng, lead = _lead(item, seed, leads)
        letter = item.reference
        if not correct:
            letter = rng.choice([x for x in LETTERS if x != item.reference])
        return f"{lead} \\boxed{{{letter}}}"

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the last boxed answer is the reference letter."""
        answer = extract_last_boxed(response)
        return answer is not None and choice_letter(answer, LETTERS) == item.reference


# --- your own test set -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GenericAnswers:
    """A custom suite: the reference, or an answer its configured verifier rejects, written where
    its `extract` setting reads it."""

    suite: GenericSuite

    @property
    def sim_prose(self) -> bool:
        """Whether the simulator may put prose before the answer: not when all of it is judged."""
        return self.suite.config.extract != "full"

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final answer: the reference if `correct`, else one the verifier rejects."""
        rng = random.Random(f"{item.id}\x1f{seed}")
        if correct:
            return self._render(item.reference, rng)
        candidates = self._wrong_candidates(item, rng)
        for candidate in candidates:
            text = self._render(candidate, rng)
            if candidate.strip() != item.reference and self.suite.judge(item, text).score < 1.0:
                return text
        return self._render(candidates[-1], rng)

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the extracted answer is the reference: the simulator's cheap check."""
        answer = self.suite.extract(response)
        if answer is None:
            return False
        if self.suite.config.verifier == "choice":
            return choice_letter(answer, OPTION_LETTERS) == item.reference
        return answer == item.reference

    def _render(self, answer: str, rng: random.Random) -> str:
        lead = rng.choice(("The final answer is", "Therefore, the answer is", "So the answer is"))
        if self.suite.config.extract == "boxed":
            return f"{lead} \\boxed{{{answer}}}"
        if self.suite.config.extract == "last_line":
            return f"{lead}:\n{answer}"
        return answer

    def _wrong_candidates(self, item: Item, rng: random.Random) -> list[str]:
        ref = item.reference
        kind = self.suite.config.verifier
        if kind == "choice":
            top = max(4, OPTION_LETTERS.index(ref) + 1)
            letters = [c for c in OPTION_LETTERS[:top] if c != ref]
            rng.shuffle(letters)
            return letters
        value = parse_number(ref)
        near: list[str] = []
        if value is not None:
            scale = max(abs(value), Fraction(1))
            near = [_format_number(value + rng.choice((-1, 1)) * scale * rng.randint(1, 9))]
            near.append(_format_number(value + 2 * scale + 1))
        if kind == "exact":
            return [f"{ref} (x)", "no answer"]
        if kind == "numeric":
            return [*near, "no answer"]
        if kind == "math":
            return [*near, f"{ref} + 1", f"{ref} (x)", "no answer"]
        return [f"{ref} (x)", *near, "no answer", "0", ""]


class MixedAnswers:
    """A mixed suite's answers: each item answered by its own source's answers. Without filler
    prose, which a program (LiveCodeBench) cannot have."""

    sim_prose = False

    def __init__(self, suite: MixedSuite) -> None:
        self.suite = suite
        self.by_source = {name: answers_for(sub) for name, sub in suite.suites.items()}

    def _of(self, item: Item) -> tuple[SimAnswers, Item]:
        _, inner = self.suite.source_of(item)
        return self.by_source[str(item.meta["source"])], inner

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The source's answer to the item, right iff `correct`."""
        answers, inner = self._of(item)
        return answers.sim_response(inner, correct, seed)

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """The source's cheap check."""
        answers, inner = self._of(item)
        return answers.sim_is_correct(inner, response)


def _format_number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


# One line per suite type: the simulator answers the suites listed here (and their subclasses).
_BY_SUITE: dict[type, Callable[[Any], SimAnswers]] = {
    ReasoningGymSuite: ReasoningGymAnswers,
    MathSuite: MathAnswers,
    GPQASuite: GPQAAnswers,
    GenericSuite: GenericAnswers,
    LiveCodeBenchSuite: CodeAnswers,
    MixedSuite: MixedAnswers,
}
