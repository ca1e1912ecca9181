"""The `ttc` command's own process: the collector tuned by the console entry, never by `main`
(which hosts and tests call in their processes)."""

from __future__ import annotations

import gc
import subprocess
import sys

import orjson
import pytest

from ttc.engine.cli import main
from ttc.engine.cli._main import YOUNG_GENERATION

_CONSOLE = """
import gc, sys
import orjson
from ttc.engine.cli import console
sys.argv = ["ttc", "--help"]
try:
    code = console()
except SystemExit as exc:  # argparse's --help
    code = exc.code
print(orjson.dumps({"code": code, "young": gc.get_threshold()[0],
                    "frozen": gc.get_freeze_count()}).decode())
"""


def test_the_ttc_command_tunes_its_collector() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CONSOLE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    line = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert line["code"] == 0
    assert line["young"] == YOUNG_GENERATION
    assert line["frozen"] > 1000  # the start-up heap: modules, the parser


def test_main_leaves_the_host_collector_alone() -> None:
    before = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(SystemExit) as exited:  # argparse's --help
        main(["--help"])
    assert exited.value.code == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
