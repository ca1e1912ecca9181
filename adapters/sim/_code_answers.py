"""The simulator's answers to LiveCodeBench: programs that pass or fail the real tests on purpose.

A right program looks each test's input up in a table of the expected outputs; a wrong one has
one of them perturbed so that the real judge tells it apart. The first line says which, so the
simulator's cheap check reads it back without running anything.
"""

from __future__ import annotations

import base64
import json
import random
import re
import zlib
from dataclasses import dataclass
from typing import Any

from ttc.adapters.suites import LiveCodeBenchSuite
from ttc.adapters.suites._lcb_judge import outputs_match, values_match
from ttc.adapters.suites._lcb_records import TestCase
from ttc.engine import Item

__all__ = ["CodeAnswers"]

_SIM_CORRECT = "# sim: correct"
_SIM_WRONG = "# sim: wrong"
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, slots=True)
class CodeAnswers:
    """LiveCodeBench: a table-driven program, right or wrong on purpose, and nothing else."""

    suite: LiveCodeBenchSuite
    sim_prose = False  # code-only answers: the simulator sends the program alone

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        """A program that looks up each test's expected output; when not `correct`, one of them
        is perturbed, so the real judge fails it."""
        tests: tuple[TestCase, ...] = item.meta["tests"]
        functional = item.meta["testtype"] == "functional"
        expected: list[Any] = [json.loads(t.output) if functional else t.output for t in tests]
        if not correct:
            rng = random.Random(f"{item.id}\x1f{seed}")
            index = rng.randrange(len(tests))
            expected[index] = (
                _perturb_value(expected[index], rng)
                if functional
                else _perturb_text(expected[index], rng)
            )
        head = _SIM_CORRECT if correct else _SIM_WRONG
        if functional:
            table = {
                _canonical_args(t.input): value for t, value in zip(tests, expected, strict=True)
            }
            return (
                f"{head}\nimport json\n\n{_table_source(table)}\n\n\nclass Solution:\n"
                f"    def {item.meta['func_name']}(self, *args):\n"
                "        return TABLE[json.dumps(list(args), sort_keys=True)]\n"
            )
        table = {t.input: value for t, value in zip(tests, expected, strict=True)}
        return (
            f"{head}\nimport json\nimport sys\n\n{_table_source(table)}\n"
            'sys.stdout.write(TABLE.get(sys.stdin.read(), ""))\n'
        )

    def sim_is_correct(self, item: Item, response: str) -> bool:
        """Whether the response is the simulator's correct program (its first line says so)."""
        return response.lstrip().startswith(_SIM_CORRECT + "\n")


def _canonical_args(text: str) -> str:
    stripped = text.strip()
    args = [json.loads(line) for line in stripped.split("\n")] if stripped else []
    return json.dumps(args, sort_keys=True)


def _table_source(table: dict[str, Any]) -> str:
    """`TABLE = ...` as Python source; large tables are compressed to keep the program short."""
    encoded = json.dumps(table, sort_keys=True)
    if len(encoded) <= 4000:
        return f"TABLE = json.loads({encoded!r})"
    packed = base64.b85encode(zlib.compress(encoded.encode("utf-8"), 9)).decode("ascii")
    return (
        "import base64\nimport zlib\n\n"
        f"TABLE = json.loads(zlib.decompress(base64.b85decode({packed!r})))"
    )


def _perturb_text(expected: str, rng: random.Random) -> str:
    """A stdin test's expected output with one line changed so that it no longer matches."""
    lines = expected.rstrip("\n").split("\n")
    index = rng.randrange(len(lines))
    tokens = lines[index].split()
    if tokens:
        last = tokens[-1]
        if _INTEGER.fullmatch(last):
            tokens[-1] = str(int(last) + rng.choice((-2, -1, 1, 2)))
        elif last in ("Yes", "No", "YES", "NO"):
            tokens[-1] = {"Yes": "No", "No": "Yes", "YES": "NO", "NO": "YES"}[last]
        else:
            try:
                tokens[-1] = repr(float(last) + 1.0 + abs(float(last)))
            except ValueError:
                tokens[-1] = last + "x"
    lines[index] = " ".join(tokens) if tokens else "0"
    wrong = "\n".join(lines) + "\n"
    return wrong if not outputs_match(wrong, expected) else expected.rstrip("\n") + "\n0\n"


def _perturb_value(value: Any, rng: random.Random) -> Any:
    """A JSON value of the same shape that `_values_match` tells apart from `value`."""
    if isinstance(value, bool):
        wrong: Any = not value
    elif isinstance(value, int):
        wrong = value + rng.choice((-2, -1, 1, 2))
    elif isinstance(value, float):
        wrong = value + 1.0 + abs(value)
    elif isinstance(value, str):
        wrong = value + "x"
    elif isinstance(value, list) and value:
        index = rng.randrange(len(value))
        wrong = [*value[:index], _perturb_value(value[index], rng), *value[index + 1 :]]
    elif isinstance(value, list):
        wrong = [0]
    else:
        wrong = [value]
    return wrong if not values_match(wrong, value) else [value]
