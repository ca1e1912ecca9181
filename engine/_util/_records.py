"""Reading the files ttc is given, or wrote itself, with one-line errors that say where.

Every file the engine and the command line read goes through here, and the adapters' readers
are built on the public names (`read_jsonl`, `read_bytes`, `parse_json`), so whatever is wrong
with a file comes out as one DataError of one shape: "FILE:LINE: what is wrong", or "FILE: what
is wrong" where there is no line. What can be wrong: the file is missing, is a directory, may not
be read; its bytes are not UTF-8 (or not gzip, for a .gz name); a line is not JSON, is JSON
nested deeper than the parser goes (a RecursionError in Python's json), holds a number with more
digits than Python converts (its int limit, a ValueError), or is not a JSON object. No message
quotes the data, which may be secret (GPQA), and none carries the parser's exception along.

Two parsers, one error shape. `strict`: orjson, for the files ttc writes itself (the journal,
config.json) and the OpenAI batch format: fast, RFC 8259 only, nesting limited to 1024 levels.
Otherwise Python's json, for data people wrote: it keeps integers of any length exact (orjson
would round one past 64 bits to a float) and takes the NaN that Python's own json writes.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ttc.engine.contract._errors import DataError

__all__ = ["parse_json", "read_bytes", "read_json", "read_jsonl", "read_lines", "unreadable"]

_BOM = b"\xef\xbb\xbf"
# What a gzip stream that cannot be read raises, besides OSError.
_GZIP_ERRORS = (EOFError, zlib.error)


def unreadable(path: Path | str, exc: OSError) -> DataError:
    """The error of a file that cannot be opened or read: missing, a directory, forbidden."""
    if isinstance(exc, gzip.BadGzipFile):
        return DataError(f"{path}: not a readable gzip file ({type(exc).__name__})")
    if isinstance(exc, FileNotFoundError):
        return DataError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return DataError(f"{path}: is a directory, not a file")
    return DataError(f"{path}: cannot read ({exc.strerror or exc})")


def _open(path: Path) -> IO[bytes] | gzip.GzipFile:
    try:
        if path.name.endswith(".gz"):
            return gzip.open(path, "rb")
        return path.open("rb")
    except OSError as exc:
        raise unreadable(path, exc) from None


def read_bytes(path: Path) -> bytes:
    """The whole file (gunzipped when its name ends in .gz); DataError if it cannot be read."""
    try:
        with _open(path) as fh:
            return fh.read()
    except OSError as exc:
        raise unreadable(path, exc) from None
    except _GZIP_ERRORS as exc:
        raise DataError(f"{path}: not a readable gzip file ({type(exc).__name__})") from None


def read_lines(
    path: Path, *, torn_tail: bool = False, digest: Any = None
) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line of `path` that is not blank, without its line end, read
    as the file is walked (gunzipped when its name ends in .gz); a byte-order mark opening the
    file is dropped. `torn_tail`: a last line with no newline is a write that was cut short (a
    journal's), left out. `digest` (a hashlib object), if given, is fed every byte on the way."""
    with _open(path) as fh:
        try:
            for lineno, raw in enumerate(fh, start=1):
                if digest is not None:
                    digest.update(raw)
                if torn_tail and not raw.endswith(b"\n"):
                    return
                line = raw.removeprefix(_BOM) if lineno == 1 else raw
                if line.strip():
                    yield lineno, line.rstrip(b"\r\n")
        except OSError as exc:
            raise unreadable(path, exc) from None
        except _GZIP_ERRORS as exc:
            raise DataError(f"{path}: not a readable gzip file ({type(exc).__name__})") from None


def parse_json(
    raw: bytes | str, where: str, *, strict: bool = False, document: bool = False
) -> Any:
    """The JSON value `raw` holds; else DataError "WHERE: what is wrong". `document`: `raw` is a
    whole file, and a syntax error names the line it is on (WHERE:LINE)."""
    try:
        if strict:
            return orjson.loads(raw)
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except UnicodeDecodeError:
        raise DataError(f"{where}: not UTF-8 text") from None
    except RecursionError:
        raise DataError(f"{where}: nested too deep") from None
    except json.JSONDecodeError as exc:  # orjson's errors are these too
        raise _syntax_error(exc, where, document) from None
    except ValueError as exc:
        # Python's json turns a long run of digits into an int, past its limit a ValueError.
        if "integer string conversion" in str(exc):
            limit = sys.get_int_max_str_digits()
            raise DataError(f"{where}: a number of more than {limit} digits") from None
        raise DataError(f"{where}: malformed JSON ({exc})") from None


def _syntax_error(exc: json.JSONDecodeError, where: str, document: bool) -> DataError:
    if "depth limit" in exc.msg:  # orjson's nesting limit
        return DataError(f"{where}: nested too deep")
    if "UTF-8" in exc.msg:
        return DataError(f"{where}: not UTF-8 text")
    if document:
        return DataError(f"{where}:{exc.lineno}: malformed JSON ({exc.msg}, column {exc.colno})")
    at = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno}, column {exc.colno}"
    return DataError(f"{where}: malformed JSON ({exc.msg}, {at})")


def json_object(raw: bytes | str, where: str, *, strict: bool = False) -> dict[str, Any]:
    """The JSON object `raw` holds; DataError naming `where` if it holds anything else."""
    value = parse_json(raw, where, strict=strict)
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def read_jsonl(
    path: Path, *, strict: bool = False, torn_tail: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file (see `read_lines`)."""
    for lineno, line in read_lines(path, torn_tail=torn_tail):
        yield lineno, json_object(line, f"{path}:{lineno}", strict=strict)


def read_json(path: Path, *, strict: bool = True) -> dict[str, Any]:
    """The JSON object a whole file holds (config.json, summary.json); DataError if not one."""
    value = parse_json(read_bytes(path), str(path), strict=strict, document=True)
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value
