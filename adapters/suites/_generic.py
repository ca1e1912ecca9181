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
Data files may be gzipped (`.jsonl.gz`, `.csv.gz`); `read_records` and `record_text` also serve
the GPQA loader.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import importlib
import io
import json
import math
import numbers
import random
import re
import sys
import threading
import tomllib
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

from ttc.adapters.suites._math import _normalise, _numbers_agree
from ttc.adapters.suites._reasoning_gym import extract_last_boxed
from ttc.engine import ConfigError, DataError, Demo, Item, Verdict

__all__ = [
    "GenericConfig",
    "GenericSuite",
    "choice_letter",
    "parse_number",
    "read_records",
    "record_text",
]

VERIFIERS = ("exact", "numeric", "math", "choice")
EXTRACTS = ("boxed", "last_line", "full")

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
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?")
# Fraction("1e-10000000") builds a ten-million-digit integer: larger exponents are not numbers.
_MAX_EXPONENT = 1000
_THOUSANDS = re.compile(r"([+-]?\d{1,3}(?:,\d{3})+)(\.\d+)?")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}")
_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mathit)\s*\{")
_LETTER = re.compile(r"\(?\s*([A-Za-z])\s*\)?\.?")
_LEADS = ("The final answer is", "Therefore, the answer is", "So the answer is")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --- reading records -------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    """The whole file as text. Test sets are small; decoding at once gives exact error lines."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    if path.name.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: not a readable gzip file ({type(exc).__name__})") from None
    try:
        # utf-8-sig: spreadsheets often begin their CSV files with a byte-order mark.
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}:{line}: not UTF-8 text") from None


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) for each record of a JSONL or CSV file, optionally gzipped.

    A CSV record's line is the one its row starts on (the header is line 1). DataError names the
    file and line; it never quotes the data, which may be secret (GPQA).
    """
    base = path.name.removesuffix(".gz")
    kind = (
        "csv" if base.endswith(".csv") else "jsonl" if base.endswith((".jsonl", ".ndjson")) else ""
    )
    if not kind:
        raise DataError(f"{path}: unknown format; expected .jsonl or .csv, optionally .gz")
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    text = _read_text(path)
    if kind == "csv":
        yield from _csv_records(path, io.StringIO(text, newline=""))
        return
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and other line breaks.
    for line, chunk in enumerate(text.split("\n"), start=1):
        if chunk.strip():
            yield line, _json_record(path, line, chunk)


def _json_record(path: Path, line: int, text: str) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        # exc.msg never quotes the document, and `from None` drops the exception that holds it.
        raise DataError(f"{path}:{line}: malformed JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(record, dict):
        raise DataError(f"{path}:{line}: expected a JSON object, got {type(record).__name__}")
    return record


def _csv_records(path: Path, f: IO[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(f, strict=True)
    header: list[str] | None = None
    start = 1
    try:
        for row in reader:
            if header is None:
                header = [name.strip() for name in row]
                dupes = sorted({name for name in header if header.count(name) > 1})
                if dupes:
                    raise DataError(f"{path}:1: field {dupes[0]!r}: duplicate column in the header")
            elif row:  # blank lines come back as []
                if len(row) != len(header):
                    raise DataError(
                        f"{path}:{start}: malformed CSV row: {len(row)} fields, "
                        f"the header has {len(header)}"
                    )
                yield start, dict(zip(header, row, strict=True))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}:{start}: malformed CSV row ({exc})") from None


def record_text(path: Path, line: int, record: Mapping[str, Any], field: str) -> str:
    """The stripped, non-empty text of `record[field]` (numbers become text), else DataError."""
    if field not in record:
        raise DataError(f"{path}:{line}: field {field!r}: missing")
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, str | int | float | type(None)):
        kind = type(value).__name__
        raise DataError(f"{path}:{line}: field {field!r}: expected text or a number, got {kind}")
    text = "" if value is None else str(value).strip()
    if not text:
        raise DataError(f"{path}:{line}: field {field!r}: empty")
    return text


# --- answers -----------------------------------------------------------------------------------


def parse_number(text: str) -> Fraction | None:
    """The exact value of "42", "-1,234.5", "3/4", "\\frac{3}{4}", "1e-3" or "$2.50", else None."""
    s = text.replace("\\$", "").replace("\\!", "").replace("{,}", ",").replace("−", "-")
    s = s.strip().strip("$").strip()
    if (frac := _FRAC.fullmatch(s)) is not None:
        num, den = parse_number(frac.group(2)), parse_number(frac.group(3))
        if num is None or den is None or den == 0:
            return None
        return -num / den if frac.group(1) == "-" else num / den
    if s.count("/") == 1:
        num_text, den_text = s.split("/")
        num, den = parse_number(num_text), parse_number(den_text)
        return None if num is None or den is None or den == 0 else num / den
    if (grouped := _THOUSANDS.fullmatch(s)) is not None:
        s = grouped.group(1).replace(",", "") + (grouped.group(2) or "")
    decimal = _DECIMAL.fullmatch(s)
    if decimal is None:
        return None
    exponent = decimal.group(1)
    # Checked by length first: int() of a long digit string is slow, or refused (over 4300).
    if exponent is not None and (len(exponent) > 6 or abs(int(exponent)) > _MAX_EXPONENT):
        return None
    try:
        return Fraction(s)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        return None


def _unwrap(text: str) -> str:
    """`text` stripped, without `\\text{...}`-style wrappers around all of it."""
    s = text.strip()
    start, end = 0, len(s)  # the text left is s[start:end]
    closing: dict[int, int] | None = None
    while (head := _WRAPPER.match(s, start, end)) is not None:
        if closing is None:  # one pass over the text, however deep the wrappers
            closing = _brace_pairs(s)
        if closing.get(head.end() - 1) != end - 1:
            break
        start, end = head.end(), end - 1
        while start < end and s[start].isspace():
            start += 1
        while end > start and s[end - 1].isspace():
            end -= 1
    return s[start:end]


def _brace_pairs(text: str) -> dict[int, int]:
    """The index of each opening brace's closing brace; escaped braces (`\\{`) do not count."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "{":
            opened.append(i)
        elif char == "}" and opened:
            pairs[opened.pop()] = i
    return pairs


def _short(text: str, limit: int = 40) -> str:
    """`text` for a verdict's detail: at most `limit` characters, on one line."""
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def choice_letter(text: str, letters: str) -> str | None:
    """The option letter of a boxed answer: "C", " C ", "(C)", "C)", "C.", "\\text{C}"; else None.

    Case-insensitive; None unless the letter is one of `letters`. An option's text, two letters
    or a letter with more words are not an answer.
    """
    match = _LETTER.fullmatch(_unwrap(text))
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if letter in letters else None


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


def _format_number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else repr(float(value))


# --- config ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericConfig:
    """How to read and judge a custom test set (see the module docstring for every key)."""

    question_field: str
    answer_field: str
    verifier: str
    name: str = "custom"
    id_field: str | None = None
    extract: str = "boxed"
    casefold: bool = False
    tolerance: float = 1e-6
    tolerance_mode: str = "relative"
    warmup_template: str | None = None
    adaptive_template: str | None = None
    example_template: str | None = None
    example_separator: str = "\n\n"
    config_dir: str | None = None
    """The config file's folder (set by `from_file`, not a key of the file): a `module:function`
    verifier is imported with it on sys.path."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "casefold":
                ok, want = isinstance(value, bool), "true or false"
            elif f.name == "tolerance":
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                want = "a number"
            else:
                ok = isinstance(value, str) or (value is None and f.default is None)
                want = "a string"
            if not ok:
                raise ConfigError(f"{f.name}: expected {want}, got {type(value).__name__}")
        for key in ("question_field", "answer_field", "id_field"):
            if getattr(self, key) == "":
                raise ConfigError(f"{key}: must name a field, got an empty string")
        if not _NAME.fullmatch(self.name):
            raise ConfigError(f"name: {self.name!r} is not a simple name (letters, digits, _.-)")
        if self.verifier not in VERIFIERS and not _CALLABLE.fullmatch(self.verifier):
            raise ConfigError(
                f"verifier: {self.verifier!r}; expected one of {', '.join(VERIFIERS)} "
                "or a Python callable as 'module:function'"
            )
        if self.extract not in EXTRACTS:
            raise ConfigError(f"extract: {self.extract!r}; expected one of {', '.join(EXTRACTS)}")
        if not math.isfinite(self.tolerance) or self.tolerance < 0:
            raise ConfigError(f"tolerance: must be a finite number >= 0, got {self.tolerance}")
        if self.tolerance_mode not in ("absolute", "relative"):
            raise ConfigError(
                f"tolerance_mode: {self.tolerance_mode!r}; expected 'absolute' or 'relative'"
            )

    @classmethod
    def from_file(cls, path: str | Path) -> GenericConfig:
        """Reads a JSON (.json) or TOML (.toml) file; template files are relative to it."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the suite config ({exc.strerror})") from None
        try:
            if path.suffix == ".toml":
                data: object = tomllib.loads(raw.decode("utf-8"))
            elif path.suffix == ".json":
                data = json.loads(raw)
            else:
                raise ConfigError(f"{path}: a suite config is a .json or .toml file")
        except (ValueError, UnicodeDecodeError) as exc:  # JSON and TOML errors are ValueErrors
            raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a table of keys at the top level")
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "config_dir"}
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{path}: unknown key {key!r}; expected some of {', '.join(known)}"
                )
        values = {key: value for key, value in data.items() if value is not None}  # JSON null
        for key, f in known.items():
            if f.default is dataclasses.MISSING and key not in values:
                raise ConfigError(f"{path}: missing required key {key!r}")
        for key, placeholder in _TEMPLATE_KEYS.items():
            value = values.get(key)
            if isinstance(value, str) and placeholder not in value:
                values[key] = str((path.parent / value).resolve())
        try:
            return cls(**values, config_dir=str(path.parent.resolve()))
        except ConfigError as exc:
            raise ConfigError(f"{path}: key {exc}") from None


# The placeholder every template must contain; a value without it names a file.
_TEMPLATE_KEYS = {
    "warmup_template": "{question}",
    "adaptive_template": "{examples}",
    "example_template": "{question}",
}
_REQUIRED = {
    "warmup_template": ("{question}",),
    "adaptive_template": ("{examples}", "{question}"),
    "example_template": ("{question}", "{response}"),
}


def _template(key: str, value: str | None, default: str) -> str:
    if value is None:
        return default
    text = value
    if _TEMPLATE_KEYS[key] not in value:
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{key}: cannot read template file {value!r} ({exc})") from None
        text = text.removesuffix("\n")  # editors end files with a newline; prompts do not
    for placeholder in _REQUIRED[key]:
        if placeholder not in text:
            raise ConfigError(f"{key}: the template has no {placeholder} placeholder")
    return text


def _fill(template: str, values: Mapping[str, str]) -> str:
    # One pass, so a question containing "{examples}" is never substituted into.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _import_callable(spec: str, folder: str | None = None) -> Callable[[str, str], object]:
    """The callable `module:attr`, the module imported with `folder` (if any) on sys.path.

    `folder` goes at the end of sys.path, once: the `ttc` console script does not put the
    current directory on sys.path, and a verifier next to its config must import all the same.
    """
    if folder is not None and folder not in sys.path:
        sys.path.append(folder)
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ConfigError(
            f"verifier: cannot import {spec!r} ({type(exc).__name__}: {exc})"
        ) from None
    if not callable(target):
        raise ConfigError(f"verifier: {spec!r} is not callable")
    fn: Callable[[str, str], object] = target
    return fn


# --- the suite ---------------------------------------------------------------------------------


class GenericSuite:
    """A user's test set read from `path` (JSONL or CSV, optionally .gz) as `config` says."""

    def __init__(self, path: str | Path, config: GenericConfig) -> None:
        self.path = Path(path)
        self.config = config
        self.name = config.name
        self._warmup = _template("warmup_template", config.warmup_template, _WARMUP)
        self._adaptive = _template("adaptive_template", config.adaptive_template, _ADAPTIVE)
        self._example = _template("example_template", config.example_template, _EXAMPLE)
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
    def sim_prose(self) -> bool:
        """Whether the simulator may put prose before the answer: not when all of it is judged."""
        return self.config.extract != "full"

    @property
    def _is_callable(self) -> bool:
        return self.config.verifier not in VERIFIERS

    def prepare(self) -> None:
        """Import a `module:function` verifier (verifier workers call this at start-up)."""
        if self._is_callable and self._fn is None:
            self._fn = _import_callable(self.config.verifier, self.config.config_dir)

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
            if item_id in first_line:
                raise DataError(
                    f"{self.path}:{line}: field {cfg.id_field or 'id'!r}: duplicate id "
                    f"{item_id!r} (first on line {first_line[item_id]})"
                )
            first_line[item_id] = line
            if cfg.verifier == "numeric" and parse_number(reference) is None:
                raise DataError(f"{self.path}:{line}: field {cfg.answer_field!r}: not a number")
            if cfg.verifier == "choice":
                letter = choice_letter(reference, _LETTERS)
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

    def _extract(self, response: str) -> str | None:
        mode = self.config.extract
        if mode == "boxed":
            return extract_last_boxed(response)
        if mode == "last_line":
            lines = [line.strip() for line in response.splitlines() if line.strip()]
            return lines[-1] if lines else None
        return response.strip() or None

    def judge(self, item: Item, response: str) -> Verdict:
        """Scores the extracted answer with the configured verifier."""
        answer = self._extract(response)
        if self._is_callable:
            return self._judge_callable(item, response, answer)
        if answer is None:
            return Verdict(0.0, None, f"no answer ({self.config.extract} extraction)")
        kind = self.config.verifier
        if kind == "choice":
            letter = choice_letter(answer, _LETTERS)
            if letter is None:
                return Verdict(0.0, answer, "not a single option letter")
            return Verdict(float(letter == item.reference), letter)
        if kind == "numeric":
            return self._judge_numeric(item, answer)
        if kind == "math":
            return self._judge_math(item, answer)
        a, b = _unwrap(answer), _unwrap(item.reference)
        if self.config.casefold:
            a, b = a.casefold(), b.casefold()
        if a == b:
            return Verdict(1.0, answer)
        return Verdict(0.0, answer, f"expected {_short(item.reference)}, got {_short(answer)}")

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
        return Verdict(0.0, answer, f"expected {_short(item.reference)}, got {_short(answer)}")

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

    def _render(self, answer: str, rng: random.Random) -> str:
        lead = rng.choice(_LEADS)
        if self.config.extract == "boxed":
            return f"{lead} \\boxed{{{answer}}}"
        if self.config.extract == "last_line":
            return f"{lead}:\n{answer}"
        return answer

    def _wrong_candidates(self, item: Item, rng: random.Random) -> list[str]:
        ref = item.reference
        kind = self.config.verifier
        if kind == "choice":
            letters = [c for c in _LETTERS[: max(4, _LETTERS.index(ref) + 1)] if c != ref]
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

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """The final answer: the reference if `correct`, else one the verifier rejects."""
        rng = random.Random(f"{item.id}\x1f{seed}")
        if correct:
            return self._render(item.reference, rng)
        candidates = self._wrong_candidates(item, rng)
        for candidate in candidates:
            text = self._render(candidate, rng)
            if candidate.strip() != item.reference and self.judge(item, text).score < 1.0:
                return text
        return self._render(candidates[-1], rng)

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the extracted answer is the reference: the simulator's cheap check."""
        answer = self._extract(response)
        if answer is None:
            return False
        if self.config.verifier == "choice":
            return choice_letter(answer, _LETTERS) == item.reference
        return answer == item.reference
