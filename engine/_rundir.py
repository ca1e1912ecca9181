"""The run directory: everything one run produced, in one place.

config.json      the resolved config, provider, suite, data checksum, package version
journal.jsonl    append-only events: every sample, retry and round (see _journal)
results.jsonl    one line per question: solved, ỹ, samples, tokens
summary.json     coverage and input/output/thinking tokens per round, wall time
embeddings.npy   the question embeddings of this run (with a .json sidecar)
run.log          the run's log lines
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ttc.engine._report import round_row
from ttc.engine._state import RunState
from ttc.engine._types import Usage

_JSON = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Replace `path` with `data` (bytes, or chunks written one by one, so that a large file
    is never held in memory whole); a reader sees the old file or the new, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        if isinstance(data, bytes):
            fh.write(data)
        else:
            for chunk in data:
                fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _result_lines(state: RunState) -> Iterator[bytes]:
    for item, rec in zip(state.items, state.records, strict=True):
        fp = rec.first_pass
        record = {
            "id": item.id,
            "solved": fp is not None,
            "response": None if fp is None else fp[2],
            "solved_round": None if fp is None else fp[0],
            "samples": rec.samples,
            "errors": rec.errors,
            "input_tokens": rec.usage.input_tokens,
            "output_tokens": rec.usage.output_tokens,
            "thinking_tokens": rec.usage.thinking_tokens,
        }
        yield orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def journal_path(self) -> Path:
        return self.path / "journal.jsonl"

    @property
    def embeddings_path(self) -> Path:
        return self.path / "embeddings.npy"

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    def attach_log(self) -> logging.Handler:
        """Send the `ttc` logger's records to run.log for the duration of the run."""
        self.path.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.path / "run.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger = logging.getLogger("ttc")
        logger.addHandler(handler)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        return handler

    def detach_log(self, handler: logging.Handler) -> None:
        logging.getLogger("ttc").removeHandler(handler)
        handler.close()

    def write_config(self, description: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.config_path, orjson.dumps(description, option=_JSON))

    def write_results(
        self,
        state: RunState,
        extra: dict[str, Any],
        wall_s: float,
        cost: Callable[[Usage], float | None] = lambda usage: None,
    ) -> None:
        """results.jsonl (one line per question) and summary.json (per-round totals)."""
        write_atomic(self.results_path, _result_lines(state))
        total = state.total_usage()
        solved = state.solved_count()
        summary = {
            **extra,
            "questions": state.n,
            "solved": solved,
            "coverage": solved / state.n if state.n else 0.0,
            "rounds_completed": sum(s.complete for s in state.rounds),
            "complete": bool(state.rounds)
            and all(s.complete for s in state.rounds)
            and len(state.rounds) == extra.get("rounds_planned", len(state.rounds)),
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "thinking_tokens": total.thinking_tokens,
            "wall_s": round(wall_s, 3),
            "cost_usd": cost(total),
            "rounds": [{**round_row(s), "cost_usd": cost(s.usage)} for s in state.rounds],
        }
        write_atomic(self.summary_path, orjson.dumps(summary, option=_JSON))
