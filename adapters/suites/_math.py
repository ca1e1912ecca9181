"""The paper's MATH-500 and MinervaMath suites: public JSONL files, judged by math-verify.

Files (see the READMEs next to them), or the same records from the Hugging Face Hub (`_hub`):

- MATH-500: one object per line with `problem`, `solution`, `answer`, `subject`, `level`,
  `unique_id`; the reference is `answer`, the id `unique_id`.
- MinervaMath: one object per line with `problem`, `solution`, `type`, `idx`; the reference is
  the content of the last `\\boxed{}` of `solution`, the id `str(idx)`.

Judging: the answer is the content of the last `\\boxed{}` of a response. The reference and the
answer are each parsed by math-verify as `\\boxed{<text>}`, with its LaTeX extractor only, and
compared with `verify(gold, answer)`. math-verify's timeouts are signal-based, so they are on only
in a main thread (ttc judges in worker processes' main threads; in any other thread math-verify
runs without them). `\\boxed{}` rather than `$...$` because one Minerva reference contains `$ $`
itself. Before parsing, both sides are rewritten where math-verify would misread them:
e-notation (`4.5e33`, `1.77e-6`, as 58 Minerva references are written) becomes
`4.5 \\times 10^{33}`, since in LaTeX `e` is Euler's number and `4.5e33` would mean 4.5·e·33; and
Python spellings (`-1./3`, `np.arcsin(10/13)`) become LaTeX.

Numbers: math-verify compares numbers to an *absolute* precision (a float is rounded to six
decimal places; other differences below about 1e-16 count as zero), so on its own it takes
`0.0000004`, or even `0.000000000001`, for Minerva's `3.89e-10` (25 Minerva references are
below 1e-2 in size). So when both sides parse as a single real number (digits, a sign,
`\\times 10^{n}`, fractions; units dropped; `x = ` before the answer allowed), the answer must
also agree with the reference to six significant digits: a relative difference of at most 5e-6
(`_REL_TOL`), the scale-free counterpart of math-verify's six decimal places. An answer must pass
both checks, so no answer math-verify rejects is accepted, and against references of size 0.2 or
more the scores are math-verify's own. The precision the reference is given to is no tolerance:
math-verify grants none at ordinary magnitudes either (`1.62` is wrong for Minerva's `1.6`), and
a one-digit reference such as `1e-8` would then take `1.4e-8`. The references math-verify
misreads are listed in tests/adapters/suites/test_math.py.

Self-consistency (the `sc` method) groups extracted answers by `answer_key`, a cheap canonical
form (no math-verify): spaces, `\\left`/`\\right` and a trailing period dropped, `\\dfrac` and
`\\tfrac` read as `\\frac`, and numbers written as integers, decimals or fractions (`1/2`,
`\\frac{1}{2}`, `0.5`) keyed by their value rounded to 1e-9.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from ttc.adapters.suites._answers import extract_last_boxed
from ttc.adapters.suites._base import TemplatedSuite
from ttc.adapters.suites._records import Table, check_unique
from ttc.engine import ConfigError, DataError, Item, Verdict
from ttc.engine._util import read_jsonl

__all__ = ["KINDS", "MathSuite"]

KINDS: tuple[str, ...] = ("math500", "minerva")
"""The suite names this module serves."""

# math-verify's own limits, per parse and per comparison (signal.alarm, whole seconds).
_TIMEOUT_S = 5
# How far an answer may be from a numeric reference, relative to it: six significant digits.
_REL_TOL = 5e-6
# A decimal literal in e-notation, not part of a longer word or number.
_SCI = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?|\.\d+)[eE]([+-]?\d+)(?![\w.])")
# Python spellings in Minerva references: `-1./3`, `np.arcsin(10/13)`.
_BARE_POINT = re.compile(r"(\d)\.(?=\s*(?:[/)},]|$))")
_NUMPY_CALL = re.compile(r"\bnp\.([a-z]+)\(")
_FIELDS: dict[str, dict[str, type]] = {
    "math500": {
        "problem": str,
        "answer": str,
        "subject": str,
        "level": int,
        "unique_id": str,
    },
    "minerva": {"problem": str, "solution": str, "type": str, "idx": int},
}


def _normalise(text: str) -> str:
    """`text` as LaTeX math-verify reads as meant: e-notation and Python spellings rewritten."""
    text = _SCI.sub(lambda m: f"{m.group(1)} \\times 10^{{{m.group(2)}}}", text)
    text = _BARE_POINT.sub(r"\1", text)
    return _NUMPY_CALL.sub(r"\\\1(", text)


_SPACE = re.compile(r"\s+|\\[,;:! ]")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![a-zA-Z])")
_DFRAC = re.compile(r"\\[dt]frac(?![a-zA-Z])")
_DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)"
_AS_NUMBER = re.compile(
    rf"(?P<sign>[+-]?)(?:(?P<n>{_DECIMAL})|(?P<a>{_DECIMAL})/(?P<b>{_DECIMAL})"
    rf"|\\frac\{{(?P<fa>{_DECIMAL})\}}\{{(?P<fb>{_DECIMAL})\}})"
)


def answer_key(answer: str) -> str:
    """Which extracted answers self-consistency counts as one: a canonical form of `answer`,
    or for a plain number, fraction or decimal its value (to 1e-9)."""
    text = _SPACE.sub("", answer)
    text = _LEFT_RIGHT.sub("", text)
    text = _DFRAC.sub(r"\\frac", text).rstrip(".")
    value = _number(text)
    return text if value is None else f"={round(value, 9)}"


def _number(text: str) -> Fraction | None:
    """The exact value of an integer, a decimal or a fraction of them, else None."""
    match = _AS_NUMBER.fullmatch(text)
    if match is None:
        return None
    if match["n"] is not None:
        value = Fraction(match["n"])
    else:
        top, bottom = (
            (match["a"], match["b"]) if match["a"] is not None else (match["fa"], match["fb"])
        )
        if Fraction(bottom) == 0:
            return None
        value = Fraction(top) / Fraction(bottom)
    return -value if match["sign"] == "-" else value


def _timeouts() -> bool:
    """Whether math-verify may use its timeouts here: signal.alarm works in a main thread only.

    ttc calls `judge` in its verifier processes' main threads; a caller that judges from a thread
    of its own gets no timeouts rather than a ValueError, and a score of 0, for every answer.
    """
    return threading.current_thread() is threading.main_thread()


def _real_number(expr: object) -> Any:
    """The value of a parsed answer that is one finite real number (a sympy Float), else None.

    A number is digits, a sign and arithmetic on them (`3.89 \\times 10^{-10}`, `\\frac{1}{3}`);
    `x = <number>` counts as the number, as math-verify compares it. Anything with a symbol, a
    function, a percentage (an UnevaluatedExpr) or several values is not a number.
    """
    import sympy  # type: ignore[import-untyped]  # no stubs, and not in pyproject's overrides

    while True:
        if isinstance(expr, sympy.Eq):
            expr = expr.rhs
        elif isinstance(expr, sympy.And):  # a chain x = y = 3, in the order written
            args = getattr(expr, "_unsorted_args", None) or expr.args
            expr = args[-1]
        else:
            break
    if not isinstance(expr, sympy.Expr) or not _is_arithmetic(expr):
        return None
    value = expr.evalf(30)
    if not isinstance(value, sympy.Float) or not value.is_finite:
        return None
    return value


def _is_arithmetic(expr: Any) -> bool:
    """Whether a sympy expression is numbers and +, ·, ^ only (sympy's own type flags)."""
    if expr.is_Number:
        return True
    if expr.is_Add or expr.is_Mul or expr.is_Pow:
        return all(_is_arithmetic(arg) for arg in expr.args)
    return False


def _numbers_agree(gold: Sequence[Any], answer: Sequence[Any]) -> bool:
    """False if both parses are single real numbers further apart than `_REL_TOL` of the gold."""
    reference = _real_number(gold[0]) if gold else None
    value = _real_number(answer[0]) if answer else None
    if reference is None or value is None:
        return True
    return bool(abs(value - reference) <= _REL_TOL * abs(reference))


def _field(path: Path | Table, lineno: int, record: dict[str, Any], name: str, kind: type) -> Any:
    """The field `name` of a record, checked to be of `kind` (and not bool for int)."""
    if name not in record:
        raise DataError(f"{path}:{lineno}: field {name!r}: missing")
    value = record[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DataError(
            f"{path}:{lineno}: field {name!r}: expected {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _load(kind: str, path: Path | Table) -> list[Item]:
    """The items of a MATH-500 or Minerva file or table; a bad line is a DataError naming it."""
    records: Iterable[tuple[int, dict[str, Any]]] = (
        path.records() if isinstance(path, Table) else read_jsonl(path)
    )
    items: list[Item] = []
    seen: dict[str, int] = {}
    for lineno, record in records:
        values = {
            name: _field(path, lineno, record, name, typ) for name, typ in _FIELDS[kind].items()
        }
        if not values["problem"].strip():
            raise DataError(f"{path}:{lineno}: field 'problem': empty")
        if kind == "math500":
            id_field, item_id = "unique_id", values["unique_id"]
            reference, ref_field = values["answer"].strip(), "answer"
            meta = {"subject": values["subject"], "level": values["level"]}
        else:
            id_field, item_id = "idx", str(values["idx"])
            boxed = extract_last_boxed(values["solution"])
            if boxed is None:
                raise DataError(f"{path}:{lineno}: field 'solution': no closed \\boxed{{}} answer")
            reference, ref_field = boxed, "solution"
            meta = {"type": values["type"]}
        if not reference:
            raise DataError(f"{path}:{lineno}: field {ref_field!r}: empty reference answer")
        if not item_id.strip():
            raise DataError(f"{path}:{lineno}: field {id_field!r}: empty")
        check_unique(seen, item_id, path, lineno, id_field)
        items.append(Item(item_id, values["problem"], reference, meta))
    if not items:
        raise DataError(f"{path}: no items")
    return items


class MathSuite(TemplatedSuite):
    """MATH-500 (`kind="math500"`) or MinervaMath (`kind="minerva"`), loaded from `path` (a
    file, or the rows of a Hub dataset)."""

    def __init__(self, kind: str, path: str | Path | Table) -> None:
        if kind not in KINDS:
            raise ConfigError(f"--suite: {kind!r} is not a math suite; expected one of {KINDS}")
        self.name = kind
        # The file, or None for a Hub dataset's rows; `source`: where the items came from, as
        # the run records it.
        self.path = None if isinstance(path, Table) else Path(path)
        self.source: dict[str, Any] = (
            dict(path.source) if isinstance(path, Table) else {"file": str(self.path)}
        )
        # Eager, so a bad file fails before any request is sent.
        self._items = _load(kind, path if isinstance(path, Table) else Path(path))
        self._gold: dict[str, list[Any]] = {}

    # Workers receive the suite pickled: ship the settings and the items as plain data, and
    # rebuild the parsed-reference cache on the other side.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "path": None if self.path is None else str(self.path),
            "source": self.source,
            "items": [(i.id, i.question, i.reference, dict(i.meta)) for i in self._items],
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name = state["kind"]
        self.path = None if state["path"] is None else Path(state["path"])
        self.source = state["source"]
        self._items = [Item(*fields) for fields in state["items"]]
        self._gold = {}

    def items(self) -> list[Item]:
        """All items, in file order."""
        return list(self._items)

    def prepare(self) -> None:
        """Import math-verify and run one parse and comparison (verifier workers' start-up)."""
        from math_verify import parse, verify

        verify(parse("\\boxed{\\frac{1}{2}}"), parse("\\boxed{0.5}"))

    def _parse(self, text: str, timeouts: bool) -> list[Any]:
        from math_verify import LatexExtractionConfig, parse

        # LaTeX only: when the LaTeX parser fails, math-verify's plain-expression extractor would
        # pick a number out of the text (Minerva 261 would read as 2), so fall back to the string.
        return list(
            parse(
                f"\\boxed{{{_normalise(text)}}}",
                extraction_config=[LatexExtractionConfig()],
                parsing_timeout=_TIMEOUT_S if timeouts else 0,
            )
        )

    def _check(self, item: Item, answer: str, timeouts: bool) -> tuple[bool, str]:
        """Whether math-verify accepts `answer` for `item`, and why not."""
        from math_verify import verify

        gold = self._gold.get(item.id)
        if gold is None:
            gold = self._parse(item.reference, timeouts)
            if not gold:  # a timeout gives []: try again next time rather than cache it
                return False, "math-verify could not parse the reference"
            self._gold[item.id] = gold
        parsed = self._parse(answer, timeouts)
        if not parsed:
            return False, "math-verify could not parse the answer"
        timeout = _TIMEOUT_S if timeouts else None
        if not verify(gold, parsed, timeout_seconds=timeout):
            return False, "not equivalent to the reference"
        if not _numbers_agree(gold, parsed):
            return False, "not the reference to six significant digits"
        return True, ""

    def check(self, item: Item, answer: str) -> tuple[bool, str]:
        """Whether math-verify accepts the extracted `answer` for `item`, and why not (it may
        raise); with math-verify's timeouts in a main thread only."""
        return self._check(item, answer, _timeouts())

    def judge(self, item: Item, response: str) -> Verdict:
        """1.0 if math-verify finds the last `\\boxed{}` answer equivalent to the reference."""
        answer = extract_last_boxed(response)
        if answer is None:
            return Verdict(0.0, None, "no \\boxed{} answer")
        try:
            ok, why = self._check(item, answer, _timeouts())
        except Exception as exc:  # a verifier bug must cost one verdict, not the run
            return Verdict(0.0, answer, f"math-verify raised {type(exc).__name__}: {exc}")
        return Verdict(1.0 if ok else 0.0, answer, why)

    @staticmethod
    def answer_key(answer: str) -> str:
        """Self-consistency's key of an extracted answer (see the module's docstring)."""
        return answer_key(answer)
