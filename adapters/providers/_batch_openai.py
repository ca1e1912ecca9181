"""OpenAI's Batch API (and any OpenAI-compatible server's, `ttc serve` included) through the
official `openai` client: the control plane of batch mode (a few calls per batch).

    upload   files.create(purpose="batch")            a JSONL file of chat-completion requests
    create   batches.create(completion_window="24h",  tagged with metadata {"ttc_tag": tag}
             endpoint="/v1/chat/completions")         (/v1/responses with --api responses)
    poll     batches.retrieve
    results  files.content(output_file_id), files.content(error_file_id)
    find     batches.list, newest first, for a batch whose metadata holds the tag

Each request line is the body `OpenAIProvider` sends synchronously, and each answer is read by
it too, so a batch's answers, usage and "simulated" label are those of the synchronous path.
Errors (the one `_translate`):

    openai                                          ttc
    ─────────────────────────────────────────────   ───────────────────────────────────────────
    APIStatusError                                  by status, as the synchronous path
                                                    (`status_error`: 429 RateLimited, 5xx
                                                    Transient, 401/403 Fatal, 4xx BadRequest)
    APIConnectionError, APITimeoutError             Transient

A request's own result: status 200 → its completion; another status → that status's error
(`failed`; a 4xx is not sent again); error `batch_expired` / `batch_cancelled` → Transient
(`expired` / `cancelled`: sent again in a new batch).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast, get_args

import orjson

from ttc.adapters.providers._http import redact, status_error
from ttc.adapters.providers._openai import OpenAIProvider
from ttc.adapters.providers._transport import sdk_errors
from ttc.engine import BadRequest, BatchAPI, ProviderError, Request, Transient
from ttc.engine._util import Unreadable, redact_json, served_lines
from ttc.engine.contract import BatchResult, BatchStatus

__all__ = ["OpenAIBatchAPI"]

Endpoint = Literal["/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses"]
_ENDPOINT: Endpoint = "/v1/chat/completions"
_REASONS = {"batch_expired": "expired", "batch_cancelled": "cancelled"}
# How far back `find` looks for a batch by its tag: batches live 24 h (their window), and a
# resume comes later than that only after they expired.
_FIND_PAGES = 20


class OpenAIBatchAPI(BatchAPI):
    """The Batch API of `provider`'s server, with its key and base URL."""

    name = "openai-batch"

    def __init__(
        self,
        provider: OpenAIProvider,
        *,
        fallback_sync: bool = False,
        poll_s: tuple[float, float] = (1.0, 60.0),
    ) -> None:
        self.provider = provider
        self.fallback_sync = fallback_sync
        self.poll_s = poll_s
        base = provider._base
        headers = {} if base.authorization is None else {"Authorization": base.authorization}
        query = dict(
            part.split("=", 1) for part in base.query.lstrip("?").split("&") if "=" in part
        )
        # The SDK is imported here, not with the module: it costs about a second at every `ttc`
        # start, and only batch mode's control calls (files, batches) use it.
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=base.root,
            api_key=provider._key or "none",
            default_headers=headers or None,
            default_query=query or None,
            max_retries=2,
            timeout=300.0,
        )
        self._secrets = provider._secrets
        # The provider's API is the batch's: its request lines and the answers read back.
        self._url: Endpoint = "/v1/responses" if provider.api == "responses" else _ENDPOINT

    def encode(self, custom_id: str, request: Request) -> bytes:
        """The synchronous path's body, as a Batch input line."""
        line = {
            "custom_id": custom_id,
            "method": "POST",
            "url": self._url,
            "body": self.provider.request_body(request),
        }
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)

    async def upload(self, data: bytes, name: str) -> str:
        with self._translate():
            created = await self._client.files.create(file=(name, data), purpose="batch")
        return redact(created.id, self._secrets)

    async def create(self, file_id: str, tag: str, endpoint: str | None = None) -> BatchStatus:
        """A batch of an uploaded file for `endpoint` (the requests' url; by default the
        provider's API's: chat completions or responses)."""
        endpoint = endpoint or self._url
        if endpoint not in get_args(Endpoint):
            raise BadRequest(f"{self.provider.name} batch: no Batch API for {endpoint!r}")
        with self._translate():
            batch = await self._client.batches.create(
                input_file_id=file_id,
                endpoint=cast(Endpoint, endpoint),
                completion_window="24h",
                metadata={"ttc_tag": tag},
            )
        return _status(batch, self._secrets)

    async def poll(self, batch_id: str) -> BatchStatus:
        with self._translate():
            return _status(await self._client.batches.retrieve(batch_id), self._secrets)

    async def find(self, tag: str) -> BatchStatus | None:
        with self._translate():
            page = await self._client.batches.list(limit=100)
            for _ in range(_FIND_PAGES):
                for batch in page.data:
                    if (batch.metadata or {}).get("ttc_tag") == tag:
                        return _status(batch, self._secrets)
                if not page.has_next_page():
                    return None
                page = await page.get_next_page()
        return None

    async def results(
        self, status: BatchStatus, requests: Mapping[str, Request]
    ) -> list[BatchResult]:
        found: list[BatchResult] = []
        for line in await self.output_lines(status):
            if isinstance(line, Unreadable):
                found.append(unreadable_result(self.provider.name, line))
            else:
                found.append(self._result(line, requests))
        return found

    async def output_lines(self, status: BatchStatus) -> list[dict[str, Any] | Unreadable]:
        """The lines of a finished batch's output and error files, as the vendor wrote them
        (the Batch output format), the key and URL credentials redacted; streamed, each line
        at most --max-response-bytes, and one that is no JSON object (or too deep) an
        `Unreadable` in its place."""
        found: list[dict[str, Any] | Unreadable] = []
        cap = self.provider._connection.max_response_bytes
        for file_id in (status.output, status.errors):
            if file_id is None:
                continue
            with self._translate():
                async with self._client.files.with_streaming_response.content(file_id) as body:
                    async for line in served_lines(body.iter_bytes(), cap):
                        if isinstance(line, Unreadable):
                            found.append(line)
                        else:
                            found.append(redact_json(line, self._secrets))
        return found

    async def aclose(self) -> None:
        await self._client.close()

    def _result(self, line: dict[str, Any], requests: Mapping[str, Request]) -> BatchResult:
        cid = str(line.get("custom_id"))
        request = requests.get(cid)
        error, response = line.get("error"), line.get("response")
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            reason = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(
                code, "failed"
            )
            said = redact(str(error.get("message") or code), self._secrets)
            return BatchResult(cid, None, Transient(f"batch: {code}: {said}"), reason)
        if not isinstance(response, dict) or request is None:
            return BatchResult(cid, None, Transient("batch: a result with no response"), "failed")
        status, body = int(response.get("status_code") or 0), response.get("body")
        if status != 200:
            err = status_error(status, {}, body, who=self.provider.name, secret=self._secrets)
            return BatchResult(cid, None, err, "failed")
        try:
            if self._url == "/v1/responses":
                completion = self.provider._response_completion(body, None, 0.0, request)
            else:
                completion = self.provider._completion(body, None, 0.0, request)
        except ProviderError as exc:
            return BatchResult(cid, None, exc, "failed")
        return BatchResult(cid, completion)

    def _translate(self) -> contextlib.AbstractContextManager[None]:
        import openai

        return sdk_errors(
            self.provider.name, self._secrets, openai, openai.OpenAIError, status_error
        )


def redacted_ids(status: BatchStatus, secrets: Sequence[str]) -> BatchStatus:
    """`status` with the ids (and the message) its server chose passed through the redactor:
    a server that echoes the key into an id must not have it journaled, logged or printed."""
    output = None if status.output is None else redact(status.output, secrets)
    errors = None if status.errors is None else redact(status.errors, secrets)
    return dataclasses.replace(
        status,
        id=redact(status.id, secrets),
        output=output,
        errors=errors,
        message=redact(status.message, secrets),
    )


def unreadable_result(who: str, line: Unreadable) -> BatchResult:
    """The result standing for a results line that is no JSON object: it answers no request
    (no custom id), and the engine counts it as unreadable."""
    error = Transient(f"{who} batch: results line {line.line}: {line.why}")
    return BatchResult("", None, error, "unreadable")


def _status(batch: Any, secrets: Sequence[str]) -> BatchStatus:
    """The vendor's batch in the engine's terms, the ids it chose redacted."""
    return redacted_ids(_vendor_status(batch), secrets)


def _vendor_status(batch: Any) -> BatchStatus:
    counts = batch.request_counts
    errors = batch.errors.data if batch.errors is not None and batch.errors.data else []
    message = "; ".join(f"{e.code}: {e.message} (line {e.line})" for e in errors)
    return BatchStatus(
        id=batch.id,
        status=batch.status,
        total=counts.total if counts else 0,
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        output=batch.output_file_id,
        errors=batch.error_file_id,
        message=message,
    )
