"""The answer helpers the suites share: the last `\\boxed{}`, option letters, exact numbers.

Every suite judges an answer it first extracts from a long response; these read that answer the
same way wherever a suite needs it (and the simulator's answers write it back).
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = [
    "OPTION_LETTERS",
    "choice_letter",
    "extract_last_boxed",
    "parse_number",
    "short",
    "unwrap",
]

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Every option letter a choice answer may name."""

_BOXED = re.compile(r"\\boxed\s*\{")
_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mathit)\s*\{")
_LETTER = re.compile(r"\(?\s*([A-Za-z])\s*\)?\.?")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?")
# Fraction("1e-10000000") builds a ten-million-digit integer: larger exponents are not numbers.
_MAX_EXPONENT = 1000
_THOUSANDS = re.compile(r"([+-]?\d{1,3}(?:,\d{3})+)(\.\d+)?")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}")


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


def unwrap(text: str) -> str:
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


def choice_letter(text: str, letters: str) -> str | None:
    """The option letter of a boxed answer: "C", " C ", "(C)", "C)", "C.", "\\text{C}"; else None.

    Case-insensitive; None unless the letter is one of `letters`. An option's text, two letters
    or a letter with more words are not an answer.
    """
    match = _LETTER.fullmatch(unwrap(text))
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if letter in letters else None


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


def short(text: str, limit: int = 40) -> str:
    """`text` for a verdict's detail: at most `limit` characters, on one line."""
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
