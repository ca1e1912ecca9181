"""What every wire format of `ttc serve` shares: the `Wire` interface, the parsed requests, and
readers of JSON fields that reject a bad value with 400 as the APIs do.

A wire format is one module with one `Wire` object: which paths are its routes, how it parses a
generation or an embedding request, how it writes a completion, embeddings and errors. The server
(`_serve`) lists the wire objects it serves: a new wire format is its module and one line there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from aiohttp import web

from ttc.adapters.sim._admission import Refusal
from ttc.engine import Completion, Message, Sampling

__all__ = [
    "JSON",
    "MAX_N",
    "SERVER_ERRORS",
    "Call",
    "EmbedCall",
    "Invalid",
    "Route",
    "TooLarge",
    "Vectors",
    "Wire",
    "count",
    "estimate_tokens",
    "integer",
    "number",
    "read_body",
    "string",
]

JSON = "application/json"
MAX_N = 128
"""The most completions one request may ask for."""
SERVER_ERRORS = {
    500: "The server had an error while processing your request. (simulated)",
    503: "The server is overloaded or not ready yet. (simulated)",
}
"""The messages of the injected 500 and 503 faults."""


class Invalid(Exception):
    """A request the API would reject with 400."""

    status = 400


class TooLarge(Invalid):
    """A body over the server's --max-body-mb: 413, refused before it is held whole."""

    status = 413


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole body of `request`, at most `limit` bytes (TooLarge past it, checked against the
    declared length first and then as it arrives: a chunked body declares none)."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise TooLarge(f"the body is {declared:,} bytes; this server takes at most {limit:,}")
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.read(1 << 20):
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over {limit:,} bytes, the most this server takes")
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass(frozen=True, slots=True)
class Route:
    """What a path asks for: the `action` ("generate" or "embed") by `method`, the route's name
    in `/stats`, the model named in the path (if any), and the wire's own `variant` of it."""

    method: str
    action: str
    stats_name: str
    model: str = ""
    variant: str = ""


@dataclass(frozen=True, slots=True)
class Call:
    """A parsed generation request: what the simulator needs, and the prompt to decode;
    `stream`: answered as server-sent events (`_sse_events`), with the usage in a last chunk
    when `stream_usage` (OpenAI's `stream_options.include_usage`; the other formats always)."""

    messages: tuple[Message, ...]
    prompt: str
    sampling: Sampling
    n: int
    model: str
    stream: bool = False
    stream_usage: bool = True


@dataclass(frozen=True, slots=True)
class EmbedCall:
    """A parsed embedding request."""

    texts: list[str]
    dims: int | None
    model: str = ""
    base64: bool = False
    batch: bool = True


Vectors = np.ndarray[Any, np.dtype[np.float32]]


class Wire(Protocol):
    """One API's routes, request parsing, response bodies and error envelopes."""

    @property
    def name(self) -> str:
        """The wire's name: "openai", "gemini"."""
        ...

    @property
    def rate_headers(self) -> bool:
        """Whether responses carry OpenAI's x-ratelimit-* and Retry-After headers."""
        ...

    def route(self, path: str) -> Route | None:
        """The route `path` names on this wire, or None."""
        ...

    def claims(self, path: str) -> bool:
        """Whether an unknown `path` looks like this wire's, for the envelope of its 404."""
        ...

    def error(self, status: int, message: str, kind: str = "", code: str | None = None) -> bytes:
        """The error body of a response of `status`."""
        ...

    def refusal(self, refusal: Refusal) -> bytes:
        """The body of a 429."""
        ...

    def parse(self, body: dict[str, Any], route: Route) -> Call:
        """A generation request's body, parsed; Invalid (400) if the API would reject it."""
        ...

    def body(self, call: Call, completion: Completion, serial: int) -> dict[str, Any]:
        """The response body of a completion; `serial` numbers the responses."""
        ...

    def parse_embed(self, body: dict[str, Any], route: Route) -> EmbedCall:
        """An embedding request's body, parsed; Invalid (400) if the API would reject it."""
        ...

    def embed_body(self, call: EmbedCall, vectors: Vectors, tokens: int) -> dict[str, Any]:
        """The response body of the embeddings of `call`."""
        ...


def estimate_tokens(text: str) -> int:
    """The server's token estimate of a text: four characters a token."""
    return math.ceil(len(text) / 4)


def number(d: dict[str, Any], key: str, where: str) -> float | None:
    """The number `d[key]`, or None if absent; Invalid (400) if it is not a number."""
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise Invalid(f"{where}{key}: expected a number, got {v!r}")
    return float(v)


def integer(d: dict[str, Any], key: str, where: str, low: int | None = None) -> int | None:
    """The integer `d[key]` (at least `low`), or None if absent; else Invalid (400)."""
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise Invalid(f"{where}{key}: expected an integer, got {v!r}")
    if low is not None and v < low:
        raise Invalid(f"{where}{key}: must be >= {low}, got {v}")
    return v


def string(d: dict[str, Any], key: str, where: str) -> str | None:
    """The string `d[key]`, or None if absent; else Invalid (400)."""
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise Invalid(f"{where}{key}: expected a string, got {v!r}")
    return v


def count(n: int | None, where: str) -> int:
    """How many completions a request asks for (1 by default), within [1, MAX_N]."""
    if n is None:
        return 1
    if not 1 <= n <= MAX_N:
        raise Invalid(f"{where}: must be in [1, {MAX_N}], got {n}")
    return n
