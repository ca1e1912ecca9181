"""`ttc serve`'s Batch API routes: paths to the batch stores (OpenAI's `_batch_openai`,
Gemini's `_batch_gemini`, Anthropic's `_batch_anthropic`), and their HTTP replies.

The server (`_serve`) asks `BatchRoutes.handle` first; a path that is not a batch route is
None, and goes on to the synchronous routes. Every call of a batch route is counted in
`/stats` under `batch` (`by_route`), never with the synchronous routes, and no batch route
passes the rate limits or the fault draws of the synchronous ones (a Batch API has its own
queue: its requests are answered by the sim model when their batch's time is up).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from aiohttp import BodyPartReader, MultipartReader, web

from ttc.adapters.sim._admission import Stats
from ttc.adapters.sim._answerer import Answerer
from ttc.adapters.sim._batch_anthropic import AnthropicBatches, route_name
from ttc.adapters.sim._batch_gemini import GeminiBatches
from ttc.adapters.sim._batch_openai import OpenAIBatches
from ttc.adapters.sim._options import ServeOptions
from ttc.adapters.sim._wire import JSON, Invalid, Route, TooLarge, read_body
from ttc.adapters.sim._wire_anthropic import ANTHROPIC
from ttc.adapters.sim._wire_gemini import GEMINI
from ttc.adapters.sim._wire_openai import OPENAI
from ttc.adapters.sim._wire_responses import RESPONSES

__all__ = ["BatchRoutes"]

_CHAT = Route("POST", "generate", "")
_MESSAGES = Route("POST", "generate", "")
_FILE = re.compile(r"^/v1/files/([^/]+)(/content)?$")
_BATCH = re.compile(r"^/v1/batches/([^/]+)(/cancel)?$")
_G_CREATE = re.compile(r"^/v1(?:beta)?/models/([^/:]+):batchGenerateContent$")
_G_BATCH = re.compile(r"^/v1(?:beta)?/batches/([^/:]+)(:cancel)?$")
_G_LIST = re.compile(r"^/v1(?:beta)?/batches$")
_G_UPLOAD = re.compile(r"^/upload/v1(?:beta)?/files$")
_G_DOWNLOAD = re.compile(r"^/(?:download/)?v1(?:beta)?/files/([^/:]+):download$")


class BatchRoutes:
    """OpenAI's `/v1/files` and `/v1/batches`, Gemini's batches and the Files API's uploads and
    downloads (`_batch_gemini_files`), answered by the server's sim model."""

    def __init__(self, options: ServeOptions, answerer: Answerer) -> None:
        # --max-body-mb: every body these routes read (uploads, inline batches) is capped.
        self.limit = round(options.max_body_mb * 1e6)
        self.openai = OpenAIBatches(
            options.batch_delay, options.batch_fail, options.batch_expire, options.seed
        )
        self.stats = self.openai.stats
        self.gemini = GeminiBatches(
            options.batch_delay, options.batch_fail, options.batch_expire, options.seed, self.stats
        )
        self.anthropic = AnthropicBatches(
            options.batch_delay,
            options.batch_fail,
            options.batch_expire,
            options.seed,
            self.stats,
            self.answer_anthropic,
            self.limit,
        )
        self._answerer = answerer
        # The prompts the batches' requests carried (warm-up, adaptive, unknown), apart.
        self._prompts = Stats()
        self._serial = 0

    def as_dict(self) -> dict[str, Any]:
        """The counters, as `/stats` shows them under `batch`."""
        return {**self.stats.as_dict(), "prompts": dict(self._prompts.prompts)}

    def reset(self) -> None:
        """Zeroes the counters (the files and batches stay)."""
        self.stats.reset()
        # Its own reset, which keeps every counter's key: clearing them made the next batch
        # request that counted a prompt fail (a KeyError, a 500 on every poll).
        self._prompts.reset()

    async def answer(
        self, body: dict[str, Any], endpoint: str = "/v1/chat/completions"
    ) -> tuple[int, dict[str, Any]]:
        """One batch line's body, answered as the synchronous route of `endpoint` answers it
        (chat completions, or the Responses API)."""
        wire = RESPONSES if endpoint == "/v1/responses" else OPENAI
        try:
            call = wire.parse(body, _CHAT)
        except Invalid as exc:
            return 400, orjson.loads(OPENAI.error(400, str(exc)))
        completion = await self._answerer.answer(call, self._prompts)
        self._serial += 1
        return 200, wire.body(call, completion, self._serial)

    async def answer_gemini(self, body: dict[str, Any], model: str) -> tuple[int, dict[str, Any]]:
        """One Gemini batch request, answered as the synchronous generateContent answers it."""
        route = Route("POST", "generate", "", model, "generateContent")
        try:
            call = GEMINI.parse(body, route)
        except Invalid as exc:
            return 400, {"code": 400, "message": str(exc), "status": "INVALID_ARGUMENT"}
        completion = await self._answerer.answer(call, self._prompts)
        self._serial += 1
        return 200, GEMINI.body(call, completion, self._serial)

    async def answer_anthropic(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One Message Batch request's params, answered as `POST /v1/messages` answers them."""
        try:
            call = ANTHROPIC.parse(body, _MESSAGES)
        except Invalid as exc:
            return 400, orjson.loads(ANTHROPIC.error(400, str(exc)))
        completion = await self._answerer.answer(call, self._prompts)
        self._serial += 1
        return 200, ANTHROPIC.body(call, completion, self._serial)

    async def handle(self, request: web.BaseRequest) -> web.Response | None:
        """The reply of a batch route, or None when the path is not one."""
        path, method = request.path, request.method
        name = route_name(path, method) or _route_name(path, method)
        if name is None:
            return None
        self.stats.route(name)
        if name.startswith("anthropic."):
            try:
                return await self.anthropic.handle(name, request)
            except Invalid as exc:
                return _reply(exc.status, ANTHROPIC.error(exc.status, str(exc)))
        wire = GEMINI if name.startswith("gemini.") else OPENAI
        try:
            if wire is GEMINI:
                return await self._gemini(name, request)
            return await self._dispatch(name, request)
        except Invalid as exc:
            return _reply(exc.status, wire.error(exc.status, str(exc)))

    async def _gemini(self, name: str, request: web.BaseRequest) -> web.Response:
        store, answer = self.gemini, self.answer_gemini
        if name == "gemini.files.upload":
            return await self._gemini_upload(request)
        if name == "gemini.files.download":
            found = _G_DOWNLOAD.match(request.path)
            stored = store.files.get(found.group(1)) if found else None
            if stored is None:
                return _reply(404, GEMINI.error(404, f"File {request.path} not found"))
            return web.Response(body=stored.data, content_type="application/octet-stream")
        if name == "gemini.batches.create":
            found = _G_CREATE.match(request.path)
            raw = await read_body(request, self.limit)
            model = found.group(1) if found else ""
            return _json(store.create(model, _body(raw), len(raw)))
        if name == "gemini.batches.list":
            size = _limit(request.query.get("pageSize", "50"), 1000)
            return _json(await store.listing(size, request.query.get("pageToken", ""), answer))
        found = _G_BATCH.match(request.path)
        batch = f"batches/{found.group(1)}" if found else ""
        if name == "gemini.batches.cancel":
            obj = await store.cancel(batch, answer)
        else:
            obj = await store.get(batch, answer)
        if obj is None:
            return _reply(404, GEMINI.error(404, f"Batch {batch} not found"))
        return _json(obj)

    async def _gemini_upload(self, request: web.BaseRequest) -> web.Response:
        """The Files API's resumable upload: a start, then the bytes in chunks."""
        files, headers = self.gemini.files, request.headers
        command = headers.get("X-Goog-Upload-Command", "")
        upload_id = request.query.get("upload_id")
        if upload_id is None:
            if command != "start":
                raise Invalid("X-Goog-Upload-Command: a new upload must `start`")
            size = headers.get("X-Goog-Upload-Header-Content-Length")
            if size is not None and size.isdigit() and int(size) > self.limit:
                raise TooLarge(
                    f"the file is {int(size):,} bytes; this server takes at most {self.limit:,}"
                )
            upload_id = files.start(_body(await read_body(request, self.limit)), size)
            url = request.url.with_query({"upload_id": upload_id})
            return _reply(
                200, b"{}", {"X-Goog-Upload-URL": str(url), "X-Goog-Upload-Status": "active"}
            )
        if "upload" not in command:
            raise Invalid(f"X-Goog-Upload-Command: expected upload, got {command!r}")
        offset = headers.get("X-Goog-Upload-Offset", "0")
        if not offset.isdigit():
            raise Invalid(f"X-Goog-Upload-Offset: expected an integer, got {offset!r}")
        # The whole file is capped, not only each chunk: the chunks add up in memory.
        data = await read_body(request, max(0, self.limit - int(offset)))
        stored = files.chunk(upload_id, data, int(offset), "finalize" in command)
        if stored is None:
            return _reply(200, b"", {"X-Goog-Upload-Status": "active"})
        self.stats.files += 1
        return _reply(
            200, orjson.dumps({"file": stored.as_object()}), {"X-Goog-Upload-Status": "final"}
        )

    async def _dispatch(self, name: str, request: web.BaseRequest) -> web.Response:
        store = self.openai
        if name == "openai.files.upload":
            return _json(await self._upload(request))
        if name in ("openai.files.retrieve", "openai.files.content"):
            found = _FILE.match(request.path)
            stored = store.file(found.group(1)) if found else None
            if stored is None:
                return _missing("file")
            if name == "openai.files.content":
                return web.Response(body=stored.data, content_type="application/octet-stream")
            return _json(stored.as_object())
        if name == "openai.batches.create":
            return _json(store.create(_body(await read_body(request, self.limit))))
        if name == "openai.batches.list":
            after = request.query.get("after")
            limit = _limit(request.query.get("limit", "20"))
            return _json(await store.listing(after, limit, self.answer))
        found = _BATCH.match(request.path)
        batch_id = found.group(1) if found else ""
        if name == "openai.batches.cancel":
            obj = await store.cancel(batch_id, self.answer)
        else:
            obj = await store.retrieve(batch_id, self.answer)
        return _missing("batch") if obj is None else _json(obj)

    async def _upload(self, request: web.BaseRequest) -> dict[str, Any]:
        try:
            data, filename, purpose = await _form(request, self.limit)
        except (AssertionError, ValueError, KeyError) as exc:
            raise Invalid(f"the body must be multipart/form-data ({exc})") from None
        if data is None:
            raise Invalid("file: a multipart file field is required")
        if purpose is None:
            raise Invalid("purpose: required")
        return self.openai.upload(data, filename, purpose)


async def _form(request: web.BaseRequest, limit: int) -> tuple[bytes | None, str, str | None]:
    """A multipart upload's file (its bytes and name) and purpose, read part by part: a batch's
    file may be far over aiohttp's 1 MB limit of `request.post()`, but not over `limit` (the
    parts together: TooLarge as soon as they pass it)."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise TooLarge(f"the body is {declared:,} bytes; this server takes at most {limit:,}")
    data, filename, purpose = None, "", None
    size = 0
    reader = MultipartReader(request.headers, request.content)
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            continue
        chunks: list[bytes] = []
        while chunk := await part.read_chunk():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the body is over {limit:,} bytes, the most this server takes")
            chunks.append(chunk)
        if part.name == "file":
            data, filename = b"".join(chunks), part.filename or ""
        elif part.name == "purpose":
            purpose = b"".join(chunks).decode(part.get_charset("utf-8"))
    return data, filename, purpose


def _route_name(path: str, method: str) -> str | None:
    if _G_UPLOAD.match(path):
        return "gemini.files.upload" if method == "POST" else None
    if _G_DOWNLOAD.match(path):
        return "gemini.files.download" if method == "GET" else None
    # Gemini's paths: v1beta, a model's action, or a batch of its own (`batches/sim…`, where
    # OpenAI's ids are `batch_…`); /v1/batches itself is OpenAI's list.
    own = _G_BATCH.match(path)
    if path.startswith(("/v1beta/", "/v1/models/")) or (own and own.group(1).startswith("sim")):
        return _gemini_route(path, method)
    if path == "/v1/files":
        return "openai.files.upload" if method == "POST" else None
    if path == "/v1/batches":
        return {"POST": "openai.batches.create", "GET": "openai.batches.list"}.get(method)
    found = _FILE.match(path)
    if found is not None and method == "GET":
        return "openai.files.content" if found.group(2) else "openai.files.retrieve"
    found = _BATCH.match(path)
    if found is not None:
        if found.group(2):
            return "openai.batches.cancel" if method == "POST" else None
        return "openai.batches.retrieve" if method == "GET" else None
    return None


def _gemini_route(path: str, method: str) -> str | None:
    if _G_CREATE.match(path):
        return "gemini.batches.create" if method == "POST" else None
    if _G_LIST.match(path):
        return "gemini.batches.list" if method == "GET" else None
    found = _G_BATCH.match(path)
    if found is None:
        return None
    if found.group(2):
        return "gemini.batches.cancel" if method == "POST" else None
    return "gemini.batches.get" if method == "GET" else None


def _limit(raw: str, most: int = 100) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"limit: expected an integer, got {raw!r}") from None
    if not 1 <= value <= most:
        raise Invalid(f"limit: must be in [1, {most}], got {value}")
    return value


def _body(raw: bytes) -> dict[str, Any]:
    """A JSON object body (read by `read_body`: past aiohttp's 1 MB limit of `request.read()`,
    as the Batch APIs take inline batches of up to 20 MB and files far larger)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    return body


def _json(obj: dict[str, Any]) -> web.Response:
    return _reply(200, orjson.dumps(obj))


def _missing(what: str) -> web.Response:
    return _reply(404, OPENAI.error(404, f"No such {what}", code="not_found"))


def _reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)
