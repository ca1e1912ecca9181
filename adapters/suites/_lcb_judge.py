"""Judging a program as LiveCodeBench's evaluator does: the prelude, the functional harness,
the comparison of outputs, the code in a response and why a run failed.

A program's output is hostile input: whatever it prints (signalling NaNs, results nested
200,000 deep, integers of thousands of digits, numbers beyond any float, bytes that are not
UTF-8, megabytes of text) is compared or refused as a wrong answer with a reason, never raised.

See `ttc.adapters.suites._livecodebench` for where this follows LiveCodeBench and where not.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ttc.adapters.sandbox import SandboxResult

__all__ = [
    "HARNESS",
    "LCB_IMPORTS",
    "RESULT_MARKER",
    "TestReport",
    "clip",
    "extract_code",
    "first_mismatch",
    "last_line",
    "lcb_prelude",
    "outputs_match",
    "read_json",
    "run_failure",
    "values_match",
]

LCB_IMPORTS = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""LiveCodeBench's `import_string`, run before every program (see `lcb_prelude`)."""

_TOLERANCE = 1e-6
_SHOWN = 60  # characters of an output quoted in a verdict's detail
RESULT_MARKER = "\x00ttc-result\x00"
"""What the functional harness prints before the result's JSON."""
_INTEGER = re.compile(r"[+-]?\d+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[ \t]*$", re.MULTILINE)

HARNESS = """
import io, json, sys


def _ttc_call():
    text = sys.stdin.read().strip()
    args = [json.loads(line) for line in text.split("\\n")] if text else []
    ns = {"__name__": "solution"}
    exec(compile(IMPORTS, "<imports>", "exec"), ns)
    real, sys.stdout = sys.stdout, io.StringIO()  # the program's own prints are not the result
    try:
        exec(compile(SOURCE, "solution.py", "exec", dont_inherit=True), ns)
        # LiveCodeBench: a class Solution if the program has one, else the module itself
        owner = ns["Solution"]() if isinstance(ns.get("Solution"), type) else None
        target = getattr(owner, FUNC, None) if owner is not None else ns.get(FUNC)
        if not callable(target):
            raise SystemExit(f"missing entry point {FUNC}")
        result = target(*args)
    finally:
        sys.stdout = real
    try:
        encoded = json.dumps(result)
    except (TypeError, ValueError):
        raise SystemExit(f"the result is not JSON: {type(result).__name__}") from None
    sys.stdout.write(MARKER + encoded + "\\n")


_ttc_call()
"""
"""The functional-test harness; it runs after SOURCE, FUNC, IMPORTS and MARKER are defined."""


@dataclass(frozen=True, slots=True)
class TestReport:
    """The tests a program passed before the first failure; `failure` is None iff it passed all.

    ran: how many tests were run (the passed ones and the failing one).
    """

    __test__ = False

    passed: int
    total: int
    failure: str | None
    ran: int


@functools.cache
def _star_exports() -> dict[str, frozenset[str]]:
    """The names each `from M import *` line of the prelude binds."""
    exports = {}
    for line in LCB_IMPORTS.splitlines():
        if line.startswith("from "):
            name = line.split()[1]
            module = importlib.import_module(name)
            public = getattr(module, "__all__", None)
            if public is None:
                public = [n for n in dir(module) if not n.startswith("_")]
            exports[name] = frozenset(public)
    return exports


def lcb_prelude(code: str) -> str:
    """The lines of LiveCodeBench's import prelude that can matter to `code`.

    Importing all eighteen modules costs about 20 ms per process, as much as starting Python.
    A `from M import *` line is kept iff M exports a name that occurs anywhere in the program's
    text (strings included, for eval), an `import M` line iff M occurs: every name the program
    can mention is bound exactly as the full prelude binds it, in the same order.
    """
    names = set(_IDENTIFIER.findall(code))
    exports = _star_exports()
    kept = []
    for line in LCB_IMPORTS.splitlines():
        words = line.split()
        if words[0] == "from" and not exports[words[1]] & names:
            continue
        if words[0] == "import" and words[1] != "sys" and words[1] not in names:
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def clip(text: str, limit: int = _SHOWN) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _numbers_match(got: str, want: str) -> bool:
    try:
        a, b = Decimal(got), Decimal(want)
    except InvalidOperation:
        return False
    if a.is_snan() or b.is_snan():
        return False  # compared, a signalling NaN raises; as text they already differed
    if a == b:
        return True
    if _INTEGER.fullmatch(want):
        return False  # an integer answer is exact, however large
    x, y = float(a), float(b)
    return math.isfinite(x) and math.isclose(x, y, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)


def first_mismatch(got: str, want: str) -> str | None:
    """None if the outputs match, else what differs (short)."""
    got_lines, want_lines = _lines(got), _lines(want)
    if len(got_lines) != len(want_lines):
        return (
            f"expected {len(want_lines)} line(s), got {len(got_lines)}: "
            f"expected {clip(want.strip())}, got {clip(got.strip())}"
        )
    for number, (g, w) in enumerate(zip(got_lines, want_lines, strict=True), start=1):
        if g == w:
            continue
        g_tokens, w_tokens = g.split(), w.split()
        if len(g_tokens) == len(w_tokens) and all(
            a == b or _numbers_match(a, b) for a, b in zip(g_tokens, w_tokens, strict=True)
        ):
            continue
        return f"line {number}: expected {clip(w)}, got {clip(g)}"
    return None


def outputs_match(got: str, want: str) -> bool:
    """Whether a stdin test's output `got` is accepted for the expected output `want`."""
    return first_mismatch(got, want) is None


def read_json(text: str) -> tuple[Any, str | None]:
    """(The JSON value of `text`, None), or (None, why it cannot be read): integers of any length
    (beyond `sys.int_max_str_digits` too), never an exception, however deep or long."""
    try:
        return json.loads(text, parse_int=_integer), None
    except RecursionError:
        return None, "nested too deeply"
    except (ValueError, ArithmeticError) as exc:  # JSONDecodeError is a ValueError
        return None, str(exc).partition(":")[0][:80]


def _integer(text: str) -> int:
    # int() refuses more than sys.int_max_str_digits digits; Decimal has no such limit
    return int(text) if len(text) < 4000 else int(Decimal(text))


def values_match(got: Any, want: Any) -> bool:
    """Equality of decoded JSON values, with the float tolerance of stdin tests."""
    if isinstance(got, float) or isinstance(want, float):
        if isinstance(got, bool) or isinstance(want, bool):
            return bool(got == want)
        if not isinstance(got, int | float) or not isinstance(want, int | float):
            return False
        if isinstance(want, int):
            return got == want  # an integer answer is exact
        try:
            return got == want or math.isclose(got, want, rel_tol=_TOLERANCE, abs_tol=_TOLERANCE)
        except OverflowError:  # an integer beyond any float: not close to a float answer
            return False
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(map(values_match, got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(values_match(got[k], want[k]) for k in want)
    return bool(got == want)


def extract_code(response: str) -> str:
    """The program in a response: its last fenced code block if it has fences, else all of it."""
    text = response
    if "</think>" in text:
        text = text[text.rfind("</think>") + len("</think>") :]
    fences = list(_FENCE.finditer(text))
    if not fences:
        if text.lstrip().startswith("```"):  # a fence closed at the end of a code line
            body = text.lstrip()[3:]
            body = body.split("\n", 1)[1] if "\n" in body else ""
            return body.rstrip().removesuffix("```").strip("\n")
        return text.strip("\n")
    blocks: list[tuple[str, str]] = []
    for opening, closing in zip(fences[::2], [*fences[1::2], None], strict=False):
        if closing is not None:
            body = text[opening.end() + 1 : closing.start()]
        else:  # truncated, or closed at the end of a code line
            body = text[opening.end() + 1 :].rstrip().removesuffix("```")
        blocks.append((opening.group(1).lower(), body))
    python = [body for lang, body in blocks if lang in ("", "python", "python3", "py")]
    return (python or [body for _, body in blocks])[-1].strip("\n")


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def run_failure(result: SandboxResult, timeout_s: float, memory_mb: int) -> str | None:
    """Why a run failed before its output could be judged, or None."""
    reason = result.killed_reason
    if reason == "timeout":
        return f"time limit exceeded ({timeout_s:g} s)"
    if reason == "cpu":
        return "time limit exceeded (CPU time)"
    if reason == "memory":
        return f"memory limit exceeded ({memory_mb} MB)"
    if reason == "output":
        return "output limit exceeded"
    if reason is not None:
        return f"runtime error: killed by {reason.removeprefix('signal ')}"
    if result.returncode != 0 and "Traceback (most recent call last)" in result.stderr:
        return f"runtime error: {clip(last_line(result.stderr), 200)[1:-1]}"
    return None
