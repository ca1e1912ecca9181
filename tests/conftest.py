"""Fixtures shared by every layer's tests: the scripted provider, the fake clock, and one
loopback HTTP server factory (the fakes themselves are in `fakes.py`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from fakes import (
    FakeClock,
    HugeServer,
    Loopback,
    Reply,
    ScriptedProvider,
    Seen,
    StartHuge,
    StartLoopback,
)

TESTS = Path(__file__).resolve().parent
E2E = TESTS / "e2e"
# The modules whose tests run on one worker of `pytest -n` (`--dist loadgroup`, as `make test`
# runs them), by group: each Ray test starts a local Ray, never two at once; the others share a
# module fixture that costs seconds (a grid of runs, a model), set up once rather than on each
# worker.
GROUPS = {
    "adapters/executors/test_ray.py": "ray",
    "adapters/executors/test_ray_local.py": "ray",
    "e2e/test_ray_cli.py": "ray",
    "benchmarks/test_paper.py": "paper",
    "benchmarks/test_paper_tables.py": "paper_tables",
    "adapters/embedders/test_embedders.py": "minilm",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every end-to-end test is `slow`: each starts `ttc` or a server as a process of its own, so
    `pytest -m "not slow"` (`make test-fast`) leaves tests/e2e out. The modules of `GROUPS` get
    their `xdist_group`."""
    for item in items:
        path = Path(item.path).resolve()
        if E2E in path.parents:
            item.add_marker(pytest.mark.slow)
        group = GROUPS.get(path.relative_to(TESTS).as_posix())
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def scripted() -> ScriptedProvider:
    """A scripted provider with an empty script: every question answers `wrong`."""
    return ScriptedProvider()


@pytest.fixture
async def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The running loop's `time`, replaced by a clock that moves only when told."""
    fake = FakeClock()
    monkeypatch.setattr(asyncio.get_running_loop(), "time", fake.time)
    return fake


@pytest.fixture
async def loopback() -> AsyncIterator[StartLoopback]:
    """Starts loopback servers on demand; all of them stop when the test ends."""
    runners: list[web.AppRunner] = []

    async def start(default: Callable[[Seen], Reply], prefix: str = "") -> Loopback:
        server = Loopback(default)
        runners.append(await server.start(prefix))
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def huge() -> AsyncIterator[StartHuge]:
    """Starts servers that answer hugely (`HugeServer`); all of them stop when the test ends."""
    runners: list[web.AppRunner] = []

    async def start(
        size: int, *, status: int = 200, declare: int | None = None, prefix: str = "/v1"
    ) -> HugeServer:
        server = HugeServer(size, status, declare)
        runners.append(await server.start(prefix))
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    """A listening TCP socket on 127.0.0.1: a sandboxed program must never reach it (the tests
    check that nobody connected)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()
