"""Where the paper's test sets are looked for on this machine: one data directory, for `ttc run`
(a suite given no `--data`), `ttc verify`, `ttc serve` and `benchmarks/paper.py` alike.

The directory is `$TTC_DATA_DIR` if set, else `../shared/data` beside the project (the layout of
a shared checkout: `math500/test.jsonl`, `minerva_math/test.jsonl`,
`gpqa_diamond/gpqa_diamond.jsonl.gz`). A suite whose file is not there is read from the Hugging
Face Hub only when the user asks for it (`--hub`): offline means offline, and the error of a
missing file says where it was looked for.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_DIR_ENV", "DATA_FILES", "HUB_SUITES", "data_dir", "local_data", "no_local_data"]

DATA_DIR_ENV = "TTC_DATA_DIR"
# Each suite's file under the data directory.
DATA_FILES = {
    "math500": Path("math500") / "test.jsonl",
    "minerva": Path("minerva_math") / "test.jsonl",
    "gpqa": Path("gpqa_diamond") / "gpqa_diamond.jsonl.gz",
}
# The suites whose questions otherwise come from the Hugging Face Hub.
HUB_SUITES = ("math500", "minerva", "gpqa", "livecodebench")
# The project's root: adapters/suites/ is two levels below it.
_PROJECT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The data directory: $TTC_DATA_DIR, else ../shared/data beside the project."""
    given = os.environ.get(DATA_DIR_ENV)
    return Path(given) if given else _PROJECT.parent / "shared" / "data"


def local_data(name: str, directory: Path | None = None) -> Path | None:
    """Suite `name`'s file in the data directory (or `directory`), if it is there."""
    relative = DATA_FILES.get(name)
    if relative is None:
        return None
    path = (directory or data_dir()) / relative
    return path if path.exists() else None


def no_local_data(name: str, flag: str = "--data FILE") -> str:
    """The error of suite `name` with no local file and no leave to use the Hub, in a line."""
    relative = DATA_FILES.get(name)
    where = (
        f"{data_dir() / relative} is not there (the data directory: ${DATA_DIR_ENV}, else "
        "../shared/data beside the project)"
        if relative is not None
        else "it has no file in the data directory"
    )
    return (
        f"--suite {name}: no local copy of its questions: {where}; give {flag}, or --hub to "
        "read the Hugging Face Hub's copy"
    )
