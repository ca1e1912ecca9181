"""The files of `ttc batch`: the OpenAI Batch input (validated, then read lazily), its journal,
and the output written from the journal in input order.

The journal (`OUTPUT.journal`) holds a `start` line naming the input by its sha256
(`BatchStarted`), then one `result` line (`RequestResult`) per request that landed, each the output
line to be (`out`) with whether it is final (a 2xx or 4xx response) or an error to send again on
resume. A later result of the same request wins. Only the byte offset of each request's latest
result is kept in memory: the output is copied from the journal at the end, so no request body or
response is held for the whole run.
"""

from __future__ import annotations

import array
import hashlib
import os
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

import orjson

from ttc.engine import ConfigError, DataError
from ttc.engine._util._nofollow import open_file, temp_file
from ttc.engine._util._records import json_object, parse_json, read_lines, unreadable
from ttc.engine.journal import Journal, LimitsSteered
from ttc.engine.journal._codec import Codec, event, spec
from ttc.engine.send import token_count

URLS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")


@dataclass(frozen=True, slots=True)
class InputScan:
    """What the validating pass learnt of an input file: its sha256 and number of requests."""

    path: Path
    sha256: str
    count: int


@dataclass(frozen=True, slots=True)
class BatchJob:
    """One request of the input, read when it is about to be sent."""

    index: int
    custom_id: str
    url: str
    body: dict[str, Any]


def _text_or_empty(raw: Any) -> str:
    return "" if raw is None else str(raw)


@event()
@dataclass(frozen=True, slots=True)
class BatchStarted:
    """A `ttc batch` session began on the input `input` (named by its sha256)."""

    KIND: ClassVar[str] = "start"
    input: str = field(metadata=spec(missing=""))
    input_sha256: str = field(metadata=spec(missing="", dec=_text_or_empty))
    requests: int = field(metadata=spec(missing=0))
    resumed: bool = field(metadata=spec(missing=False))


def _output_line(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TypeError("'out' is not an object")
    return raw


@event()
@dataclass(frozen=True, slots=True)
class RequestResult:
    """Request `i` landed: its output line `out`, final (2xx, 4xx) or an error to send again."""

    KIND: ClassVar[str] = "result"
    i: int
    final: bool
    attempts: int = field(metadata=spec(missing=1))
    out: dict[str, Any] = field(metadata=spec(dec=_output_line))


# A `ttc batch` journal, read back.
# `control`: `ttc ctl`'s changes (`_control`), replayed by a resumed batch.
BATCH_JOURNAL = Codec(BatchStarted, RequestResult, LimitsSteered)


def _parse(
    path: Path, lineno: int, raw: bytes, need_model: bool
) -> tuple[str, str, dict[str, Any]]:
    """Request line `lineno`'s custom_id, url and body; DataError naming the line and field.
    Read twice per request (the scan, then the send), so a valid line costs one parse and a
    few lookups; the error's words are found only for a line that has one."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        record = None  # `json_object` says what is wrong, and where
    if not isinstance(record, dict):
        record = json_object(raw, f"{path}:{lineno}", strict=True)
    custom_id, method = record.get("custom_id"), record.get("method")
    url, body = record.get("url"), record.get("body")
    if (
        isinstance(custom_id, str)
        and custom_id
        and method == "POST"
        and url in URLS
        and isinstance(body, dict)
        and (not need_model or isinstance(body.get("model"), str))
    ):
        return custom_id, url, body
    raise _invalid(f"{path}:{lineno}", record, need_model)


def _invalid(where: str, record: dict[str, Any], need_model: bool) -> DataError:
    """What is wrong with a request line that `_parse` refused."""
    for name in ("custom_id", "method", "url", "body"):
        if name not in record:
            return DataError(f"{where}: missing field '{name}'")
    custom_id, method, url, body = (record[k] for k in ("custom_id", "method", "url", "body"))
    if not isinstance(custom_id, str) or not custom_id:
        return DataError(
            f"{where}: field 'custom_id' must be a non-empty string, got {custom_id!r}"
        )
    if method != "POST":
        return DataError(f"{where}: field 'method' must be \"POST\", got {method!r}")
    if url not in URLS:
        return DataError(
            f"{where}: field 'url' {url!r} is not supported (one of {', '.join(URLS)})"
        )
    if not isinstance(body, dict):
        return DataError(f"{where}: field 'body' must be an object, got {type(body).__name__}")
    # The one check left: `_parse` refused the line for it.
    return DataError(f"{where}: field 'body.model' is missing (or give --model)")


def scan_input(path: Path, *, need_model: bool) -> InputScan:
    """Validates every line before any request is sent; DataError names the file, line, field."""
    digest = hashlib.sha256()
    first_line: dict[str, int] = {}
    for lineno, raw in read_lines(path, digest=digest):
        custom_id, _, _ = _parse(path, lineno, raw, need_model)
        if custom_id in first_line:
            raise DataError(
                f"{path}:{lineno}: duplicate custom_id {custom_id!r} (first on line "
                f"{first_line[custom_id]})"
            )
        first_line[custom_id] = lineno
    if not first_line:
        raise DataError(f"{path}: no requests: the file is empty")
    return InputScan(path, digest.hexdigest(), len(first_line))


def iter_jobs(path: Path, skip: bytearray) -> Generator[BatchJob, None, None]:
    """The requests of a scanned input in order, parsed one at a time; `skip[i]` leaves one out."""
    for index, (lineno, raw) in enumerate(read_lines(path)):
        if index < len(skip) and skip[index]:
            continue
        custom_id, url, body = _parse(path, lineno, raw, need_model=False)
        yield BatchJob(index, custom_id, url, body)


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + ".journal")


class BatchJournal:
    """The results landed so far: appended one flushed line each, read back by offset."""

    def __init__(self, path: Path, scan: InputScan) -> None:
        self.path = path
        self.scan = scan
        # Per request: the byte offset of its latest result (-1: none), and whether it is final.
        self.offsets = array.array("q", [-1]) * scan.count
        self.final = bytearray(scan.count)
        # Per request, what its latest result counts as (its `outcome_key`, by its place in
        # `_outcomes`) and the tokens it used, kept as results land or are read back: the
        # summary's tallies, so that the output is copied from the journal unparsed.
        self._outcome = array.array("I", [0]) * scan.count
        self._tokens = array.array("I", [0]) * scan.count
        # Per request, whether its latest result line is laid out as this version writes it
        # (`LAYOUT`): its output line is then copied from it unparsed (`output_bytes`).
        self._ours = bytearray(scan.count)
        self._outcomes: list[str] = []
        self._outcome_codes: dict[str, int] = {}
        self.replayed = 0  # requests with a final result in the journal before this run
        self.steered: list[LimitsSteered] = []  # `ttc ctl`'s changes in it, in order
        self._journal = Journal(path)  # the engine's append-only writer

    def open(self, *, resume: bool) -> BatchJournal:
        """Reads an existing journal of the same input (cutting a torn tail), or starts one."""
        exists = self.path.exists() and self.path.stat().st_size > 0
        if resume and not exists:
            raise ConfigError(f"--resume: no journal at {self.path}; run without --resume")
        if exists:
            self._load()
        self._journal.open()
        self.append(BatchStarted(str(self.scan.path), self.scan.sha256, self.scan.count, exists))
        return self

    def _load(self) -> None:
        offset = 0
        try:
            fh = self.path.open("rb")
        except OSError as exc:
            raise unreadable(self.path, exc) from None
        with fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.endswith(b"\n"):
                    break  # a torn last line: the write that was cut off never happened
                fields = json_object(raw, f"{self.path}:{lineno}", strict=True)
                try:
                    kind = fields["ev"]
                    if lineno == 1:
                        self._check_input(kind, fields)
                    elif kind == RequestResult.KIND:
                        result = BATCH_JOURNAL.decode(fields)
                        if not 0 <= result.i < len(self.offsets):
                            raise IndexError(f"request {result.i} of {len(self.offsets)}")
                        self.offsets[result.i] = offset
                        self.final[result.i] = result.final
                        self._ours[result.i] = tuple(fields) == LAYOUT
                        self._count(result.i, result.out)
                    elif kind == LimitsSteered.KIND:
                        self.steered.append(BATCH_JOURNAL.decode(fields))
                except (KeyError, TypeError, ValueError, IndexError) as e:
                    raise DataError(f"{self.path}:{lineno}: corrupt journal line ({e!r})") from None
                offset += len(raw)
        if offset != self.path.stat().st_size:
            with open_file(self.path, "r+b") as torn:
                torn.truncate(offset)
        self.replayed = sum(self.final)

    def _check_input(self, kind: str, fields: dict[str, Any]) -> None:
        if kind != BatchStarted.KIND:
            raise DataError(f"{self.path}:1: not a `ttc batch` journal")
        start = BATCH_JOURNAL.decode(fields)
        if start.input_sha256 != self.scan.sha256:
            raise ConfigError(
                f"--out: {self.path} is the journal of a different input ({start.input}, "
                f"sha256 {str(fields.get('input_sha256'))[:12]}), not of {self.scan.path} "
                f"(sha256 {self.scan.sha256[:12]}); remove it or choose another --out"
            )

    def append(self, event: BatchStarted | RequestResult | LimitsSteered) -> int:
        """Hands one event, as one line, to the journal's writer; returns the line's offset."""
        return self._journal.append(event)

    def record(
        self,
        index: int,
        out: dict[str, Any],
        *,
        final: bool,
        attempts: int,
        tokens: int | None = None,
    ) -> None:
        """Appends request `index`'s result (the output line `out`); `tokens`, the tokens its
        response used when the caller has counted them already (`usage_tokens`)."""
        self.offsets[index] = self.append(RequestResult(index, final, attempts, out))
        self.final[index] = final
        self._ours[index] = True
        self._count(index, out, tokens)

    def _count(self, index: int, out: dict[str, Any], tokens: int | None = None) -> None:
        """Request `index`'s latest result is the output line `out`: counted by its outcome and
        its tokens (a token count fits 32 bits: `token_count` caps it at ten million)."""
        key = outcome_key(out)
        code = self._outcome_codes.get(key)
        if code is None:
            code = self._outcome_codes[key] = len(self._outcomes)
            self._outcomes.append(key)
        self._outcome[index] = code
        if tokens is None:
            response = out.get("response")
            tokens = usage_tokens(response.get("body")) if isinstance(response, dict) else 0
        self._tokens[index] = tokens

    def counts(self) -> tuple[Counter[str], int]:
        """The results by outcome (status code or `error:<kind>`), and the tokens they used."""
        codes: Counter[int] = Counter()
        tokens = 0
        for offset, code, used in zip(self.offsets, self._outcome, self._tokens, strict=True):
            if offset >= 0:
                codes[code] += 1
                tokens += used
        return Counter({self._outcomes[code]: n for code, n in codes.items()}), tokens

    @property
    def complete(self) -> bool:
        """Whether every request has a result (final or not)."""
        return all(o >= 0 for o in self.offsets)

    def outputs(self) -> Iterator[bytes]:
        """The output line (with its newline) of every request that has a result, in input
        order, read back from the journal (`output_bytes`)."""
        self._journal.flush()  # read back from the file: every line appended must be in it
        where = str(self.path)
        with self.path.open("rb") as fh:
            for offset, ours in zip(self.offsets, self._ours, strict=True):
                if offset < 0:
                    continue
                fh.seek(offset)
                yield output_bytes(fh.readline(), where, sliced=bool(ours))

    def close(self) -> None:
        self._journal.close()

    def __enter__(self) -> BatchJournal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# The keys of a result line as this version writes it (`RequestResult`, then the wall-clock time
# `Journal.append` adds): its output line (`out`) last but for the time.
LAYOUT = ("ev", "i", "final", "attempts", "out", "at")
_RESULT_HEAD = b'{"ev":"result","i":'
_OUT_KEY, _AT_KEY = b',"out":', b',"at":'


def output_bytes(line: bytes, where: str, *, sliced: bool = True) -> bytes:
    """The output line (with its newline) a result line of the journal holds. `sliced`: the
    line is known to be laid out as `LAYOUT` (written by this version, or checked when read
    back), and its `out` value's own bytes are taken, as orjson wrote them, which are the bytes
    it writes for the value alone; otherwise (another layout, a line written by hand) the line
    is parsed and its output line written again.

    In such a line the first `,"out":` is the key itself (the fields before it are numbers,
    booleans and the kind, and a quote inside a JSON string is escaped); the last `,"at":` is
    the time's key when a number and the line's end follow it (a key of that name inside `out`
    is followed by more of `out`)."""
    if sliced and line.startswith(_RESULT_HEAD) and line.endswith(b"}\n"):
        start = line.find(_OUT_KEY) + len(_OUT_KEY)
        end = line.rfind(_AT_KEY)
        if len(_OUT_KEY) <= start < end and line[start] == 0x7B and line[end - 1] == 0x7D:
            try:
                float(line[end + len(_AT_KEY) : -2])
            except ValueError:
                pass
            else:
                return line[start:end] + b"\n"
    fields = parse_json(line, where, strict=True)
    out = fields.get("out") if isinstance(fields, dict) else None
    if not isinstance(out, dict):
        raise DataError(f"{where}: a result line with no output line")
    return orjson.dumps(out, option=orjson.OPT_APPEND_NEWLINE)


def outcome_key(out: dict[str, Any]) -> str:
    """How a result is counted: its status code, or `error:<kind>` (`?` when a journal written
    by hand says none)."""
    response = out.get("response")
    if isinstance(response, dict):
        return str(response.get("status_code"))
    error = out.get("error")
    return f"error:{error.get('code', '?') if isinstance(error, dict) else '?'}"


USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")


def usage_tokens(body: Any) -> int:
    """Tokens a response body says it used: total_tokens, else its input plus its output. A value
    that is no token count (negative, not an int, absurd: `token_count`) is left out."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return 0
    total = token_count(usage.get("total_tokens"))
    if total is not None:
        return total
    return sum(n for k in USAGE_FIELDS if (n := token_count(usage.get(k))) is not None)


def tally(journal: BatchJournal, output: Path | None) -> tuple[Counter[str], int]:
    """Counts the results by outcome and sums their tokens; writes them to `output` if given.

    The output appears atomically (a temporary file renamed over it), so a reader never sees a
    half-written file and an interrupted write leaves any previous output as it was.
    """
    counts, tokens = journal.counts()
    if output is None:
        return counts, tokens
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    sink = temp_file(tmp)
    try:
        for line in journal.outputs():
            sink.write(line)
        sink.flush()
        os.fsync(sink.fileno())
        sink.close()
        os.replace(tmp, output)
    finally:
        if not sink.closed:
            sink.close()
        if tmp.exists():
            tmp.unlink()
    return counts, tokens
