"""The verifier pool: worker processes that judge responses while requests are still in flight.

Verifiers run in processes, not threads: some (math-verify) rely on `signal.alarm`, which only
works in a process's main thread, and a CPU-bound verifier must not stall the event loop.
Workers are started with `spawn` so they inherit no event loop, no sockets and no threads.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ttc.engine._types import Item, Suite, Verdict

log = logging.getLogger("ttc")

_SUITE: Suite | None = None


def _install(suite: Suite) -> None:
    # The suite is pickled once per worker, not once per response.
    global _SUITE
    _SUITE = suite


def _judge(item: Item, text: str) -> Verdict:
    assert _SUITE is not None, "verifier worker was not initialised"
    return _SUITE.judge(item, text)


def _ready() -> bool:
    return _SUITE is not None


class VerifierPool:
    """Judges (item, response) pairs with the suite's verifier; `workers=0` judges in-process."""

    def __init__(self, suite: Suite, workers: int) -> None:
        self.suite = suite
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self.judged = 0

    def start(self) -> None:
        if self.workers > 0 and self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_install,
                initargs=(self.suite,),
            )
            # Start the workers now, so their imports overlap the first requests.
            for _ in range(self.workers):
                self._pool.submit(_ready)

    async def judge(self, item: Item, text: str) -> Verdict:
        """The verdict on one response; a verifier that raises gives score 0 with the reason."""
        self.judged += 1
        try:
            if self._pool is None:
                return self.suite.judge(item, text)
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._pool, _judge, item, text)
            except BrokenProcessPool:
                # A worker died (killed, out of memory); start a fresh pool and judge once more.
                log.warning("verifier worker died; restarting the pool")
                self._restart()
                return await loop.run_in_executor(self._pool, _judge, item, text)
        except Exception as exc:  # a verifier bug must not lose the run's other work
            log.warning("verifier failed on %s: %r", item.id, exc)
            return Verdict(0.0, None, f"verifier error: {exc!r}")

    def _restart(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.start()

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)
