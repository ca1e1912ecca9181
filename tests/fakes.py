"""Fakes shared by the tests of every layer: a scripted provider that records its history, a tiny
suite, an embedder with known vectors, a fake clock for the event loop, and a loopback HTTP
server that answers from a script. `tests/conftest.py` offers them as fixtures.

The suite renders prompts with the paper's real Reasoning Gym templates, so tests check the
demonstrations exactly as a model would see them.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from ttc.adapters.suites._templates import adaptive_prompt, warmup_prompt
from ttc.engine import (
    Completion,
    Demo,
    Item,
    Provider,
    ProviderError,
    Request,
    Suite,
    Usage,
    Verdict,
)
from ttc.engine.contract import FloatArray


def items(n: int) -> list[Item]:
    """n questions q0..q{n-1}; the right answer to qi is `right:qi`."""
    return [Item(f"q{i}", f"question number {i}", f"right:q{i}") for i in range(n)]


@dataclass
class FakeSuite(Suite):
    """Judges `right:<id>...` as 1.0, anything else 0.0; prompts from the paper's templates.

    `sim_prose`, `sim_response` and `sim_is_correct` are what the offline simulator reads of a
    suite (its own optional protocol, not the Suite contract).
    """

    name: str = "fake"
    sim_prose: bool = False
    pool: list[Item] = field(default_factory=list)

    def items(self) -> list[Item]:
        return list(self.pool)

    def warmup_prompt(self, item: Item) -> str:
        return warmup_prompt("reasoning_gym", item.question)

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        return adaptive_prompt(
            "reasoning_gym", item.question, [(d.question, d.response) for d in demos]
        )

    def judge(self, item: Item, response: str) -> Verdict:
        ok = response.startswith(item.reference)
        return Verdict(1.0 if ok else 0.0, response)

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        return item.reference if correct else "wrong"

    def sim_is_correct(self, item: Item, response: str) -> bool:
        return response.startswith(item.reference)


# A scripted step: a response text, an error to raise, or (seconds to wait, text).
Step = str | ProviderError | tuple[float, str]


@dataclass
class ScriptedProvider(Provider):
    """Answers each question from its own script, in call order; records every request.

    A question whose script runs out answers `wrong`. Calls are keyed by item id, so the script
    is independent of the order in which concurrent requests arrive.
    """

    script: dict[str, list[Step]] = field(default_factory=dict)
    name: str = "scripted"
    model: str = "scripted-1"
    history: list[Request] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    async def generate(self, request: Request) -> Completion:
        self.history.append(request)
        steps = self.script.get(request.item_id, [])
        i = self.calls[request.item_id]
        self.calls[request.item_id] += 1
        step: Step = steps[i] if i < len(steps) else "wrong"
        if isinstance(step, ProviderError):
            raise step
        if isinstance(step, tuple):
            await asyncio.sleep(step[0])
            step = step[1]
        usage = Usage(input_tokens=len(request.messages[0].content) // 4, output_tokens=10)
        return Completion((step,), usage, ("stop",))

    def requests_for(self, item_id: str) -> list[Request]:
        return [r for r in self.history if r.item_id == item_id]


@dataclass
class TableEmbedder:
    """An embedder with hand-set vectors, so neighbours are known exactly."""

    vectors: dict[str, list[float]]
    name: str = "table"
    dim: int = 0
    batch_size: int = 64

    def __post_init__(self) -> None:
        self.dim = len(next(iter(self.vectors.values())))
        self._by_text = {f"question number {k[1:]}": v for k, v in self.vectors.items()}

    def embed(self, texts: Sequence[str]) -> FloatArray:
        mat = np.array([self._by_text[t] for t in texts], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return (mat / np.where(norms == 0, 1, norms)).astype(np.float32)


# ── a fake clock ─────────────────────────────────────────────────────────────────────────────

CLOCK_START = 1000.0


class FakeClock:
    """Stands in for `loop.time`; `advance` moves it and lets due timers and their wakers run."""

    def __init__(self) -> None:
        self.now = CLOCK_START

    def time(self) -> float:
        return self.now

    @property
    def elapsed(self) -> float:
        return self.now - CLOCK_START

    async def settle(self) -> None:
        # Waking a chain of waiters takes a loop turn per link (timer → future → task step →
        # next waker), so yield generously; no timer here is ever due before the clock moves.
        for _ in range(50):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        await self.settle()

    async def advance_to(self, elapsed: float) -> None:
        self.now = CLOCK_START + elapsed
        await self.settle()


# ── a loopback HTTP server ───────────────────────────────────────────────────────────────────


@dataclass
class Reply:
    """One scripted answer: a status, headers, and a JSON value or raw bytes."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # Send these bytes of a longer announced body, then drop the connection.
    cut: bytes | None = None


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: Any
    query: str = ""


async def serve_everything(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]], prefix: str = ""
) -> tuple[web.AppRunner, str]:
    """Serves every path with `handle` on a free port of 127.0.0.1: the runner (the caller cleans
    it up) and the URL, `prefix` appended."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}{prefix}"


def chat_reply(content: str = "4", usage: object = None) -> Reply:
    """An OpenAI chat completion answering `content`, with `usage` if given."""
    body: dict[str, object] = {
        "model": "m",
        "choices": [{"index": 0, "message": {"content": content}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    return Reply(body=body)


@dataclass
class Loopback:
    """A real HTTP server on 127.0.0.1 answering from a script; records every request.

    Each request takes the next scripted reply, or, once the script is empty, `default`'s.
    `url` is the server's root plus the prefix it was started with (e.g. "/v1").
    """

    default: Callable[[Seen], Reply]
    script: list[Reply] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw) if raw else None
        seen = Seen(request.path, dict(request.headers), body, request.query_string)
        self.seen.append(seen)
        reply = self.script.pop(0) if self.script else self.default(seen)
        if reply.cut is not None:
            response = web.StreamResponse(status=reply.status, headers=reply.headers)
            response.content_length = len(reply.cut) + 1000
            response.content_type = "application/json"
            await response.prepare(request)
            await response.write(reply.cut)
            assert request.transport is not None
            request.transport.close()
            return response
        data = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
        return web.Response(
            status=reply.status, body=data, headers=reply.headers, content_type="application/json"
        )

    async def start(self, prefix: str = "") -> web.AppRunner:
        """Serves every path on a free port of 127.0.0.1; the caller cleans the runner up."""
        runner, url = await serve_everything(self.handle, prefix)
        self.url = url
        return runner


StartLoopback = Callable[[Callable[[Seen], Reply], str], Awaitable[Loopback]]
"""The `loopback` fixture: starts a server with its default reply and the prefix of its `url`."""


@dataclass
class HugeServer:
    """A server on 127.0.0.1 whose every answer is a chat completion of `size` bytes of text,
    written in 64 KiB chunks (no Content-Length, unless `declare` says one), with `status`.

    `sent` records, per request, how many bytes of text it managed to write before the client
    hung up: what a client that stops reading at its cap lets through. `finished()` waits for
    the next request's record.
    """

    size: int
    status: int = 200
    declare: int | None = None
    sent: list[int] = field(default_factory=list)
    url: str = ""
    _done: asyncio.Queue[int] = field(default_factory=asyncio.Queue)

    async def finished(self) -> int:
        """The bytes of text the next request to end was sent."""
        return await self._done.get()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=self.status)
        response.content_type = "application/json"
        if self.declare is not None:
            response.content_length = self.declare
        await response.prepare(request)
        chunk, sent = b"x" * 65536, 0
        try:
            await response.write(b'{"choices": [{"index": 0, "message": {"content": "')
            while sent < self.size:
                await response.write(chunk)
                sent += len(chunk)
            await response.write(b'"}, "finish_reason": "stop"}]}')
        except ConnectionError:
            pass  # the client stopped reading and closed the connection
        finally:
            self.sent.append(sent)
            self._done.put_nowait(sent)
        return response

    async def start(self, prefix: str = "") -> web.AppRunner:
        """Serves every path on a free port of 127.0.0.1; the caller cleans the runner up."""
        runner, url = await serve_everything(self.handle, prefix)
        self.url = url
        return runner


StartHuge = Callable[..., Awaitable[HugeServer]]
"""The `huge` fixture: starts a HugeServer with its size (and status, declare, prefix)."""


def figure_fits(fig: Any) -> bool:
    """Everything a matplotlib figure draws (titles, legend, labels) lies inside it: nothing is
    clipped at its edges."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas: Any = FigureCanvasAgg(fig)  # a fresh canvas: pyplot lets go of a figure once written
    canvas.draw()
    box = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    return bool(box.x0 >= -0.01 and box.y0 >= -0.01 and box.x1 <= width + 0.01
                and box.y1 <= height + 0.01)  # fmt: skip


def library_example(page: str, which: int = 0) -> str:
    """A python example of the library page (docs/library.md), as printed: the first (`run`), or
    the `which`-th."""
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) > which, "docs/library.md lacks a python example"
    return str(blocks[which])


def needs_redis_server() -> None:
    """Skips a test with no `redis-server` on PATH (a user who cannot install Debian's package;
    `make test` installs it as root), and fails it in CI, where the project's set-up has."""
    import os
    import shutil

    import pytest

    if shutil.which("redis-server") is None:
        why = "redis-server is not installed (`make test` installs it as root: apt-get)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
