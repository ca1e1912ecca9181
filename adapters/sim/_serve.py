"""`ttc serve`: a local OpenAI-, Gemini- and Anthropic-compatible API server answered by the
offline `sim`.

Routes (aiohttp on 127.0.0.1, orjson bodies, no access log):

    POST /v1/chat/completions                          OpenAI chat completion
    POST /v1/responses, /openai/v1/responses           OpenAI's Responses API (Azure's route)
    POST /v1/embeddings                                OpenAI embeddings (float or base64)
    POST /{v1,v1beta}/models/{model}:generateContent   Gemini generateContent
         (:streamGenerateContent streamed)
    POST /{v1,v1beta}/models/{model}:batchEmbedContents, :embedContent   Gemini embeddings
    POST /v1/messages                                  Anthropic Messages
    POST /openai/deployments/{deployment}/chat/completions, /embeddings   Azure OpenAI
    GET  /stats, POST /stats/reset                     counters (`_admission.Stats`)
    /v1/files, /v1/batches                             OpenAI's Batch API (`_batch_routes`)
    /v1/messages/batches                               Anthropic's Message Batches (the same)

Each wire format is a module with one `Wire` object (`_wire_openai`, `_wire_responses`,
`_wire_gemini`, `_wire_anthropic`, `_wire_azure`; `WIRES`
below lists them); admission is shared (`_admission`), and so is what answers (`_answerer`: the
sim for the served suite's prompts, generic prose otherwise).

A request on a model route goes: parse (400) → concurrency, RPM, TPM over a window of
`--window` seconds, sliding, fixed or a token bucket (`--limit-kind`; 429) → a fault drawn from
a seeded RNG → lognormal latency → answer. The limits are per minute as vendors state them,
scaled to the window (`_admission`). Faults touch generation routes only.

Two waits are announced, as OpenAI means them (with `--reset-means oldest` the first is the
oldest entry leaving too):

    x-ratelimit-reset-requests, -tokens    the time until the window is back to its full
      (every OpenAI response)                allowance: its newest entry leaves
    Retry-After, retry-after-ms (a 429),   the time until the window has room again: its oldest
      Google RetryInfo, "try again in"       entries leave until it holds less than the limit
                                             (for requests, the oldest one)

A request that asks to stream (`stream: true`, Gemini's streamGenerateContent) is answered with
the wire's server-sent events (`_sse_events`); the faults touch a stream as they touch a body:
`reset` drops it halfway, `truncated` ends it halfway, and `stall` (`--fault-stall`) sends half
of it (of a whole body: half the bytes) and then nothing, the connection held open until the
client leaves, --hang-s, or shutdown.

Answers say they are simulated: OpenAI bodies carry `system_fingerprint` SIM_FINGERPRINT and
Gemini bodies a `modelVersion` of the requested model plus SIM_MODEL_SUFFIX.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import orjson
from aiohttp import web

from ttc.adapters.sim._admission import Admission, Refusal
from ttc.adapters.sim._answerer import Answerer
from ttc.adapters.sim._batch_routes import BatchRoutes
from ttc.adapters.sim._options import (
    FAULTS,
    ServeOptions,
    add_serve_arguments,
    options_from_args,
)
from ttc.adapters.sim._sse_events import SSE, events
from ttc.adapters.sim._wire import (
    JSON,
    SERVER_ERRORS,
    Call,
    Invalid,
    Route,
    Wire,
    estimate_tokens,
    read_body,
)
from ttc.adapters.sim._wire_anthropic import ANTHROPIC, OVERLOADED, anthropic_headers
from ttc.adapters.sim._wire_azure import AZURE
from ttc.adapters.sim._wire_gemini import GEMINI
from ttc.adapters.sim._wire_openai import OPENAI
from ttc.adapters.sim._wire_responses import RESPONSES
from ttc.engine import Completion, Item, Suite, Usage

__all__ = [
    "FAULTS",
    "WIRES",
    "ServeOptions",
    "SimServer",
    "add_serve_arguments",
    "options_from_args",
    "running_server",
    "serve_forever",
]

HOST = "127.0.0.1"

WIRES: tuple[Wire, ...] = (OPENAI, RESPONSES, GEMINI, ANTHROPIC, AZURE)
"""The wire formats served, tried in order for each path; a new one is one more entry."""

# The server's own routes, answered in OpenAI's envelope and not counted in /stats.
_OWN = {"/stats": Route("GET", "stats", ""), "/stats/reset": Route("POST", "reset", "")}
_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_Handler = Callable[[web.BaseRequest, Wire, Route], Awaitable[web.StreamResponse]]


class _Server:
    """The request handler: dispatch to a wire's route, admission, and the answers."""

    def __init__(self, options: ServeOptions, suite: Suite | None, items: Sequence[Item]) -> None:
        self.options = options
        self.answerer = Answerer(options, suite, items)
        self.gate = Admission(options, asyncio.get_running_loop().time)
        self.stats = self.gate.stats
        self.batch = BatchRoutes(options, self.answerer)
        self._serial = 0
        self.closing = asyncio.Event()
        self._actions: dict[str, _Handler] = {
            "generate": self._generate,
            "embed": self._embed,
            "stats": self._get_stats,
            "reset": self._reset_stats,
        }

    # Dispatch

    def _resolve(self, path: str) -> tuple[Wire, Route] | None:
        own = _OWN.get(path)
        if own is not None:
            return OPENAI, own
        for wire in WIRES:
            route = wire.route(path)
            if route is not None:
                return wire, route
        return None

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        batch = await self.batch.handle(request)
        if batch is not None:  # counted apart, in /stats under `batch`
            return batch
        found = self._resolve(path)
        if found is None:
            wire = next((w for w in WIRES if w.claims(path)), OPENAI)
            self.stats.requests += 1
            return self._reply(404, wire.error(404, f"Invalid URL ({request.method} {path})"))
        wire, route = found
        if route.stats_name:
            self.stats.arrived(route.stats_name)
        if request.method != route.method:
            body = wire.error(405, f"Method {request.method} not allowed on {path}")
            return self._reply(405, body, {"Allow": route.method})
        return await self._actions[route.action](request, wire, route)

    def _reply(
        self, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> web.Response:
        self.stats.status(status)
        return web.Response(body=body, status=status, headers=headers, content_type=JSON)

    async def _json(self, request: web.BaseRequest) -> dict[str, Any]:
        raw = await read_body(request, self.batch.limit)  # --max-body-mb, as the batch routes'
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise Invalid(f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        return body

    def _refuse(self, wire: Wire, refusal: Refusal) -> web.Response:
        self.stats.rate_limited[refusal.kind] += 1
        return self._reply(429, wire.refusal(refusal), self._headers(wire, refusal))

    def _headers(self, wire: Wire, refusal: Refusal | None = None) -> dict[str, str] | None:
        """A response's rate-limit headers: OpenAI's (a 429's with Retry-After), Anthropic's, or
        none (Gemini)."""
        if wire is ANTHROPIC:
            return anthropic_headers(self.gate, refusal)
        if not wire.rate_headers:
            return None
        return self.gate.retry_headers(refusal) if refusal else self.gate.rate_headers()

    # Routes

    async def _generate(
        self, request: web.BaseRequest, wire: Wire, route: Route
    ) -> web.StreamResponse:
        try:
            call = wire.parse(await self._json(request), route)
        except Invalid as exc:
            return self._reply(exc.status, wire.error(exc.status, str(exc)))
        refusal = self.gate.admit()
        if refusal is not None:
            return self._refuse(wire, refusal)
        with self.gate.in_flight():
            fault = self.gate.fault()
            await self.gate.delay()
            if fault is not None:
                self.stats.by_fault[fault] += 1
            if fault == "hang":
                return await self._hang(request)
            if fault in ("500", "503"):
                status = int(fault)
                body = wire.error(status, SERVER_ERRORS[status])
                if wire is ANTHROPIC and status == 503:
                    status = OVERLOADED  # Anthropic says it is overloaded with a 529
                return self._reply(status, body)
            completion = await self._complete(call, fault)
            return await self._send(request, wire, call, completion, fault)

    async def _complete(self, call: Call, fault: str | None) -> Completion:
        if fault == "empty":
            usage = Usage(estimate_tokens("".join(m.content for m in call.messages)))
            return Completion((), usage, ())
        return await self.answerer.answer(call, self.stats)

    async def _send(
        self,
        request: web.BaseRequest,
        wire: Wire,
        call: Call,
        completion: Completion,
        fault: str | None,
    ) -> web.StreamResponse:
        """The 200 of a completion: whole, or damaged as the fault says."""
        self._serial += 1
        payload = wire.body(call, completion, self._serial)
        u = completion.usage
        self.gate.spend(u.input_tokens + u.output_tokens + u.thinking_tokens)
        headers = self._headers(wire)
        counted = self.stats.tokens if fault is None else self.stats.faulty_tokens
        counted[0] += u.input_tokens
        counted[1] += u.output_tokens
        counted[2] += u.thinking_tokens
        data = orjson.dumps(payload)
        if fault is None:
            self.stats.answered(call.prompt)
        if call.stream or fault == "stall":
            return await self._stream(request, wire, call, completion, fault, headers, data)
        if fault == "truncated":
            data = data[: len(data) // 2]
        elif fault == "reset":
            return await self._reset(request, data, headers)
        return self._reply(200, data, headers)

    async def _stream(
        self,
        request: web.BaseRequest,
        wire: Wire,
        call: Call,
        completion: Completion,
        fault: str | None,
        headers: dict[str, str] | None,
        data: bytes,
    ) -> web.StreamResponse:
        """A streamed answer (or a whole body that stalls), damaged as the fault says."""
        self.stats.status(200)
        response = web.StreamResponse(status=200, headers=headers)
        if call.stream:
            chunks = events(wire.name, call, completion, self._serial)
            response.content_type = SSE
        else:  # a whole body that stalls halfway: its length said, half of it sent
            chunks = [data[: len(data) // 2], data[len(data) // 2 :]]
            response.content_type = JSON
            response.content_length = len(data)
        if fault in ("stall", "reset", "truncated"):
            chunks = chunks[: max(1, len(chunks) // 2)]
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        if fault == "stall":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), self.options.hang_s)
            return self._drop(request, response)
        if fault == "reset":
            return self._drop(request, response)
        await response.write_eof()
        return response

    async def _hang(self, request: web.BaseRequest) -> web.StreamResponse:
        """Waits until the client leaves (the handler is cancelled), --hang-s, or shutdown."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closing.wait(), self.options.hang_s)
        return self._drop(request, web.StreamResponse(status=504))

    async def _reset(
        self, request: web.BaseRequest, data: bytes, headers: dict[str, str] | None
    ) -> web.StreamResponse:
        """Sends the headers and half the body, then drops the connection."""
        self.stats.status(200)
        response = web.StreamResponse(status=200, headers=headers)
        response.content_type = JSON
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        return self._drop(request, response)

    @staticmethod
    def _drop(request: web.BaseRequest, response: web.StreamResponse) -> web.StreamResponse:
        # aiohttp then fails to finish the response on the closed transport, quietly.
        if request.transport is not None:
            request.transport.abort()
        return response

    async def _embed(self, request: web.BaseRequest, wire: Wire, route: Route) -> web.Response:
        try:
            call = wire.parse_embed(await self._json(request), route)
            limit = self.answerer.embedder.dim
            if call.dims is not None and call.dims > limit:
                raise Invalid(f"dimensions: at most {limit}, got {call.dims}")
        except Invalid as exc:
            return self._reply(exc.status, wire.error(exc.status, str(exc)))
        refusal = self.gate.admit()
        if refusal is not None:
            return self._refuse(wire, refusal)
        with self.gate.in_flight():
            await self.gate.delay()
            vectors = self.answerer.embed(call.texts, call.dims)
            used = sum(estimate_tokens(t) for t in call.texts)
            self.gate.spend(used)
            self.stats.embedding_tokens += used
            payload = wire.embed_body(call, vectors, used)
            headers = self._headers(wire)
            return self._reply(200, orjson.dumps(payload, option=_NUMPY), headers)

    async def _get_stats(self, request: web.BaseRequest, wire: Wire, route: Route) -> web.Response:
        return web.Response(body=orjson.dumps(self.as_dict()), content_type=JSON)

    def as_dict(self) -> dict[str, Any]:
        return {**self.stats.as_dict(), "batch": self.batch.as_dict()}

    async def _reset_stats(
        self, request: web.BaseRequest, wire: Wire, route: Route
    ) -> web.Response:
        self.stats.reset()
        self.batch.reset()
        return web.Response(body=orjson.dumps(self.as_dict()), content_type=JSON)


class SimServer:
    """A running server: where it listens, and its counters."""

    def __init__(self, core: _Server, port: int) -> None:
        self._core = core
        self.port = port
        self.url = f"http://{HOST}:{port}"
        self.base_url_openai = f"{self.url}/v1"
        self.options = core.options
        # Whether the suite's adaptive prompts decode (else only warm-up prompts are its own).
        self.adaptive = core.answerer.map is not None and core.answerer.map.adaptive

    def stats(self) -> dict[str, Any]:
        """The counters `GET /stats` returns."""
        return self._core.as_dict()

    def reset_stats(self) -> None:
        """Zeroes the counters, as `POST /stats/reset` does."""
        self._core.stats.reset()
        self._core.batch.reset()


@contextlib.asynccontextmanager
async def running_server(
    options: ServeOptions, suite: Suite | None = None, items: Sequence[Item] | None = None
) -> AsyncIterator[SimServer]:
    """Serves on 127.0.0.1 while the block runs (`options.port` 0: a free port).

    `items` default to `suite.items()`; without a suite every prompt gets the generic answer.
    """
    chosen: list[Item] = list(items) if items is not None else []
    if items is None and suite is not None:
        chosen = suite.items()
    core = _Server(options, suite, chosen)
    low = web.Server(core.handle, handler_cancellation=True, access_log=None)
    runner = web.ServerRunner(low, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, HOST, options.port)
        await site.start()
        port = int(runner.addresses[0][1])
        yield SimServer(core, port)
    finally:
        core.closing.set()  # hanging requests give up at once
        await runner.cleanup()


async def serve_forever(
    options: ServeOptions,
    suite: Suite | None,
    items: Sequence[Item] | None,
    *,
    on_ready: Callable[[SimServer], object] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serves until `stop` is set (or cancelled); `on_ready(server)` (sync or async) runs once it
    listens. On the way out, hanging requests give up at once and the rest get 2 s."""
    async with running_server(options, suite, items) as server:
        if on_ready is not None:
            result = on_ready(server)
            if inspect.isawaitable(result):
                await result
        await (stop or asyncio.Event()).wait()
