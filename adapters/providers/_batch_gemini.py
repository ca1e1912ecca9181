"""Gemini's Batch API (the Developer API's, `ttc serve`'s too) through the official
`google-genai` client: the control plane of batch mode.

    upload   kept here: the requests go inline in the create call (a round over the inline
             limit, 20 MB, is split over several batches by `max_bytes`)
    create   client.aio.batches.create(model, src=[InlinedRequest(contents, config,
             metadata={"key": custom id})], config={"display_name": tag})
    poll     client.aio.batches.get(name)
    results  the batch's dest.inlined_responses: a GenerateContentResponse, or a JobError
    find     client.aio.batches.list, for a batch whose display name is the tag

Each request is the one `GeminiProvider` sends synchronously (its contents and config), and each
answer is read by it, so usage, cached tokens and the "simulated" label are the synchronous
path's. Errors go through the provider's one translation (`gemini_errors`). A request's own
result: a response → its completion; a JobError → Transient (`failed`: sent again), or, for a
4xx code, BadRequest (not sent again); a request of an expired or cancelled batch with no
result → sent again (`expired`, `cancelled`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.providers._http import redact
from ttc.engine import (
    BadRequest,
    BatchAPI,
    BatchResult,
    BatchStatus,
    Message,
    ProviderError,
    Request,
    Transient,
)

__all__ = ["GeminiBatchAPI"]

_STATES = {
    "JOB_STATE_PENDING": "validating",
    "JOB_STATE_QUEUED": "validating",
    "JOB_STATE_RUNNING": "in_progress",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}
_FIND_PAGES = 20


class GeminiBatchAPI(BatchAPI):
    """The Batch API of `provider`'s server, through the provider's own google-genai client."""

    name = "gemini-batch"
    # Inline requests: Google's limit on a batch's request size.
    max_bytes = 20 * 1024 * 1024

    def __init__(self, provider: GeminiProvider, *, fallback_sync: bool = False,
                 poll_s: tuple[float, float] = (1.0, 60.0)) -> None:  # fmt: skip
        self.provider = provider
        self.fallback_sync = fallback_sync
        self.poll_s = poll_s
        self._requests: dict[str, Request] = {}
        self._files: dict[str, list[str]] = {}

    def encode(self, custom_id: str, request: Request) -> bytes:
        self._requests[custom_id] = request
        config = self.provider._config(request).model_dump(mode="json", exclude_none=True)
        line = {"key": custom_id,
                "request": {"contents": _contents(request.messages), "config": config}}  # fmt: skip
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)

    async def upload(self, data: bytes, name: str) -> str:
        """Inline: the lines are kept for `create` (their keys are the requests' ids)."""
        file_id = f"inline:{name}"
        self._files[file_id] = [orjson.loads(line)["key"] for line in data.splitlines()]
        return file_id

    async def create(self, file_id: str, tag: str) -> BatchStatus:
        from google.genai import types

        keys = self._files.pop(file_id)
        inlined = [
            types.InlinedRequest(
                contents=_contents(self._requests[key].messages),  # type: ignore[arg-type]
                config=self.provider._config(self._requests[key]),
                metadata={"key": key},
            )
            for key in keys
        ]
        client = self.provider._genai()
        with self.provider._translate():
            job = await client.aio.batches.create(
                model=self.provider.model, src=inlined, config={"display_name": tag}
            )
        return _status(job)

    async def poll(self, batch_id: str) -> BatchStatus:
        client = self.provider._genai()
        with self.provider._translate():
            return _status(await client.aio.batches.get(name=batch_id))

    async def find(self, tag: str) -> BatchStatus | None:
        client = self.provider._genai()
        with self.provider._translate():
            pager = await client.aio.batches.list(config={"page_size": 100})
            seen = 0
            async for job in pager:
                if job.display_name == tag:
                    return _status(job)
                seen += 1
                if seen >= 100 * _FIND_PAGES:
                    break
        return None

    async def results(
        self, status: BatchStatus, requests: Mapping[str, Request]
    ) -> list[BatchResult]:
        client = self.provider._genai()
        with self.provider._translate():
            job = await client.aio.batches.get(name=status.id)
        found: list[BatchResult] = []
        responses = (job.dest.inlined_responses if job.dest is not None else None) or []
        for answer in responses:
            key = (answer.metadata or {}).get("key", "")
            request = requests.get(key)
            if request is None:
                continue
            found.append(self._result(key, answer, request))
        return found

    def _result(self, key: str, answer: Any, request: Request) -> BatchResult:
        if answer.error is not None or answer.response is None:
            code = int(getattr(answer.error, "code", 0) or 0)
            said = redact(str(getattr(answer.error, "message", "") or "no response"),
                          self.provider._secrets)  # fmt: skip
            message = f"{self.provider.name} batch: {code or ''} {said}".strip()
            if 400 <= code < 500 and code != 429:
                return BatchResult(key, None, BadRequest(message), "failed")
            return BatchResult(key, None, Transient(message), "failed")
        try:
            completion = self.provider._completion(answer.response, 0.0, request)
        except ProviderError as exc:
            return BatchResult(key, None, exc, "failed")
        return BatchResult(key, completion)


def _contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat messages as Gemini contents, as the synchronous path sends them (system messages go
    to the config's system_instruction)."""
    return [
        {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
        for m in messages
        if m.role != "system"
    ]


def _status(job: Any) -> BatchStatus:
    state = getattr(job.state, "value", job.state) or ""
    responses = (job.dest.inlined_responses if job.dest is not None else None) or []
    failed = sum(1 for r in responses if r.error is not None)
    return BatchStatus(
        id=str(job.name),
        status=_STATES.get(str(state), "in_progress"),
        completed=len(responses) - failed,
        failed=failed,
        output=str(job.name),
        message="" if job.error is None else str(job.error.message or ""),
    )
