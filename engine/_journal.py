"""The append-only journal of a run: one orjson line per event, written through at once.

Event kinds (`ev`):
- `start`: a run (or a resumed run) began.
- `sample`: one planned sample landed, written the moment it lands: its text, usage, attempts and
  the demonstrations it was shown, or its final error. Keyed by (round, item, k).
- `verdict`: the verifier's judgement of a landed sample (score, extracted answer), whether it is
  correct (score >= γ) and whether the run's judgement accepted it (`passed`).
- `judge`: the reward model's rating of a landed sample (the share of the scale it gave, its reply
  and usage), before its `verdict`; only with `--judge reward`.
- `difficulty`: the difficulty model's rating of a question (da), asked once per question.
  A failed call is journaled too, and settles the question at the neutral rating for good.
- `retry`: one failed attempt that will be retried (kind, message, delay).
- `round`: a round's totals, written at its barrier.

On resume, a sample with a response is never sent again (a landed sample with no verdict yet is
judged again, not bought again); a sample that ended in an error was never paid for, and is sent
again. Role calls are not asked again either: a sample's `judge` event, once its `verdict` is
written, and a question's `difficulty` event stand as they are, failed calls included, so the
rounds that acted on them replay the same.

Each line goes to the OS with one unbuffered write, so a killed process loses at most the line
it was writing; a torn last line is cut off when the journal is reopened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from ttc.engine._errors import DataError

SampleKey = tuple[int, str, int]


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a journal in order; a torn final line is skipped, a bad middle line is not."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        lines = fh.read().split(b"\n")
    # A complete journal ends with a newline, so the last piece is empty or a torn write.
    for lineno, raw in enumerate(lines[:-1], start=1):
        if not raw.strip():
            continue
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: corrupt journal line ({exc})") from exc
        if not isinstance(event, dict) or "ev" not in event:
            raise DataError(f"{path}:{lineno}: journal line has no 'ev' field")
        yield event


_SAMPLE_FIELDS = ("round", "item", "k", "ok", "text", "usage")


def completed_samples(path: Path) -> dict[SampleKey, dict[str, Any]]:
    """The samples of a journal that have a response, keyed by (round, item id, k).

    A sample's `verdict` event, when there is one, is merged into it (`score`, `answer`), and its
    last `judge` event (answered or failed) is kept whole under `judge`.
    """
    done: dict[SampleKey, dict[str, Any]] = {}
    for lineno, event in enumerate(read_journal(path), start=1):
        kind = event["ev"]
        if kind not in ("sample", "verdict", "judge"):
            continue
        try:
            key = (int(event["round"]), str(event["item"]), int(event["k"]))
            if kind == "sample" and event["ok"]:
                missing = [f for f in _SAMPLE_FIELDS if f not in event]
                if missing:
                    raise KeyError(missing[0])
                done[key] = dict(event)
            elif kind == "verdict" and key in done:
                done[key].update(score=float(event["score"]), answer=event.get("answer"))
            elif kind == "judge" and key in done:
                if event.get("ok"):
                    [int(u) for u in event["usage"]]  # checked here, so replay can trust it
                done[key]["judge"] = event
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: {kind} event #{lineno} lacks a valid {exc}") from exc
    return done


def difficulty_ratings(path: Path) -> dict[str, dict[str, Any]]:
    """The `difficulty` events of a journal, answered or failed, by item id (the last of each)."""
    found: dict[str, dict[str, Any]] = {}
    for lineno, event in enumerate(read_journal(path), start=1):
        if event["ev"] != "difficulty":
            continue
        try:
            if event.get("ok"):
                [int(u) for u in event["usage"]]
                rating = event.get("rating")
                if rating is not None:
                    float(rating)
            found[str(event["item"])] = event
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: difficulty event #{lineno} lacks a valid {exc}") from exc
    return found


class Journal:
    """Appends events to `path`; reopening an existing journal first cuts a torn last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._size = 0  # bytes in the file: the offset of the next line

    def open(self) -> Journal:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._cut_torn_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        return self

    def _cut_torn_tail(self) -> None:
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            with self.path.open("r+b") as fh:
                fh.truncate(keep)

    def append(self, event: dict[str, Any]) -> int:
        """Write one event as one line, straight to the OS; returns the line's byte offset."""
        if self._fd is None:
            raise RuntimeError("journal is not open")
        offset = self._size
        data = orjson.dumps(event) + b"\n"
        view = memoryview(data)
        while view:  # os.write may write less than asked (a full disk, a signal)
            view = view[os.write(self._fd, view) :]
        self._size += len(data)
        return offset

    def sync(self) -> None:
        """Make what was written survive a machine crash (called at round barriers)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
