"""A user's program type-checks against ttc as installed (`make`'s editable install): mypy
--strict finds `ttc.engine` and `ttc.adapters` and reads their real types."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """\
from pathlib import Path

from ttc.adapters import ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, EngineOptions, Price, RunConfig, RunResult


async def main(out: Path) -> RunResult:
    suite = ReasoningGymSuite(per_task=1)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=1))
    options = EngineOptions(price=Price(1.0, 2.0, 2.0))
    config = RunConfig(rounds=2)
    async with Engine(provider, suite, config, out_dir=out, options=options) as engine:
        return await engine.run(items)


rounds: str = RunConfig().rounds
"""


@pytest.mark.slow
def test_mypy_strict_finds_ttc_and_its_types_from_a_users_program(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed")
    (tmp_path / "prog.py").write_text(PROGRAM)
    # Run where a user's program is, away from this checkout (no config, no `ttc` folder there).
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", sys.executable,
         "--cache-dir", str(tmp_path / "cache"), "prog.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    # The one error is the planted one, which only the real types reveal: RunConfig.rounds is an
    # int (were ttc not found, RunConfig would be Any and the line would pass).
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'prog.py:17: error: Incompatible types in assignment (expression has type "int", '
        'variable has type "str")  [assignment]'
    ], proc.stdout + proc.stderr
