"""`ttc serve`'s Gemini Batch API (the Developer API's: inline requests, or a JSONL file), answered
by the sim.

    POST /{v1,v1beta}/models/{model}:batchGenerateContent   create (inline requests, or
                                                              inputConfig.fileName: a file of
                                                              the Files API, `_batch_gemini_files`)
    GET  /{v1,v1beta}/batches/{id}                          get
    GET  /{v1,v1beta}/batches                               list, newest first (pageSize,
                                                              pageToken)
    POST /{v1,v1beta}/batches/{id}:cancel                   cancel

A batch is a long-running operation (`batches/…`) whose metadata is a GenerateContentBatch: its
`state` (BATCH_STATE_PENDING, _RUNNING, _SUCCEEDED, _FAILED, _CANCELLED, _EXPIRED), its
`displayName`, `batchStats`, and at its end `output.inlinedResponses`: one per request done, in
request order with its `metadata`, holding a GenerateContentResponse or a google.rpc.Status
`error`. A batch of a file instead ends with `output.responsesFile`: a file of JSONL lines
`{"key": …, "response": GenerateContentResponse}` or `{"key": …, "error": Status}`, one per
request done, each line's `key` that of its input line `{"key": …, "request": …}`. Its life
follows `--batch-delay`, `--batch-fail` and `--batch-expire` as OpenAI's does
(`_batch_openai`); requests an expired or cancelled batch never ran have no entry.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ttc.adapters.sim._batch_gemini_files import GeminiFiles
from ttc.adapters.sim._batch_store import BatchRecord, BatchStats
from ttc.adapters.sim._wire import Invalid

__all__ = ["GeminiBatches"]

# One request's body (a GenerateContentRequest) and its model: (status, response or error).
Answer = Callable[[dict[str, Any], str], Awaitable[tuple[int, dict[str, Any]]]]

_STATES = {
    "validating": "PENDING",
    "in_progress": "RUNNING",
    "completed": "SUCCEEDED",
    "failed": "FAILED",
    "cancelled": "CANCELLED",
    "expired": "EXPIRED",
}
_MAX_INLINE = 20 * 1024 * 1024


@dataclass(slots=True)
class _Job:
    record: BatchRecord
    model: str
    requests: list[dict[str, Any]]
    display_name: str = ""
    expire_at: float | None = None
    # A batch of a file: its responses go to a file (else inline).
    from_file: bool = False
    responses: list[dict[str, Any]] = field(default_factory=list)


class GeminiBatches:
    """The batch operations of Gemini's Developer API, in memory."""

    def __init__(
        self, delay_s: float, fail: float, expire: float, seed: int, stats: BatchStats
    ) -> None:
        self.delay_s, self.fail, self.expire, self.seed = delay_s, fail, expire, seed
        self.jobs: dict[str, _Job] = {}
        self.stats = stats
        self.files = GeminiFiles()

    def create(self, model: str, body: dict[str, Any], size: int) -> dict[str, Any]:
        """A new batch of inline requests, or of an uploaded JSONL file."""
        batch = body.get("batch")
        if not isinstance(batch, dict):
            raise Invalid("batch: required")
        config = batch.get("inputConfig") or batch.get("input_config") or {}
        if not isinstance(config, dict):
            raise Invalid("batch.inputConfig: expected an object")
        file_name = config.get("fileName", config.get("file_name"))
        requests = self._file(file_name) if file_name else _inline(config, size)
        if not all(isinstance(r, dict) and isinstance(r.get("request"), dict) for r in requests):
            raise Invalid("batch.inputConfig.requests.requests[]: each needs a request object")
        number = len(self.jobs) + 1
        record = BatchRecord(
            f"batches/sim{number:012d}", str(file_name or ""), "generateContent", time.time()
        )
        record.total = len(requests)
        job = _Job(record, model, requests, str(batch.get("displayName") or ""))
        job.from_file = bool(file_name)
        rng = random.Random(f"{self.seed}:gemini:{number}")
        if rng.random() < self.expire:
            job.expire_at = rng.uniform(0.2, 0.8)
        self.jobs[record.id] = job
        self.stats.batches += 1
        return self._operation(job)

    def _file(self, name: Any) -> list[dict[str, Any]]:
        """The requests of an uploaded JSONL file: one `{"key", "request"}` object a line."""
        stored = self.files.get(str(name))
        if stored is None:
            raise Invalid(f"batch.inputConfig.fileName: no such file: {name}")
        requests: list[dict[str, Any]] = []
        for number, raw in enumerate(stored.data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise Invalid(f"{name}, line {number}: not valid JSON") from None
            if not isinstance(line, dict) or not isinstance(line.get("request"), dict):
                raise Invalid(f'{name}, line {number}: expected {{"key", "request"}}')
            requests.append(line)
        if not requests:
            raise Invalid(f"batch.inputConfig.fileName: {name} holds no request")
        return requests

    async def get(self, name: str, answer: Answer) -> dict[str, Any] | None:
        job = self.jobs.get(name)
        if job is None:
            return None
        await self._advance(job, answer)
        return self._operation(job)

    async def cancel(self, name: str, answer: Answer) -> dict[str, Any] | None:
        job = self.jobs.get(name)
        if job is None:
            return None
        if not job.record.final:
            await self._finish(job, answer, self._share(job), "cancelled")
        return {}

    async def listing(self, size: int, token: str, answer: Answer) -> dict[str, Any]:
        names = list(reversed(self.jobs))
        start = int(token) if token.isdigit() else 0
        page = names[start : start + size]
        found = [await self.get(n, answer) for n in page]
        more = start + size < len(names)
        return {"operations": found, **({"nextPageToken": str(start + size)} if more else {})}

    def _share(self, job: _Job) -> float:
        if self.delay_s <= 0:
            return 1.0
        return min(1.0, max(0.0, (time.time() - job.record.created_at) / self.delay_s))

    async def _advance(self, job: _Job, answer: Answer) -> None:
        if job.record.final:
            return
        share = self._share(job)
        if job.expire_at is not None and share >= job.expire_at:
            await self._finish(job, answer, job.expire_at, "expired")
        elif share >= 1.0:
            await self._finish(job, answer, 1.0, "completed")
        elif share >= 0.1:
            job.record.start()
            job.record.completed = int(job.record.total * share)

    async def _finish(self, job: _Job, answer: Answer, share: float, status: str) -> None:
        record = job.record
        record.start()
        done = len(job.requests) if status == "completed" else round(len(job.requests) * share)
        rng = random.Random(f"{self.seed}:{record.id}:fail")
        ok = failed = 0
        for i, entry in enumerate(job.requests):
            if i >= done:
                self.stats.undone += 1
                continue
            out = _holder(entry, job.from_file)
            if rng.random() < self.fail:
                out["error"] = {"code": 500, "message": "simulated failure", "status": "INTERNAL"}
                self.stats.failed += 1
                failed += 1
            else:
                code, body = await answer(entry["request"], job.model)
                out["response" if code == 200 else "error"] = body
                ok += code == 200
                failed += code != 200
                self.stats.answered += 1
                self.stats.count_gemini(body)
            job.responses.append(out)
        record.completed, record.failed = ok, failed
        if job.from_file:
            data = b"".join(
                orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in job.responses
            )
            stored = self.files.put(
                data, f"{record.id}-responses", "application/jsonl", source="GENERATED"
            )
            record.output_file_id = stored.name
        record.end(status)

    def _operation(self, job: _Job) -> dict[str, Any]:
        record = job.record
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{job.model}",
            "displayName": job.display_name,
            "state": "BATCH_STATE_" + _STATES[record.status],
            "createTime": _rfc3339(record.created_at),
            "batchStats": {
                "requestCount": str(record.total),
                "successfulRequestCount": str(record.completed),
                "failedRequestCount": str(record.failed),
                "pendingRequestCount": str(max(0, record.total - record.completed - record.failed)),
            },
        }
        if record.final:
            meta["endTime"] = _rfc3339(time.time())
            if job.from_file:
                meta["output"] = {"responsesFile": record.output_file_id}
            else:
                meta["output"] = {"inlinedResponses": {"inlinedResponses": job.responses}}
        return {"name": record.id, "metadata": meta, "done": record.final}


def _inline(config: dict[str, Any], size: int) -> list[dict[str, Any]]:
    holder = config.get("requests")
    requests = holder.get("requests") if isinstance(holder, dict) else None
    if not isinstance(requests, list) or not requests:
        raise Invalid("batch.inputConfig.requests.requests: a non-empty array is required")
    if size > _MAX_INLINE:
        raise Invalid("inline requests: the request is over 20 MB; use a file")
    return requests


def _holder(entry: dict[str, Any], from_file: bool) -> dict[str, Any]:
    """A request's result before its answer: a file line keeps its `key`, an inline response
    its `metadata`."""
    if from_file:
        return {} if entry.get("key") is None else {"key": entry["key"]}
    meta = entry.get("metadata")
    return {} if meta is None else {"metadata": meta}


def _rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat().replace("+00:00", "Z")
