"""Anthropic's Message Batches API (and `ttc serve`'s) through the official `anthropic` client:
the control plane of batch mode (a few calls per batch, so the client's CPU cost, which made
the synchronous path use our own aiohttp session, does not matter here; its pagination, its
streamed JSONL results and its typed errors do).

    upload   kept here: the requests go inline in the create call (no files in this API)
    create   messages.batches.create(requests=[{custom_id, params}])
    poll     messages.batches.retrieve
    results  messages.batches.results: one line per request, succeeded, errored, canceled or
             expired
    find     messages.batches.list, newest first: a batch whose requests carry the tag's mark

Each request's `params` are the body `AnthropicProvider` sends synchronously, and each message
is read by it, so usage (cache reads too), thinking and the "simulated" label are the
synchronous path's. Limits: 100,000 requests and 256 MB a batch (`max_requests`, `max_bytes`:
the engine splits a round beyond them).

The tag. A Message Batch has no metadata nor name, and its requests can be read only once it has
ended (its results), so the tag travels in the requests: each `custom_id` is the engine's id,
`_`, and a 16-hex mark of the tag. `find` reads the first result of each ended batch for the
mark; a batch still in progress cannot be told apart, so `find` waits for those to end (polling
as the round does, with a log line) rather than create a batch that may already exist: a sample
is never bought twice. `find` runs only for a resumed round's samples that no journaled batch
holds, and for a create call that failed (it may have made its batch).

Errors: `anthropic.APIStatusError` by status and Anthropic's error type through the synchronous
path's one table (`anthropic_error`); connection errors and timeouts Transient. A request's own
result: succeeded → its completion; errored → that error type's error (`failed`; an
invalid_request_error is a BadRequest, not sent again); canceled, expired → Transient
(`cancelled`, `expired`: sent again in a new batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ttc.adapters.providers._anthropic import AnthropicProvider
from ttc.adapters.providers._anthropic_errors import anthropic_error
from ttc.adapters.providers._batch_openai import redacted_ids, unreadable_result
from ttc.adapters.providers._transport import sdk_errors
from ttc.engine import BatchAPI, ConfigError, ProviderError, Request, Transient
from ttc.engine._util import Unreadable, served_lines
from ttc.engine.contract import BatchResult, BatchStatus

__all__ = ["AnthropicBatchAPI"]

log = logging.getLogger("ttc")

_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_UNDONE = {"canceled": "cancelled", "expired": "expired"}
_FIND_PAGES = 10
_MAX_ID = 64


def _mark(tag: str) -> str:
    """The tag's mark in a request's custom_id."""
    return hashlib.sha256(tag.encode()).hexdigest()[:16]


def _split(wire_id: str) -> tuple[str, str]:
    """(the engine's custom id, the mark) of a request's custom_id."""
    cid, _, mark = wire_id.rpartition("_")
    return (cid, mark) if cid else (wire_id, "")


class AnthropicBatchAPI(BatchAPI):
    """The Message Batches API of `provider`'s server, with its key and base URL."""

    name = "anthropic-batch"
    max_requests = 100_000
    # 256 MB a batch, less room for the create call's wrapping and the tags' marks.
    max_bytes = 250 * 1000 * 1000

    def __init__(
        self,
        provider: AnthropicProvider,
        *,
        fallback_sync: bool = False,
        poll_s: tuple[float, float] = (1.0, 60.0),
    ) -> None:
        self.provider = provider
        self.fallback_sync = fallback_sync
        self.poll_s = poll_s
        base = provider._base
        root = base.root[: -len("/v1")] if base.root.endswith("/v1") else base.root
        headers = {} if base.authorization is None else {"Authorization": base.authorization}
        query = dict(
            part.split("=", 1) for part in base.query.lstrip("?").split("&") if "=" in part
        )
        # The SDK is imported here, not with the module: it costs about a second at every `ttc`
        # start, and only batch mode's control calls (files, batches) use it.
        import anthropic

        self._client = anthropic.AsyncAnthropic(
            base_url=root,
            api_key=provider._headers.get("x-api-key") or "none",
            default_headers=headers or None,
            default_query=query or None,
            max_retries=2,
            timeout=300.0,
        )
        self._secrets = provider._secrets
        self._inline: dict[str, list[bytes]] = {}
        self._marks: dict[str, str] = {}  # an ended batch's id: its first request's mark

    def encode(self, custom_id: str, request: Request) -> bytes:
        """The synchronous path's body as a batch request (one response each: no `n`)."""
        if request.n != 1:
            raise ConfigError(f"--batch: {self.provider.name} answers one response per request")
        if len(custom_id) + 17 > _MAX_ID:
            raise ConfigError(f"--batch: the request id {custom_id!r} is too long for Anthropic")
        line = {"custom_id": custom_id, "params": self.provider.body(request)}
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)

    async def upload(self, data: bytes, name: str) -> str:
        """Inline: the lines are kept for `create`."""
        file_id = f"inline:{name}"
        self._inline[file_id] = data.splitlines()
        return file_id

    async def create(self, file_id: str, tag: str) -> BatchStatus:
        mark = _mark(tag)
        requests: list[Any] = []
        for raw in self._inline[file_id]:
            line = orjson.loads(raw)
            requests.append({"custom_id": f"{line['custom_id']}_{mark}", "params": line["params"]})
        with self._translate():
            batch = await self._client.messages.batches.create(requests=requests)
        self._inline.pop(file_id, None)
        return _status(batch, self._secrets)

    async def poll(self, batch_id: str) -> BatchStatus:
        with self._translate():
            return _status(await self._client.messages.batches.retrieve(batch_id), self._secrets)

    async def find(self, tag: str) -> BatchStatus | None:
        mark = _mark(tag)
        running: list[str] = []
        with self._translate():
            page = await self._client.messages.batches.list(limit=100)
            for _ in range(_FIND_PAGES):
                for batch in page.data:
                    if batch.processing_status != "ended":
                        running.append(batch.id)
                    elif await self._mark_of(batch.id) == mark:
                        return _status(batch, self._secrets)
                if not page.has_next_page():
                    break
                page = await page.get_next_page()
        if running:
            log.info(
                "%s: %d batches in progress may hold tag %s (their requests are known only "
                "once they end): waiting for them",
                self.name,
                len(running),
                tag,
            )
        return await self._await_running(running, mark)

    async def _await_running(self, running: list[str], mark: str) -> BatchStatus | None:
        """Polls the batches in progress until each has ended; the one marked `mark`, or None."""
        delay, longest = self.poll_s
        while running:
            await asyncio.sleep(delay)
            delay = min(longest, delay * 1.5)
            for batch_id in list(running):
                with self._translate():
                    batch = await self._client.messages.batches.retrieve(batch_id)
                if batch.processing_status != "ended":
                    continue
                running.remove(batch_id)
                if await self._mark_of(batch_id) == mark:
                    return _status(batch, self._secrets)
        return None

    async def _mark_of(self, batch_id: str) -> str:
        """The mark of an ended batch's first result ("" for a batch ttc did not make)."""
        if batch_id not in self._marks:
            mark = ""
            with self._translate():
                lines = await self._client.messages.batches.results(batch_id)
                async for line in lines:
                    mark = _split(line.custom_id)[1]
                    break
                await lines.close()
            self._marks[batch_id] = mark
        return self._marks[batch_id]

    async def results(
        self, status: BatchStatus, requests: Mapping[str, Request]
    ) -> list[BatchResult]:
        # The raw lines, streamed and checked one by one (`served_lines`): the client's own
        # reader holds a line whole and raises on a garbage one, losing the lines after it.
        found: list[BatchResult] = []
        cap = self.provider._connection.max_response_bytes
        with self._translate():
            streamed = self._client.messages.batches.with_streaming_response.results(status.id)
            async with streamed as body:
                async for line in served_lines(body.iter_bytes(), cap):
                    if isinstance(line, Unreadable):
                        found.append(unreadable_result(self.provider.name, line))
                    else:
                        found.append(self._result(line, requests))
        return found

    async def aclose(self) -> None:
        await self._client.close()

    def _result(self, line: dict[str, Any], requests: Mapping[str, Request]) -> BatchResult:
        cid = _split(str(line.get("custom_id")))[0]
        request = requests.get(cid)
        raw = line.get("result")
        result: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = str(result.get("type"))
        if kind in _UNDONE:
            return BatchResult(cid, None, Transient(f"batch: {kind}"), _UNDONE[kind])
        if kind == "errored":
            body = result.get("error")
            error = body.get("error") if isinstance(body, dict) else None
            status = _STATUS.get(str((error or {}).get("type")), 500)
            err = anthropic_error(status, {}, body, who=self.provider.name, secret=self._secrets)
            return BatchResult(cid, None, err, "failed")
        message = result.get("message")
        if kind != "succeeded" or not isinstance(message, dict) or request is None:
            return BatchResult(cid, None, Transient(f"batch: a result of type {kind}"), "failed")
        try:
            completion = self.provider._completion(message, request, 0.0, None)
        except ProviderError as exc:
            return BatchResult(cid, None, exc, "failed")
        return BatchResult(cid, completion)

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        import anthropic

        return sdk_errors(
            self.provider.name, self._secrets, anthropic, anthropic.AnthropicError, anthropic_error
        )


def _status(batch: Any, secrets: Sequence[str]) -> BatchStatus:
    """The vendor's batch in the engine's terms, the ids it chose redacted."""
    return redacted_ids(_vendor_status(batch), secrets)


def _vendor_status(batch: Any) -> BatchStatus:
    """A Message Batch in the engine's terms: in_progress, cancelling, then completed, or
    cancelled or expired when some of its requests were (their results say which)."""
    counts = batch.request_counts
    state = {"in_progress": "in_progress", "canceling": "cancelling"}.get(
        batch.processing_status, "completed"
    )
    if state == "completed" and (counts.canceled or batch.cancel_initiated_at is not None):
        state = "cancelled"
    elif state == "completed" and counts.expired:
        state = "expired"
    total = counts.processing + counts.succeeded + counts.errored + counts.canceled
    return BatchStatus(
        id=batch.id,
        status=state,
        total=total + counts.expired,
        completed=counts.succeeded,
        failed=counts.errored,
        output=batch.results_url,
    )
