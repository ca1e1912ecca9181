"""Your own test set: questions and reference answers from a JSONL or CSV file, and a verifier.

A `GenericConfig` (Python, or a JSON / TOML file read by `GenericConfig.from_file`) names the
columns, the verifier and, optionally, the prompt templates:

    name = "capitals"                  # default "custom"
    question_field = "question"        # required
    answer_field = "answer"            # required
    id_field = "id"                    # default: the record's line number
    verifier = "exact"                 # required: exact | numeric | math | choice | module:function
    extract = "boxed"                  # boxed (last \\boxed{}) | last_line | full
    casefold = false                   # exact: compare case-insensitively
    tolerance = 1e-6                   # numeric: allowed difference ...
    tolerance_mode = "relative"        # ... relative to the reference, or "absolute"
    warmup_template = "warmup.txt"     # {question}
    adaptive_template = "adaptive.txt" # {examples} and {question}
    example_template = "Q: {question}\\nA: {response}"  # one demo; also {n}, its number
    example_separator = "\\n\\n"

A template value that contains its placeholder ({question}, or {examples} for the adaptive one)
is the template itself; anything else is a text file, relative to the config file. Templates
substitute exactly their named placeholders: other braces are literal, so `\\boxed{}` needs no
escaping. Without templates the prompts are the paper's MATH-500 ones.

Verifiers: `exact` compares the answer with the reference as text, after stripping them and
unwrapping `\\text{...}`, `\\textbf{...}`, `\\mathrm{...}` and the like around all of either.
`numeric` reads both as exact numbers ("1,234.5", "3/4", "\\frac{3}{4}", "1e-3"; exponents up to
1000 in size) and allows `tolerance`. `math` parses both with math-verify the way the MATH-500
and Minerva suites do (ttc.adapters.suites._math): e-notation read as such (`1.5e-3` is 0.0015, not
1.5·e−3), and two single numbers must also agree to six significant digits. `choice` reads one
option letter.

A `module:function` verifier is called as `function(response, reference)` with the whole
response and returns a bool or a score in [0, 1] (a Python or numpy bool, an int, float, Fraction
or Decimal). The module is imported as Python imports any other; for a config file, its folder
is appended to `sys.path` first (once, at the end, so it never hides an installed module), so a
`my_checks.py` next to the config needs no PYTHONPATH; verifier processes inherit `sys.path`.
Data files may be gzipped (`.jsonl.gz`, `.csv.gz`); they are read by `_records`, as GPQA's are, and
the config by `_generic_config`.
"""

from __future__ import annotations

import numbers
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from ttc.adapters.suites._answers import (
    OPTION_LETTERS,
    choice_letter,
    extract_last_boxed,
    parse_number,
    short,
    unwrap,
)
from ttc.adapters.suites._generic_config import (
    VERIFIERS,
    GenericConfig,
    import_callable,
    read_template,
)
from ttc.adapters.suites._math import _normalise, _numbers_agree
from ttc.adapters.suites._records import check_unique, read_records, record_text
from ttc.engine import DataError, Demo, Item, Suite, Verdict

__all__ = ["GenericConfig", "GenericSuite"]

# The paper's MATH-500 templates (tests check them against _templates.py).
_WARMUP = (
    "Reason step by step and put the final answer in \\boxed{}.\nProblem:\n{question}\n\nSolution:"
)
_ADAPTIVE = (
    "{examples}\n\n---\n\nNow solve the following. Put the final answer in \\boxed{}.\n"
    "Problem:\n{question}\n\nSolution:"
)
_EXAMPLE = "Example {n}\nProblem:\n{question}\n\nSolution:\n{response}"

_PLACEHOLDER = re.compile(r"\{(question|examples|response|n)\}")


def _as_score(value: object) -> float | None:
    """A verifier's result as a score: True/False, or a real number in [0, 1]; else None.

    numpy's bool (what `np.isclose` returns) is not a `numbers.Number`, and Decimal is not a
    `numbers.Real`: both are accepted by name, so numpy is never imported here.
    """
    kind = type(value)
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in _NUMPY_BOOLS):
        return 1.0 if value else 0.0
    if isinstance(value, numbers.Real | Decimal):
        try:
            score = float(value)
        except (TypeError, ValueError, OverflowError):
            return None
        if 0.0 <= score <= 1.0:  # False for NaN
            return score
    return None


_NUMPY_BOOLS = ("bool", "bool_")  # numpy 2 and numpy 1 spell it differently


def _math_timeout() -> int | None:
    # math-verify's timeouts use signal.alarm, which only the main thread may set.
    return 5 if threading.current_thread() is threading.main_thread() else None


def _fill(template: str, values: Mapping[str, str]) -> str:
    # One pass, so a question containing "{examples}" is never substituted into.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


# --- the suite ---------------------------------------------------------------------------------


class GenericSuite(Suite):
    """A user's test set read from `path` (JSONL or CSV, optionally .gz) as `config` says."""

    name: str = "custom"

    def __init__(self, path: str | Path, config: GenericConfig) -> None:
        self.path = Path(path)
        self.config = config
        self.name = config.name
        self._warmup = read_template("warmup_template", config.warmup_template, _WARMUP)
        self._adaptive = read_template("adaptive_template", config.adaptive_template, _ADAPTIVE)
        self._example = read_template("example_template", config.example_template, _EXAMPLE)
        self._fn: Callable[[str, str], object] | None = None
        self._gold: dict[str, list[Any]] = {}
        self.prepare()
        self._items: list[Item] | None = self._load()

    # Workers get the settings and template texts; the items, the imported callable and the
    # math-verify cache are rebuilt on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "config": self.config,
            "templates": (self._warmup, self._adaptive, self._example),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = Path(state["path"])
        self.config = state["config"]
        self.name = self.config.name
        self._warmup, self._adaptive, self._example = state["templates"]
        self._fn = None
        self._gold = {}
        self._items = None

    @property
    def _is_callable(self) -> bool:
        return self.config.verifier not in VERIFIERS

    def prepare(self) -> None:
        """Import a `module:function` verifier (verifier workers call this at start-up)."""
        if self._is_callable and self._fn is None:
            self._fn = import_callable(self.config.verifier, self.config.config_dir)

    def _load(self) -> list[Item]:
        cfg = self.config
        items: list[Item] = []
        first_line: dict[str, int] = {}
        for line, record in read_records(self.path):
            question = record_text(self.path, line, record, cfg.question_field)
            reference = record_text(self.path, line, record, cfg.answer_field)
            item_id = str(line)
            if cfg.id_field is not None:
                item_id = record_text(self.path, line, record, cfg.id_field)
            check_unique(first_line, item_id, self.path, line, cfg.id_field or "id")
            if cfg.verifier == "numeric" and parse_number(reference) is None:
                raise DataError(f"{self.path}:{line}: field {cfg.answer_field!r}: not a number")
            if cfg.verifier == "choice":
                letter = choice_letter(reference, OPTION_LETTERS)
                if letter is None:
                    raise DataError(
                        f"{self.path}:{line}: field {cfg.answer_field!r}: not an option letter"
                    )
                reference = letter
            items.append(Item(item_id, question, reference, {"line": line}))
        if not items:
            raise DataError(f"{self.path}: no records")
        return items

    def items(self) -> list[Item]:
        """Every record, in file order."""
        if self._items is None:
            self._items = self._load()
        return list(self._items)

    def warmup_prompt(self, item: Item) -> str:
        """The warm-up template with the question."""
        return _fill(self._warmup, {"question": item.question})

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The adaptive template with the demos, each through the example template, in order."""
        if not demos:
            raise ValueError("adaptive_prompt needs at least one demonstration")
        examples = self.config.example_separator.join(
            _fill(self._example, {"n": str(n), "question": d.question, "response": d.response})
            for n, d in enumerate(demos, start=1)
        )
        return _fill(self._adaptive, {"examples": examples, "question": item.question})

    def extract(self, response: str) -> str | None:
        """The answer in `response`, read as the config's `extract` says; None if there is none."""
        mode = self.config.extract
        if mode == "boxed":
            return extract_last_boxed(response)
        if mode == "last_line":
            lines = [line.strip() for line in response.splitlines() if line.strip()]
            return lines[-1] if lines else None
        return response.strip() or None

    def judge(self, item: Item, response: str) -> Verdict:
        """Scores the extracted answer with the configured verifier."""
        answer = self.extract(response)
        if self._is_callable:
            return self._judge_callable(item, response, answer)
        if answer is None:
            return Verdict(0.0, None, f"no answer ({self.config.extract} extraction)")
        kind = self.config.verifier
        if kind == "choice":
            letter = choice_letter(answer, OPTION_LETTERS)
            if letter is None:
                return Verdict(0.0, answer, "not a single option letter")
            return Verdict(float(letter == item.reference), letter)
        if kind == "numeric":
            return self._judge_numeric(item, answer)
        if kind == "math":
            return self._judge_math(item, answer)
        a, b = unwrap(answer), unwrap(item.reference)
        if self.config.casefold:
            a, b = a.casefold(), b.casefold()
        if a == b:
            return Verdict(1.0, answer)
        return Verdict(0.0, answer, f"expected {short(item.reference)}, got {short(answer)}")

    def _judge_numeric(self, item: Item, answer: str) -> Verdict:
        value, reference = parse_number(answer), parse_number(item.reference)
        if value is None:
            return Verdict(0.0, answer, "not a number")
        if reference is None:  # only for items not loaded by this suite
            return Verdict(0.0, answer, "the reference is not a number")
        allowed = Fraction(str(self.config.tolerance))  # 0.3 means 3/10, not the float
        if self.config.tolerance_mode == "relative":
            allowed *= abs(reference)
        if abs(value - reference) <= allowed:
            return Verdict(1.0, answer)
        return Verdict(0.0, answer, f"expected {short(item.reference)}, got {short(answer)}")

    def _judge_math(self, item: Item, answer: str) -> Verdict:
        from math_verify import parse, verify

        timeout = _math_timeout()
        gold = self._gold.get(item.reference)
        if gold is None:
            # e-notation and Python spellings rewritten as the MATH-500 suite does.
            gold = parse(f"${_normalise(item.reference)}$", parsing_timeout=timeout)
            if not gold:  # a timeout gives []: try again next time rather than cache it
                return Verdict(0.0, answer, "math-verify cannot parse the reference")
            self._gold[item.reference] = gold
        whole = self.config.extract == "full"
        # A boxed or last-line answer is bare math; a full response is text to search.
        pred = parse(answer, parsing_timeout=timeout) if whole else []
        if not pred:
            pred = parse(f"${_normalise(answer)}$", parsing_timeout=timeout)
        if not pred:
            return Verdict(0.0, answer, "math-verify cannot parse the answer")
        if not verify(gold, pred, timeout_seconds=timeout):
            return Verdict(0.0, answer, "not equivalent to the reference")
        if not _numbers_agree(gold, pred):
            return Verdict(0.0, answer, "not the reference to six significant digits")
        return Verdict(1.0, answer)

    def _judge_callable(self, item: Item, response: str, answer: str | None) -> Verdict:
        if self._fn is None:
            self.prepare()
        assert self._fn is not None
        try:
            value = self._fn(response, item.reference)
        except Exception as exc:  # a verifier bug must cost one verdict, not the run
            name = self.config.verifier
            return Verdict(0.0, answer, f"{name} raised {type(exc).__name__}: {exc}")
        score = _as_score(value)
        if score is None:
            detail = f"{self.config.verifier} returned {value!r}, not a bool or a score in [0, 1]"
            return Verdict(0.0, answer, detail)
        return Verdict(score, answer)
