"""`ttc serve`'s Anthropic Message Batches API, answered by the sim model.

    POST /v1/messages/batches                 create: {"requests": [{custom_id, params}]}
    GET  /v1/messages/batches                 list, newest first (after_id, before_id, limit)
    GET  /v1/messages/batches/{id}            retrieve
    POST /v1/messages/batches/{id}/cancel     cancel
    GET  /v1/messages/batches/{id}/results    its results (JSONL), once it has ended

A batch is a `message_batch`: `processing_status` in_progress, canceling or ended;
`request_counts` processing, succeeded, errored, canceled, expired (all processing until it
ends, as Anthropic counts them); `results_url` once it has ended; RFC 3339 times. Each results
line is `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error":
<an error response>} | {"type": "canceled"} | {"type": "expired"}}`. A request's `params` are
answered as `POST /v1/messages` answers them (checked then: a bad one is `errored` with an
invalid_request_error, as Anthropic checks params only when it processes them).

The life of a batch follows `--batch-delay`, `--batch-fail` (an `errored` api_error) and
`--batch-expire` (ends with part of its work done, the rest `expired`) as OpenAI's does
(`_batch_openai`); a cancel answers `canceling` and the batch ends at the next look (the rest
`canceled`). Checked at creation (400 invalid_request_error): a non-empty `requests`, at most
100,000 of them and 256 MB (413), each `custom_id` unique and of 1-64 letters, digits, `-` or
`_`, each `params` an object. Counters: `BatchStats`, in `/stats` under `batch`.
"""

from __future__ import annotations

import collections
import datetime
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from ttc.adapters.sim._batch_store import BatchRecord, BatchStats
from ttc.adapters.sim._wire import JSON, Invalid, read_body
from ttc.adapters.sim._wire_anthropic import ANTHROPIC

__all__ = ["MAX_BYTES", "MAX_REQUESTS", "AnthropicBatches", "route_name"]

# One request's params: (status, a message or an error response).
Answer = Callable[[dict[str, Any]], Awaitable[tuple[int, dict[str, Any]]]]

MAX_REQUESTS = 100_000
"""Anthropic: the most requests in one Message Batch."""
MAX_BYTES = 256 * 1024 * 1024
"""Anthropic: the largest Message Batch (256 MB)."""

_ROOT = "/v1/messages/batches"
_ONE = re.compile(r"^/v1/messages/batches/([^/]+)(/cancel|/results)?$")
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_COUNTS = ("succeeded", "errored", "canceled", "expired")


def route_name(path: str, method: str) -> str | None:
    """The name of an Anthropic batch route (`/stats`), or None."""
    if path == _ROOT:
        return {"POST": "anthropic.batches.create", "GET": "anthropic.batches.list"}.get(method)
    found = _ONE.match(path)
    if found is None:
        return None
    tail = found.group(2)
    if tail == "/cancel":
        return "anthropic.batches.cancel" if method == "POST" else None
    if tail == "/results":
        return "anthropic.batches.results" if method == "GET" else None
    return "anthropic.batches.retrieve" if method == "GET" else None


@dataclass(slots=True)
class _Job:
    record: BatchRecord
    requests: list[tuple[str, dict[str, Any]]]
    expire_at: float | None = None
    # The share of its work done when a cancel came (it ends at the next look).
    cancelled_at: float | None = None
    lines: list[bytes] = field(default_factory=list)
    counts: collections.Counter[str] = field(default_factory=collections.Counter)


class AnthropicBatches:
    """The Message Batches, in memory, and their routes (`handle`)."""

    def __init__(
        self,
        delay_s: float,
        fail: float,
        expire: float,
        seed: int,
        stats: BatchStats,
        answer: Answer,
        limit: int = MAX_BYTES,
    ) -> None:
        self.delay_s, self.fail, self.expire, self.seed = delay_s, fail, expire, seed
        self.stats = stats
        self.jobs: dict[str, _Job] = {}
        self._answer = answer
        self.limit = limit  # --max-body-mb

    async def handle(self, name: str, request: web.BaseRequest) -> web.Response:
        """The reply of the route `name` (raises Invalid for a bad request)."""
        origin = f"{request.scheme}://{request.host}"
        if name == "anthropic.batches.create":
            raw = await read_body(request, self.limit)
            if len(raw) > MAX_BYTES:
                return _error(413, f"a Message Batch is at most {MAX_BYTES:,} bytes")
            return _json(self._object(self.create(_body(raw)), origin))
        if name == "anthropic.batches.list":
            return _json(await self._listing(request.query, origin))
        found = _ONE.match(request.path)
        job = self.jobs.get(found.group(1)) if found else None
        if job is None:
            return _error(404, "No such Message Batch")
        if name == "anthropic.batches.cancel":
            await self._cancel(job)
        else:
            await self._advance(job)
        if name != "anthropic.batches.results":
            return _json(self._object(job, origin))
        if not job.record.final:
            return _error(404, f"Message Batch {job.record.id} has not ended yet")
        return web.Response(body=b"".join(job.lines), content_type="application/binary")

    def create(self, body: dict[str, Any]) -> _Job:
        """A new batch of the body's requests (checked, not yet answered)."""
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise Invalid("requests: a non-empty array is required")
        if len(requests) > MAX_REQUESTS:
            raise Invalid(f"requests: at most {MAX_REQUESTS:,} in a batch, got {len(requests):,}")
        seen: set[str] = set()
        checked: list[tuple[str, dict[str, Any]]] = []
        for i, entry in enumerate(requests):
            cid = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                raise Invalid(f"requests.{i}.custom_id: 1-64 characters of [A-Za-z0-9_-]")
            if cid in seen:
                raise Invalid(f"requests.{i}.custom_id: {cid!r} is repeated")
            params = entry.get("params")
            if not isinstance(params, dict):
                raise Invalid(f"requests.{i}.params: expected an object")
            seen.add(cid)
            checked.append((cid, params))
        number = len(self.jobs) + 1
        record = BatchRecord(f"msgbatch_sim{number:012d}", "", "/v1/messages", time.time())
        record.status = "in_progress"
        record.total = len(checked)
        job = _Job(record, checked)
        rng = random.Random(f"{self.seed}:anthropic:{number}")
        if rng.random() < self.expire:
            job.expire_at = rng.uniform(0.2, 0.8)
        self.jobs[record.id] = job
        self.stats.batches += 1
        return job

    async def _listing(self, query: Any, origin: str) -> dict[str, Any]:
        """Newest first; `after_id` pages to older batches, `before_id` to newer ones."""
        limit = _limit(query.get("limit", "20"))
        ids = list(reversed(self.jobs))
        after, before = query.get("after_id"), query.get("before_id")
        if before is not None:
            older = ids.index(before) if before in ids else len(ids)
            page, more = ids[max(0, older - limit) : older], older > limit
        else:
            start = ids.index(after) + 1 if after in ids else 0
            page, more = ids[start : start + limit], start + limit < len(ids)
        data = []
        for i in page:
            await self._advance(self.jobs[i])
            data.append(self._object(self.jobs[i], origin))
        return {
            "data": data,
            "has_more": more,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        }

    async def _cancel(self, job: _Job) -> None:
        record = job.record
        if record.status == "in_progress":
            job.cancelled_at = self._share(job)
            record.status = "cancelling"
            record.times["cancel_initiated_at"] = int(time.time())

    def _share(self, job: _Job) -> float:
        if self.delay_s <= 0:
            return 1.0
        return min(1.0, max(0.0, (time.time() - job.record.created_at) / self.delay_s))

    async def _advance(self, job: _Job) -> None:
        record = job.record
        if record.final:
            return
        if job.cancelled_at is not None:
            await self._finish(job, job.cancelled_at, "cancelled")
            return
        share = self._share(job)
        if job.expire_at is not None and share >= job.expire_at:
            await self._finish(job, job.expire_at, "expired")
        elif share >= 1.0:
            await self._finish(job, 1.0, "completed")

    async def _finish(self, job: _Job, share: float, status: str) -> None:
        """Answers the share of the requests that was done; the rest are `status`'s kind."""
        done = len(job.requests) if status == "completed" else round(len(job.requests) * share)
        undone = "canceled" if status == "cancelled" else "expired"
        rng = random.Random(f"{self.seed}:{job.record.id}:fail")
        for i, (cid, params) in enumerate(job.requests):
            result: dict[str, Any]
            if i >= done:
                result = {"type": undone}
                self.stats.undone += 1
            elif rng.random() < self.fail:
                error = orjson.loads(ANTHROPIC.error(500, "simulated failure"))
                result = {"type": "errored", "error": error}
                self.stats.failed += 1
            else:
                code, body = await self._answer(params)
                self.stats.answered += 1
                if code == 200:
                    result = {"type": "succeeded", "message": body}
                    _count_tokens(self.stats, body)
                else:
                    result = {"type": "errored", "error": body}
            job.counts[result["type"]] += 1
            line = {"custom_id": cid, "result": result}
            job.lines.append(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        job.record.completed, job.record.failed = job.counts["succeeded"], job.counts["errored"]
        job.record.end(status)

    def _object(self, job: _Job, origin: str) -> dict[str, Any]:
        """Anthropic's `message_batch` object."""
        record = job.record
        ended = record.final
        counts = {name: job.counts[name] if ended else 0 for name in _COUNTS}
        status = (
            "ended" if ended else "canceling" if record.status == "cancelling" else ("in_progress")
        )
        end = record.times.get(f"{record.status}_at")
        cancel = record.times.get("cancel_initiated_at")
        return {
            "id": record.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {"processing": 0 if ended else record.total, **counts},
            "ended_at": _rfc3339(end) if ended and end is not None else None,
            "created_at": _rfc3339(record.created_at),
            "expires_at": _rfc3339(record.created_at + 86400),
            "archived_at": None,
            "cancel_initiated_at": None if cancel is None else _rfc3339(cancel),
            "results_url": f"{origin}{_ROOT}/{record.id}/results" if ended else None,
        }


def _count_tokens(stats: BatchStats, body: dict[str, Any]) -> None:
    """The usage of one answered message (Anthropic counts thinking in output_tokens)."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return
    details = usage.get("output_tokens_details") or {}
    thinking = int(details.get("thinking_tokens") or 0)
    fields = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    stats.tokens[0] += sum(int(usage.get(name) or 0) for name in fields)
    stats.tokens[1] += int(usage.get("output_tokens") or 0) - thinking
    stats.tokens[2] += thinking


def _limit(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"limit: expected an integer, got {raw!r}") from None
    if not 1 <= value <= 1000:
        raise Invalid(f"limit: must be in [1, 1000], got {value}")
    return value


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    return body


def _rfc3339(t: float) -> str:
    when = datetime.datetime.fromtimestamp(t, datetime.UTC)
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _json(obj: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(obj), content_type=JSON)


def _error(status: int, message: str) -> web.Response:
    return web.Response(body=ANTHROPIC.error(status, message), status=status, content_type=JSON)
