"""`ttc run`'s control socket (`ttc ctl`, `_control`): served while the run sends, its changes
applied through `Engine.steer` (journaled, so the timeline shows them and a resume replays
them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ttc.engine.cli._control import Controller, control_served
from ttc.engine.contract._state import RunState
from ttc.engine.contract._types import Usage
from ttc.engine.run._budget import StopReason
from ttc.engine.run._engine import Engine
from ttc.engine.run._observer import RunObserver


class ControlledRun(RunObserver):
    """`ttc run`'s control socket, as an observer of its run: served from the moment the run is
    set up (its directory exists, its journal is open) until no more requests will be sent."""

    def __init__(self, path: Path, progress: Callable[[], dict[str, Any]]) -> None:
        self.path = path
        self.progress = progress
        self.engine: Engine | None = None
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def run_started(
        self, state: RunState, rounds: int, cost: Callable[[Usage], float | None]
    ) -> None:
        """The engine's hook: the socket is opened."""
        if self.engine is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve(self.engine))

    async def _serve(self, engine: Engine) -> None:
        controller = Controller(engine.limiter, engine.steer, self.progress)
        async with control_served(self.path, controller):
            await self._ended.wait()

    async def run_ended(self, stopped: StopReason | None) -> None:
        """The engine's hook: the socket is closed."""
        self._ended.set()
        if self._task is not None:
            await self._task
            self._task = None
