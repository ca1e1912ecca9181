"""The library page's examples (docs/library.md, the README's stream example among them) run as
printed, each in a process of its own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import library_example

from ttc.adapters import ReasoningGymSuite

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "docs" / "library.md"


def _library_example() -> str:
    return library_example(LIBRARY.read_text())


@pytest.mark.slow
def test_the_library_example_runs_as_printed(tmp_path: Path) -> None:
    script = tmp_path / "demo.py"
    script.write_text(_library_example())
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"coverage \d+\.\d%, complete True, stopped None", proc.stdout), proc.stdout
    assert (tmp_path / "runs" / "demo" / "summary.json").is_file()


@pytest.mark.slow
def test_the_stream_example_tells_questions_as_they_are_solved(tmp_path: Path) -> None:
    script = tmp_path / "stream.py"
    script.write_text(library_example(LIBRARY.read_text(), which=1))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    solved = [line for line in lines if re.fullmatch(r"solved \S+ in round [1-4]", line)]
    gave_up = [line for line in lines if re.fullmatch(r"gave up on \S+ after \d+ samples", line)]
    assert solved
    # Each question told once: solved, or given up at the end.
    assert len(solved) + len(gave_up) == len(ReasoningGymSuite(per_task=5).items())
    assert re.fullmatch(r"coverage \d+\.\d%, stopped None", lines[-1])
