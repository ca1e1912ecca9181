"""Reading a streamed answer (server-sent events) with a first-byte and an inter-chunk timeout.

A long answer (tens of thousands of tokens, minutes at 30-100 tokens a second) streamed is watched
chunk by chunk: a server that sends nothing for `first_byte_s` after the request, or nothing for
`stall_s` between two chunks, has stalled, and the attempt ends at once with `Stalled` (a
Transient, retried by the engine) carrying the text received so far, instead of waiting out the
attempt's whole timeout. Every wire format's events are one JSON object per `data:` field; the
`event:` names are not needed (each object says its own `type`), comments (": ping") and
`data: [DONE]` are skipped. What each format's events mean is its `Assembly`'s to say
(`_streams`); the bytes read stop at the connection's cap as a whole body's do.

    no status line and headers within first_byte_s      Stalled("no first byte")
    no body byte within first_byte_s of the headers     Stalled("no first byte")
    no byte within stall_s of the previous one          Stalled("stalled after N chunks")
    the connection closed before the final event        Transient("stream ended early")
    more than the cap                                   ResponseTooLarge
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import aiohttp
import orjson

from ttc.adapters.providers._capped import read_capped, too_large
from ttc.engine import ConfigError, ProviderError, Transient, Usage
from ttc.engine.contract import Stalled

__all__ = ["Assembly", "Streaming", "post_stream", "read_stream", "timed"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Streaming:
    """Whether answers are streamed, and the waits that say a stream stalled (seconds)."""

    first_byte_s: float = 60.0
    stall_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("first_byte_s", "stall_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                flag = "--first-byte-timeout" if name == "first_byte_s" else "--stall-timeout"
                raise ConfigError(f"{flag}: must be a number of seconds > 0, got {value!r}")


class Assembly(Protocol):
    """One format's events assembled into the body a whole (unstreamed) answer would have."""

    who: str  # the provider's name, in messages
    done: bool

    def feed(self, event: dict[str, Any]) -> None:
        """Takes one event's JSON object."""
        ...

    def partial(self) -> tuple[str, ...]:
        """Each sample's text so far."""
        ...

    def estimate(self) -> Usage:
        """The tokens so far, estimated from the text (the usage event comes last)."""
        ...


async def timed(wait: float, what: Awaitable[T], on_timeout: Callable[[], Exception]) -> T:
    """`what`, or `on_timeout()` raised when it takes longer than `wait` seconds."""
    try:
        async with asyncio.timeout(wait):
            return await what
    except TimeoutError:
        raise on_timeout() from None


async def post_stream(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    assembly: Assembly,
    streaming: Streaming,
    cap: int,
    refused: Callable[[int, Mapping[str, str], bytes], ProviderError],
) -> Mapping[str, str]:
    """POSTs a streaming request and reads its events into `assembly`; the response's headers.
    A status other than 2xx is read whole and raised as `refused(status, headers, body)`."""
    who = assembly.who
    response = await timed(
        streaming.first_byte_s,
        session.post(url, data=payload, headers={**headers, "Accept": "text/event-stream"}),
        lambda: Stalled(f"{who}: no response headers in {streaming.first_byte_s:g}s"),
    )
    try:
        if not 200 <= response.status < 300:
            raw = await read_capped(response, cap, who)
            raise refused(response.status, response.headers, raw)
        await read_stream(response, assembly, streaming, cap)
    except BaseException:
        response.close()  # a stalled stream's connection is dropped, not pooled
        raise
    response.release()
    return response.headers


async def read_stream(
    response: aiohttp.ClientResponse,
    assembly: Assembly,
    streaming: Streaming,
    cap: int,
) -> None:
    """Feeds `assembly` every event of `response` until its final one (see the docstring)."""
    who = assembly.who
    content = response.content
    events = _Events(assembly)
    size = chunks = 0
    wait = streaming.first_byte_s

    def stalled() -> Stalled:
        if chunks == 0:
            what = f"no first byte in {streaming.first_byte_s:g}s"
        else:
            what = f"stalled: nothing for {streaming.stall_s:g}s after {chunks} chunks"
        return Stalled(f"{who}: stream {what}", assembly.partial(), assembly.estimate())

    while True:
        chunk = await timed(wait, content.readany(), stalled)
        if not chunk:
            raise Transient(f"{who}: stream ended early (after {chunks} chunks)")
        chunks += 1
        wait = streaming.stall_s
        size += len(chunk)
        if size > cap:
            response.close()
            raise too_large(who, cap)
        if events.take(chunk):
            return


class _Events:
    """Bytes into server-sent events, each event's data fed to an assembly."""

    def __init__(self, assembly: Assembly) -> None:
        self.assembly = assembly
        self.buffer = b""
        self.data: list[bytes] = []

    def take(self, chunk: bytes) -> bool:
        """Takes the next bytes; whether the final event has come."""
        self.buffer += chunk
        if b"\n" not in chunk:  # a long event still arriving: not split again and again
            return False
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            if line.startswith(b"data:"):
                self.data.append(line[5:].lstrip(b" "))
            elif not line and self.data:
                raw, self.data = b"\n".join(self.data), []
                if _dispatch(raw, self.assembly):
                    return True
        return False


def _dispatch(raw: bytes, assembly: Assembly) -> bool:
    """Feeds one event's data to `assembly`; whether it was the last."""
    if raw == b"[DONE]":
        assembly.done = True
        return True
    event = orjson.loads(raw)  # not JSON: TransportErrors makes it a Transient
    if isinstance(event, dict):
        assembly.feed(event)
    return assembly.done
