"""Reading a response body with a cap, so that a hostile or broken server cannot fill memory.

Every body an HTTP adapter reads stops at `max_response_bytes` (default 32 MiB): a declared
Content-Length over the cap is refused before a byte is read, and otherwise the body is read in
chunks, never more than the cap and one byte, the connection closed as soon as it passes. The
sample then fails with `ResponseTooLarge` (a BadRequest: not retried, since the answer would be as
large again), "response body over 32 MiB (--max-response-bytes)". Bodies are counted as they are
decoded (after gzip), so a small compressed body does not inflate past the cap either.

    where                                   how the cap is kept
    ─────────────────────────────────────   ──────────────────────────────────────────────────
    OpenAIProvider (aiohttp, any session)   `read_capped` reads the body itself
    GeminiProvider on its own session       the session's response class (`capped_response`)
                                            caps `read()`, which google-genai calls
    GeminiProvider on a caller's session    not capped: that session's response class reads
    the API embedders (the SDKs, httpx2)    `capped_http_client`: reads each body in chunks
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import aiohttp

from ttc.engine import ConfigError, ResponseTooLarge

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "MAX_RESPONSE_BYTES",
    "capped_http_client",
    "capped_response",
    "check_cap",
    "read_capped",
    "too_large",
]

MAX_RESPONSE_BYTES = 32 * 2**20
_CHUNK = 64 * 1024


def check_cap(cap: int, who: str) -> None:
    """Refuses a cap that no body could pass, naming `who`."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(f"{who}: max_response_bytes must be an integer >= 1, got {cap!r}")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,} bytes"


def too_large(who: str, cap: int) -> ResponseTooLarge:
    """The error of a body over `cap` bytes, in the words the user sees."""
    return ResponseTooLarge(f"{who}: response body over {_size(cap)} (--max-response-bytes)")


def _declared(headers: Mapping[str, str]) -> int | None:
    """The Content-Length a response announces, if it is a number."""
    text = headers.get("Content-Length") or headers.get("content-length")
    return int(text) if text is not None and text.strip().isdigit() else None


async def read_capped(response: aiohttp.ClientResponse, cap: int, who: str) -> bytes:
    """The whole body of `response`, or ResponseTooLarge once it passes `cap` bytes (the
    connection then closed, nothing beyond cap + 1 bytes read)."""
    declared = _declared(response.headers)
    if declared is not None and declared > cap:
        response.close()
        raise too_large(who, cap)
    body = bytearray()
    while True:
        chunk = await response.content.read(min(_CHUNK, cap + 1 - len(body)))
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > cap:
            response.close()
            raise too_large(who, cap)


def capped_response(cap: int, who: str) -> type[aiohttp.ClientResponse]:
    """A response class for a session we own whose `read()` (and so `text()` and `json()`, as
    an SDK calls them) keeps `cap`."""

    class CappedResponse(aiohttp.ClientResponse):
        async def read(self) -> bytes:
            if self._body is None:
                try:
                    self._body = await read_capped(self, cap, who)
                except BaseException:
                    self.close()
                    raise
            return await super().read()

    return CappedResponse


def capped_http_client(cap: int, who: str) -> httpx2.Client:
    """An httpx2 client for the SDKs (openai, google-genai) whose every response body is read
    with `cap`, counted as decoded; the SDK's own timeouts apply to each request."""
    import httpx2

    class CappedClient(httpx2.Client):
        def __del__(self) -> None:
            # As the SDKs' own clients: an embedder has no close, its pool goes with it.
            with suppress(Exception):
                self.close()

        def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
            kwargs["stream"] = True
            response = super().send(request, **kwargs)
            try:
                if (_declared(response.headers) or 0) > cap:
                    raise too_large(who, cap)
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > cap:
                        raise too_large(who, cap)
            finally:
                response.close()
            # The body is decoded: a new response, without the encoding it came in.
            headers = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length")
            ]
            return httpx2.Response(
                response.status_code,
                headers=headers,
                content=bytes(body),
                request=request,
                extensions=response.extensions,
            )

    return CappedClient(follow_redirects=True)
