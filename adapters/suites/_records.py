"""Reading test-set files: JSONL or CSV records, optionally gzipped, with errors that name where.

The loaders of GPQA and the custom suite read their records here, on the engine's reader
(`ttc.engine.read_jsonl`, `read_bytes`): every DataError is one line naming the file, the line
and the field ("FILE:LINE: field 'x': what is wrong"), and never quotes the data, which may be
secret (GPQA). Records that come from elsewhere than a file (a Hugging Face dataset, `_hub`) are
a `Table`, named and numbered as a file's lines are, so the same loaders check them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ttc.engine import DataError
from ttc.engine._util import read_bytes, read_jsonl

__all__ = ["Table", "check_unique", "read_records", "record_text"]


@dataclass(frozen=True, slots=True)
class Table:
    """A test set's records from elsewhere than a file: errors name a record as `name:ROW`, ROW
    counted from 1, as they name a file's line; `source` is what the run records of where the
    records came from (the dataset, its commit)."""

    name: str
    rows: Sequence[Mapping[str, Any]]
    source: Mapping[str, Any]

    def __str__(self) -> str:
        return self.name

    def records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(row, record) for each record, rows counted from 1."""
        for row, record in enumerate(self.rows, 1):
            yield row, dict(record)


def _read_text(path: Path) -> str:
    """The whole file as text. CSV test sets are small; decoding at once gives exact lines."""
    raw = read_bytes(path)
    try:
        # utf-8-sig: spreadsheets often begin their CSV files with a byte-order mark.
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}:{line}: not UTF-8 text") from None


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) for each record of a JSONL or CSV file, optionally gzipped.

    A CSV record's line is the one its row starts on (the header is line 1). DataError names the
    file and line; it never quotes the data, which may be secret (GPQA).
    """
    base = path.name.removesuffix(".gz")
    kind = (
        "csv" if base.endswith(".csv") else "jsonl" if base.endswith((".jsonl", ".ndjson")) else ""
    )
    if not kind:
        raise DataError(f"{path}: unknown format; expected .jsonl or .csv, optionally .gz")
    if kind == "jsonl":
        yield from read_jsonl(path)
        return
    yield from _csv_records(path, io.StringIO(_read_text(path), newline=""))


def _csv_records(path: Path, f: IO[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(f, strict=True)
    header: list[str] | None = None
    start = 1
    try:
        for row in reader:
            if header is None:
                header = [name.strip() for name in row]
                dupes = sorted({name for name in header if header.count(name) > 1})
                if dupes:
                    raise DataError(f"{path}:1: field {dupes[0]!r}: duplicate column in the header")
            elif row:  # blank lines come back as []
                if len(row) != len(header):
                    raise DataError(
                        f"{path}:{start}: malformed CSV row: {len(row)} fields, "
                        f"the header has {len(header)}"
                    )
                yield start, dict(zip(header, row, strict=True))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}:{start}: malformed CSV row ({exc})") from None


def record_text(path: Path | Table, line: int, record: Mapping[str, Any], field: str) -> str:
    """The stripped, non-empty text of `record[field]` (numbers become text), else DataError."""
    if field not in record:
        raise DataError(f"{path}:{line}: field {field!r}: missing")
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, str | int | float | type(None)):
        kind = type(value).__name__
        raise DataError(f"{path}:{line}: field {field!r}: expected text or a number, got {kind}")
    text = "" if value is None else str(value).strip()
    if not text:
        raise DataError(f"{path}:{line}: field {field!r}: empty")
    return text


def check_unique(
    seen: dict[str, int], item_id: str, path: Path | Table, line: int, field: str
) -> None:
    """Records `item_id` as first seen on `line`; DataError naming both lines if seen before."""
    if item_id in seen:
        raise DataError(
            f"{path}:{line}: field {field!r}: duplicate id {item_id!r} "
            f"(first on line {seen[item_id]})"
        )
    seen[item_id] = line
