"""Gemini's Batch API (the Developer API's, `ttc serve`'s too) through the official
`google-genai` client: the control plane of batch mode.

    encode   a line of Batch Mode's input file: {"key": custom id, "request": the REST
             GenerateContentRequest (contents, systemInstruction, generationConfig)}
    upload   up to `inline_bytes` (under Google's 20 MB limit on inline requests): kept here,
             the requests go inline in the create call (id `inline:…`, never journaled as a
             file to reuse). Larger: client.aio.files.upload(file, config=UploadFileConfig(
             mime_type="jsonl", display_name)) → its name `files/…`, journaled at once
    create   client.aio.batches.create(model, src=[InlinedRequest(contents, config,
             metadata={"key": custom id})] or src="files/…", config={"display_name": tag})
    poll     client.aio.batches.get(name)
    results  inline: the batch's dest.inlined_responses (a GenerateContentResponse, or a
             JobError); a file: client.aio.files.download(file=dest.file_name), JSONL lines
             {"key", "response"} or {"key", "error": Status}
    find     client.aio.batches.list, for a batch whose display name is the tag

Each request is the one `GeminiProvider` sends synchronously (its contents and config), and each
answer is read by it, so usage, cached tokens and the "simulated" label are the synchronous
path's. Errors go through the provider's one translation (`gemini_errors`). A request's own
result: a response → its completion; a JobError → Transient (`failed`: sent again), or, for a
4xx code, BadRequest (not sent again); a request of an expired or cancelled batch with no
result → sent again (`expired`, `cancelled`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ttc.adapters.providers._batch_openai import redacted_ids, unreadable_result
from ttc.adapters.providers._gemini import GeminiProvider
from ttc.adapters.providers._http import redact
from ttc.engine import BadRequest, BatchAPI, Message, ProviderError, Request, Transient
from ttc.engine._util import Unreadable, served_lines_of
from ttc.engine.contract import BatchResult, BatchStatus

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
    # An input file: the Files API's limit (2 GB); up to `inline_bytes`, the requests go inline
    # (Google's limit on an inline batch's request: 20 MB, less room for its JSON around them).
    max_bytes = 2 * 1024 * 1024 * 1024
    inline_bytes = 19 * 1024 * 1024

    def __init__(
        self,
        provider: GeminiProvider,
        *,
        fallback_sync: bool = False,
        poll_s: tuple[float, float] = (1.0, 60.0),
    ) -> None:
        self.provider = provider
        self.fallback_sync = fallback_sync
        self.poll_s = poll_s
        self._requests: dict[str, Request] = {}
        self._files: dict[str, list[str]] = {}

    def encode(self, custom_id: str, request: Request) -> bytes:
        self._requests[custom_id] = request
        line = {"key": custom_id, "request": rest_request(self.provider, request)}
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)

    def reusable(self, file_id: str) -> bool:
        """An uploaded file outlives the process; inline requests do not."""
        return not file_id.startswith("inline:")

    async def upload(self, data: bytes, name: str) -> str:
        """Inline (the lines kept for `create`, by their keys), or a file of the Files API."""
        keys = [orjson.loads(line)["key"] for line in data.splitlines()]
        if len(data) <= self.inline_bytes:
            file_id = f"inline:{name}"
            self._files[file_id] = keys
            return file_id
        from google.genai import types

        config = types.UploadFileConfig(mime_type="jsonl", display_name=name)
        client = self.provider._genai()
        with self.provider._translate():
            uploaded = await client.aio.files.upload(file=io.BytesIO(data), config=config)
        for key in keys:  # the file holds them now
            self._requests.pop(key, None)
        if not uploaded.name:
            raise Transient(f"{self.provider.name} batch: the upload of {name} gave no name")
        return redact(uploaded.name, self.provider._secrets)

    async def create(self, file_id: str, tag: str) -> BatchStatus:
        if file_id.startswith("inline:"):
            return await self._create_inline(file_id, tag)
        client = self.provider._genai()
        with self.provider._translate():
            job = await client.aio.batches.create(
                model=self.provider.model, src=file_id, config={"display_name": tag}
            )
        return _status(job, self.provider._secrets)

    async def _create_inline(self, file_id: str, tag: str) -> BatchStatus:
        from google.genai import types

        keys = self._files[file_id]  # kept until the batch exists: a failed create is retried
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
        del self._files[file_id]
        for key in keys:
            self._requests.pop(key, None)
        return _status(job, self.provider._secrets)

    async def poll(self, batch_id: str) -> BatchStatus:
        client = self.provider._genai()
        with self.provider._translate():
            return _status(await client.aio.batches.get(name=batch_id), self.provider._secrets)

    async def find(self, tag: str) -> BatchStatus | None:
        client = self.provider._genai()
        with self.provider._translate():
            pager = await client.aio.batches.list(config={"page_size": 100})
            seen = 0
            async for job in pager:
                if job.display_name == tag:
                    return _status(job, self.provider._secrets)
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
            data = None
            if job.dest is not None and job.dest.file_name:
                data = await client.aio.files.download(file=job.dest.file_name)
        if data is not None:
            return self._file_results(data, requests)
        found: list[BatchResult] = []
        responses = (job.dest.inlined_responses if job.dest is not None else None) or []
        for answer in responses:
            key = (answer.metadata or {}).get("key", "")
            request = requests.get(key)
            if request is None:
                continue
            found.append(self._result(key, answer, request))
        return found

    def _file_results(self, data: bytes, requests: Mapping[str, Request]) -> list[BatchResult]:
        """The lines of a responses file: {"key", "response"} or {"key", "error": Status}."""
        found: list[BatchResult] = []
        cap = self.provider._connection.max_response_bytes
        for line in served_lines_of(data, cap):
            if isinstance(line, Unreadable):  # counted; its request has no result, goes again
                found.append(unreadable_result(self.provider.name, line))
                continue
            key = str(line.get("key", ""))
            request = requests.get(key)
            if request is None:  # not waiting: the engine refuses it if it was never sent
                found.append(BatchResult(key, None, Transient("not waiting"), "failed"))
            else:
                found.append(self._file_result(key, line, request))
        return found

    def _file_result(self, key: str, line: dict[str, Any], request: Request) -> BatchResult:
        from google.genai import types

        error = line.get("error")
        if isinstance(error, dict):
            job_error = types.JobError(code=error.get("code"), message=error.get("message"))
            return self._result(key, types.InlinedResponse(error=job_error), request)
        try:
            response = types.GenerateContentResponse.model_validate(line.get("response"))
        except ValueError as exc:  # pydantic's ValidationError
            said = redact(str(exc).splitlines()[0], self.provider._secrets)
            error_ = Transient(f"{self.provider.name} batch: unreadable response: {said}")
            return BatchResult(key, None, error_, "failed")
        return self._result(key, types.InlinedResponse(response=response), request)

    def _result(self, key: str, answer: Any, request: Request) -> BatchResult:
        if answer.error is not None or answer.response is None:
            code = int(getattr(answer.error, "code", 0) or 0)
            said = redact(
                str(getattr(answer.error, "message", "") or "no response"), self.provider._secrets
            )
            message = f"{self.provider.name} batch: {code or ''} {said}".strip()
            if 400 <= code < 500 and code != 429:
                return BatchResult(key, None, BadRequest(message), "failed")
            return BatchResult(key, None, Transient(message), "failed")
        try:
            completion = self.provider._completion(answer.response, 0.0, request)
        except ProviderError as exc:
            return BatchResult(key, None, exc, "failed")
        return BatchResult(key, completion)


def rest_request(provider: GeminiProvider, request: Request) -> dict[str, Any]:
    """The REST GenerateContentRequest of what the synchronous path sends (its config's
    fields, by their REST names), as a line of Batch Mode's input file holds it."""
    config = provider._config(request)
    body: dict[str, Any] = {"contents": _contents(request.messages)}
    if config.system_instruction:
        body["systemInstruction"] = {"parts": [{"text": str(config.system_instruction)}]}
    generation: dict[str, Any] = {
        "temperature": config.temperature,
        "topP": config.top_p,
        "topK": config.top_k,
        "seed": config.seed,
        "candidateCount": config.candidate_count,
        "maxOutputTokens": config.max_output_tokens,
    }
    thinking = config.thinking_config
    if thinking is not None and thinking.thinking_budget is not None:
        generation["thinkingConfig"] = {"thinkingBudget": thinking.thinking_budget}
    generation = {k: v for k, v in generation.items() if v is not None}
    if generation:
        body["generationConfig"] = generation
    return body


def _contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat messages as Gemini contents, as the synchronous path sends them (system messages go
    to the config's system_instruction)."""
    return [
        {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
        for m in messages
        if m.role != "system"
    ]


def _status(job: Any, secrets: Sequence[str]) -> BatchStatus:
    """The vendor's batch in the engine's terms, the ids it chose redacted."""
    return redacted_ids(_vendor_status(job), secrets)


def _vendor_status(job: Any) -> BatchStatus:
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
