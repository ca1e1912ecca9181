"""`ttc serve`'s OpenAI Batch API: files and batches, answered by the sim model.

    POST /v1/files                      upload (multipart: `file`, `purpose`)
    GET  /v1/files/{id}                 a file's object
    GET  /v1/files/{id}/content         its bytes
    POST /v1/batches                    create (`input_file_id`, `endpoint`, `completion_window`)
    GET  /v1/batches                    list, newest first (`after`, `limit`)
    GET  /v1/batches/{id}               retrieve
    POST /v1/batches/{id}/cancel        cancel

A batch's life is a function of the time since it was created and `--batch-delay` D: validating
for the first tenth of D, then in progress (its counts grow with the time), then completed: its
requests are answered when it is first seen after D (the sim, exactly as the synchronous route
answers the same body), into an output file and an error file. `--batch-fail` P fails each
request with that probability (a 500 in the error file); `--batch-expire` P expires each batch
with that probability, with part of its work done (the rest: `batch_expired` in the error file).
Draws are seeded by `--seed` and the batch's number, so a rehearsal repeats. A cancelled batch
keeps the work done before it (the rest: `batch_cancelled`).

Input is checked as OpenAI checks it: a file of purpose `batch`, at most 50,000 requests and
200 MB, each line with a unique `custom_id`, `method` POST and the batch's `url`; a batch that
breaks one is `failed` with the line named in its `errors`. Counters: `BatchStats`, in `/stats`
under `batch`, apart from the synchronous routes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ttc.adapters.sim._batch_store import (
    MAX_BATCH_BYTES,
    MAX_BATCH_REQUESTS,
    BatchRecord,
    BatchStats,
    StoredFile,
)
from ttc.adapters.sim._wire import Invalid

__all__ = ["OpenAIBatches"]

# What answers one chat-completion body: its 200 body, or (status, error message).
Answer = Callable[[dict[str, Any], str], Awaitable[tuple[int, dict[str, Any]]]]


@dataclass(slots=True)
class _Line:
    custom_id: str
    body: dict[str, Any]


@dataclass(slots=True)
class _Batch:
    record: BatchRecord
    lines: list[_Line] = field(default_factory=list)
    # Decided at creation (seeded): expires with this share of its requests done, or never.
    expire_at: float | None = None


class OpenAIBatches:
    """The store and the routes of OpenAI's Batch API (the server dispatches to `handle`)."""

    def __init__(self, delay_s: float, fail: float, expire: float, seed: int) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.expire = expire
        self.seed = seed
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, _Batch] = {}
        self.stats = BatchStats()

    # Files

    def upload(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        """Stores an uploaded file; returns its object."""
        if purpose not in ("batch", "batch_output", "assistants", "fine-tune", "user_data"):
            raise Invalid(f"purpose: unknown purpose {purpose!r}")
        stored = StoredFile(f"file-sim{len(self.files) + 1:012d}", data, filename, purpose)
        self.files[stored.id] = stored
        self.stats.files += 1
        return stored.as_object()

    def file(self, file_id: str) -> StoredFile | None:
        """A stored file, or None."""
        return self.files.get(file_id)

    # Batches

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """A new batch from an uploaded file (validated at once)."""
        file_id = body.get("input_file_id")
        endpoint = body.get("endpoint")
        if not isinstance(file_id, str) or not file_id:
            raise Invalid("input_file_id: required")
        if endpoint not in _ENDPOINTS:
            raise Invalid(f"endpoint: only {', '.join(_ENDPOINTS)} are served, got {endpoint!r}")
        if body.get("completion_window") != "24h":
            raise Invalid("completion_window: must be '24h'")
        stored = self.files.get(file_id)
        if stored is None:
            raise Invalid(f"input_file_id: no such file: {file_id}")
        metadata = body.get("metadata")
        number = len(self.batches) + 1
        record = BatchRecord(
            id=f"batch_sim{number:012d}",
            input_file_id=file_id,
            endpoint=endpoint,
            created_at=time.time(),
            metadata=metadata if isinstance(metadata, dict) else None,
        )
        batch = _Batch(record)
        self.batches[record.id] = batch
        self.stats.batches += 1
        problem = _validate(stored, endpoint, batch.lines)
        if problem is not None:
            record.fail(*problem)
            return record.as_object()
        record.total = len(batch.lines)
        rng = random.Random(f"{self.seed}:{number}")
        if rng.random() < self.expire:
            batch.expire_at = rng.uniform(0.2, 0.8)
        return record.as_object()

    async def retrieve(self, batch_id: str, answer: Answer) -> dict[str, Any] | None:
        """A batch's object as it stands now (answered once its time is up), or None."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        await self._advance(batch, answer)
        return batch.record.as_object()

    async def cancel(self, batch_id: str, answer: Answer) -> dict[str, Any] | None:
        """Cancels a batch still running (the work done so far is kept), or None."""
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        record = batch.record
        if record.status in ("validating", "in_progress"):
            done = self._share_done(record)
            await self._finish(batch, answer, done, "cancelled")
        return record.as_object()

    async def listing(self, after: str | None, limit: int, answer: Answer) -> dict[str, Any]:
        """The batches, newest first, after the one named `after`."""
        ids = list(reversed(self.batches))
        if after is not None and after in self.batches:
            ids = ids[ids.index(after) + 1 :]
        page = ids[:limit]
        data = [await self.retrieve(i, answer) for i in page]
        return {
            "object": "list",
            "data": data,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
            "has_more": len(ids) > len(page),
        }

    def _share_done(self, record: BatchRecord) -> float:
        if self.delay_s <= 0:
            return 1.0
        return min(1.0, max(0.0, (time.time() - record.created_at) / self.delay_s))

    async def _advance(self, batch: _Batch, answer: Answer) -> None:
        record = batch.record
        if record.status not in ("validating", "in_progress"):
            return
        share = self._share_done(record)
        if batch.expire_at is not None and share >= batch.expire_at:
            await self._finish(batch, answer, batch.expire_at, "expired")
        elif share >= 1.0:
            await self._finish(batch, answer, 1.0, "completed")
        elif share >= 0.1:
            record.start()
            record.completed = int(record.total * share)

    async def _finish(self, batch: _Batch, answer: Answer, share: float, status: str) -> None:
        """Answers the share of the batch's requests that was done; the rest get `status`'s
        error code."""
        record = batch.record
        record.start()
        done = round(len(batch.lines) * share) if status != "completed" else len(batch.lines)
        rng = random.Random(f"{self.seed}:{record.id}:fail")
        out: list[bytes] = []
        err: list[bytes] = []
        for i, line in enumerate(batch.lines):
            serial = f"batch_req_sim{len(out) + len(err) + 1:08d}{record.id[-6:]}"
            if i >= done:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                message = _UNDONE[code]
                err.append(
                    _result(serial, line.custom_id, None, {"code": code, "message": message})
                )
                self.stats.undone += 1
                continue
            if rng.random() < self.fail:
                body = {"error": {"message": "simulated failure", "type": "server_error"}}
                err.append(_result(serial, line.custom_id, _response(500, body), None))
                self.stats.failed += 1
                continue
            status_code, body = await answer(line.body, record.endpoint)
            self.stats.answered += 1
            self.stats.count_tokens(body)
            target = out if status_code == 200 else err
            target.append(_result(serial, line.custom_id, _response(status_code, body), None))
        record.completed = sum(1 for _ in out)
        record.failed = len(err)
        record.output_file_id = self._output(out, record.id, "output") if out else None
        record.error_file_id = self._output(err, record.id, "error") if err else None
        record.end(status)

    def _output(self, lines: list[bytes], batch_id: str, kind: str) -> str:
        stored = StoredFile(
            f"file-sim{len(self.files) + 1:012d}",
            b"".join(lines),
            f"{batch_id}_{kind}.jsonl",
            "batch_output",
        )
        self.files[stored.id] = stored
        return stored.id


_ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
_UNDONE = {
    "batch_expired": "This request could not be executed before the completion window expired.",
    "batch_cancelled": "This request was not executed because the batch was cancelled.",
}


def _response(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"status_code": status, "request_id": "req_sim", "body": body}


def _result(
    serial: str, custom_id: str, response: dict[str, Any] | None, error: dict[str, Any] | None
) -> bytes:
    line = {"id": serial, "custom_id": custom_id, "response": response, "error": error}
    return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)


def _validate(stored: StoredFile, endpoint: str, lines: list[_Line]) -> tuple[str, str, int] | None:
    """The input file's lines into `lines`; (code, message, line number) of the first problem."""
    if stored.purpose != "batch":
        return "invalid_file", f"file {stored.id} has purpose {stored.purpose!r}, not 'batch'", 0
    if len(stored.data) > MAX_BATCH_BYTES:
        return "file_too_large", f"the input file is over {MAX_BATCH_BYTES:,} bytes", 0
    seen: set[str] = set()
    for number, raw in enumerate(stored.data.splitlines(), 1):
        if not raw.strip():
            continue
        found = _line(raw, endpoint, seen)
        if isinstance(found, tuple):
            return (*found, number)
        seen.add(found.custom_id)
        lines.append(found)
    if not lines:
        return "empty_file", "the input file holds no requests", 0
    if len(lines) > MAX_BATCH_REQUESTS:
        return "too_many_requests", f"more than {MAX_BATCH_REQUESTS:,} requests", 0
    return None


def _line(raw: bytes, endpoint: str, seen: set[str]) -> _Line | tuple[str, str]:
    """One input line, or (code, message) of what is wrong with it."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "invalid_json_line", "this line is not valid JSON"
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        return "missing_required_parameter", "custom_id: required"
    if obj["custom_id"] in seen:
        return "duplicate_custom_id", f"custom_id {obj['custom_id']!r} is repeated"
    if obj.get("method") != "POST" or obj.get("url") != endpoint:
        return "invalid_url", f"method must be POST and url {endpoint}"
    if not isinstance(obj.get("body"), dict):
        return "invalid_request", "body: expected an object"
    return _Line(obj["custom_id"], obj["body"])
