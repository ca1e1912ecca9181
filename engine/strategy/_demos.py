"""Fixed few-shot demonstrations (section 5.3's fixed-ICL ablation): the same examples for every
question in every adaptive round.

A few-shot file is JSONL, one demonstration per line: {"question": ..., "response": ...}, shown
in file order through the suite's own adaptive template. The math suites (MATH-500 and
MinervaMath) default to a 4-shot prompt ADAPTED from the standard Minerva prompt (Lewkowycz et
al. 2022), shipped as `ttc/engine/strategy/prompts/minerva_math_4shot.jsonl` (see the README next to
it): the same four problems and solutions, but each "Final Answer" line holds its answer in
`\\boxed{}` (our templates and verifiers read it there) and "I hope it is correct." is dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ttc.engine._util._records import read_jsonl
from ttc.engine.contract._errors import ConfigError, DataError
from ttc.engine.contract._types import Demo

# The suites whose prompts the shipped 4-shot file fits.
DEFAULT_FOR = ("math500", "minerva")
DEFAULT_FILE = "minerva_math_4shot.jsonl"


@dataclass(frozen=True, slots=True)
class FewShot:
    """The demonstrations of a few-shot file, and where they came from."""

    demos: tuple[Demo, ...]
    source: str
    sha256: str


def default_path() -> Path:
    """The shipped 4-shot prompt adapted from Minerva's (answers in `\\boxed{}`)."""
    return Path(str(resources.files("ttc.engine.strategy").joinpath("prompts", DEFAULT_FILE)))


def load_fewshot(path: str | Path | None, suite: str) -> FewShot:
    """The demonstrations of `path`, or the suite's default file; errors name --fewshot."""
    if path is None:
        if suite not in DEFAULT_FOR:
            raise ConfigError(
                f"--fewshot: the {suite or 'given'} suite has no default few-shot prompt; give a "
                'JSONL file of {"question": ..., "response": ...} lines'
            )
        path = default_path()
    path = Path(path)
    demos: list[Demo] = []
    try:
        for lineno, record in read_jsonl(path):
            fields = []
            for name in ("question", "response"):
                value = record.get(name)
                if not isinstance(value, str) or not value.strip():
                    raise DataError(f"{path}:{lineno}: field {name!r}: expected non-empty text")
                fields.append(value)
            demos.append(Demo(f"fewshot/{len(demos) + 1}", fields[0], fields[1]))
    except DataError as exc:
        raise ConfigError(f"--fewshot: {exc}") from None
    if not demos:
        raise ConfigError(f"--fewshot: {path} holds no demonstrations")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return FewShot(tuple(demos), str(path), digest)
