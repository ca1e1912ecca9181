"""Verification on Ray: the suite's judge in Ray actors, one per worker, with the verdicts of the
local process pool (`ttc.engine.VerifierPool`): each actor runs the same `judge_pairs`.

Ray is imported here only, and only when a pool is made; without it the pool is refused with a
ConfigError naming `pip install 'ttc[ray]'`.

- **Start-up.** `start()` returns at once: a thread connects to Ray and creates the actors, so
  their start overlaps the first requests. `address` names an existing cluster, which is left
  running (only this process's connection is closed); None starts a local Ray with `workers`
  CPUs and no dashboard, every process of it listening on 127.0.0.1 only and its files in a
  private (0700) folder, stopped by `aclose`; a Ray the host already started is used as it is.
  Each actor gets the suite once and runs its `prepare()`, as the process pool's initializer
  does; `ready()` waits for all of them.
- **Judging.** A batch goes to the least busy actor (one of many samples, e.g. those a resumed
  run judges at once, is split across them). An actor is synchronous with one method at a time
  (Ray's default), so each batch is judged in the worker process's main thread: math-verify's
  `signal.alarm` timeouts hold, and the sandbox's `preexec_fn` runs with no other thread. The
  event loop only awaits ObjectRefs.
- **A worker or node lost.** Ray restarts a dead actor (`max_restarts=-1`), on another node if
  its own is gone; a batch whose actor died under it is sent again, to the least busy actor
  other than the one that just died where there is another (a call to an actor Ray has not yet
  seen die fails at once, as often as it is made: on a loaded machine a batch sent back to it
  used up its attempts before the restart), up to `ATTEMPTS` times in all: then it scores 0 with
  the reason (a batch that kills every worker it meets), as the process pool does after two. If
  Ray itself fails, the run stops with a VerifierError; the samples that landed are in the
  journal, judged when the run is resumed.
- **Logs.** Workers' output stays in Ray's session logs (`log_to_driver=False`). What the suite
  logs on `ttc` at WARNING while a worker prepares it (the sandbox protecting less on that node:
  no user namespaces, no seccomp, ...) is sent back and logged here, once per node. Ray's own
  start-up warnings are kept off the host's handlers.
- **Signals.** Ray starts its processes with SIGINT blocked, so Ctrl-C is ttc's alone; ray.init
  runs in a thread, where it leaves the host's SIGTERM handler as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import math
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

from ttc.engine import ConfigError, Item, Suite, Verdict, VerifierError
from ttc.engine.run import JudgeRaised, judge_pairs

__all__ = ["ATTEMPTS", "INSTALL", "RayVerifierPool"]

log = logging.getLogger("ttc")

INSTALL = "pip install 'ttc[ray]'"
"""The command that installs Ray for ttc."""
ATTEMPTS = 3
"""Sends of one batch whose worker died under it, before it scores 0 with the reason."""
# A batch is split across the actors from this many samples per part on.
_PART = 8


def import_ray() -> Any:
    """The `ray` module (typed Any: ttc calls a few of its functions); ConfigError if absent."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(f"Ray is not installed: {INSTALL}") from None


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker's answer to `ready`: where it runs, and what it logged preparing the suite."""

    pid: int
    node: str
    main_thread: bool
    warnings: tuple[str, ...]


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


class JudgeActor:
    """One Ray verifier worker (the class Ray makes an actor of): the suite, installed once.

    The suite comes as a reference inside a list (`box`), which Ray hands over as it is: the
    actor fetches it the first time, and again after Ray restarts it, from the object the pool
    holds. (As a constructor argument it would be pinned for restarts with a warning on the
    host's terminal whenever it is large, as a suite holding its test set is.)
    """

    def __init__(self) -> None:
        self.suite: Suite | None = None
        self.warnings: list[str] = []

    def _installed(self, box: list[Any]) -> Suite:
        if self.suite is None:
            suite: Suite = import_ray().get(box[0])
            collect, logger = _Collect(self.warnings), logging.getLogger("ttc")
            logger.addHandler(collect)
            try:
                suite.prepare()
            finally:
                logger.removeHandler(collect)
            self.suite = suite
        return self.suite

    def ready(self, box: list[Any]) -> WorkerInfo:
        self._installed(box)
        main = threading.current_thread() is threading.main_thread()
        return WorkerInfo(os.getpid(), socket.gethostname(), main, tuple(self.warnings))

    def judge_many(self, box: list[Any], pairs: list[tuple[Item, str]]) -> list[Verdict]:
        return judge_pairs(self._installed(box), pairs)


@dataclass(slots=True)
class _Slot:
    actor: Any
    busy: int = 0  # batches sent to it and not yet answered


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The logger `name` at ERROR for a while (Ray's start-up warnings are not the user's)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _settle(future: Future[Any], result: Any, error: BaseException | None) -> None:
    """`future`'s result or error, unless it was cancelled (its waiter has gone)."""
    with contextlib.suppress(InvalidStateError):
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


def _why(exc: BaseException) -> str:
    """What went wrong in a worker, in a line: the worker's own exception when Ray carries it
    (a RayTaskError's `cause`), else the last line of Ray's message."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def split(pairs: list[tuple[Item, str]], workers: int) -> list[list[tuple[Item, str]]]:
    """`pairs` in up to `workers` near-equal parts, each of at least `_PART` (one if fewer)."""
    parts = max(1, min(workers, len(pairs) // _PART))
    size = math.ceil(len(pairs) / parts)
    return [pairs[i : i + size] for i in range(0, len(pairs), size)]


class RayVerifierPool:
    """Judges (item, response) pairs with the suite's verifier in `workers` Ray actors (see the
    module docstring); `address`: an existing Ray cluster, None: a local Ray of its own."""

    def __init__(self, suite: Suite, workers: int, address: str | None = None) -> None:
        if workers < 1:
            raise ConfigError(f"verifying on Ray needs 1 worker or more, got {workers}")
        self._ray = import_ray()  # refused now, not once a run has begun
        self.suite = suite
        self.workers = workers
        self.address = address
        self.judged = 0
        self.startup_s: float | None = None  # ray.init and the actors' set-up, once ready
        self._t0 = 0.0
        self._starting: Future[list[_Slot]] | None = None
        self._stopped: Future[None] | None = None
        self._closing = threading.Event()
        self._box: list[Any] = []
        self._slots: list[_Slot] = []
        self._connected = False  # this pool called ray.init: it calls ray.shutdown
        self._tmp: str | None = None  # the private folder of the local Ray it started
        self._lock = asyncio.Lock()

    @property
    def started(self) -> bool:
        """Whether `start` was called (the actors may still be starting)."""
        return self._starting is not None

    def start(self) -> None:
        if self._starting is None:
            self._t0 = time.perf_counter()
            self._starting, self._stopped = Future(), Future()
            self._closing = threading.Event()
            threading.Thread(target=self._host, name="ttc-ray", daemon=True).start()

    def _host(self) -> None:
        """The thread that connects to Ray and, once the pool closes, disconnects. A local Ray's
        processes die with the thread that started them (Linux's parent-death signal belongs to
        a thread), so this one lives as long as the pool. It stops what it started even when
        nobody waits for it any more (a second Ctrl-C during the start)."""
        starting, stopped = self._starting, self._stopped
        assert starting is not None
        assert stopped is not None
        slots: list[_Slot] = []
        try:
            slots = self._connect()
            _settle(starting, slots, None)
        except BaseException as exc:
            _settle(starting, None, exc)
        self._closing.wait()
        try:
            self._stop(slots)
        finally:
            _settle(stopped, None, None)

    def _connect(self) -> list[_Slot]:
        ray = self._ray
        if not ray.is_initialized():
            with _quiet("ray"), self._local() as local:
                ray.init(
                    address=self.address,
                    log_to_driver=False,
                    configure_logging=False,
                    **local,
                )
            self._connected = True
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus < self.workers:
            log.warning(
                "the Ray cluster has %g CPUs: of the %d verifier workers, the last %d wait for one",
                cpus,
                self.workers,
                self.workers - int(cpus),
            )
        self._box = [ray.put(self.suite)]  # held here: the actors fetch it, restarted ones too
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(JudgeActor)
        return [_Slot(actor.remote()) for _ in range(self.workers)]

    @contextlib.contextmanager
    def _local(self) -> Iterator[dict[str, Any]]:
        """The settings of a local Ray this pool starts (none for a cluster's address): its
        `workers` CPUs, no dashboard, every process listening on loopback only, and its files
        in a private folder.

        Ray (on Linux) swaps a node address of 127.0.0.1 for the machine's own, to be reachable
        from other nodes; a node alone on its machine is what its single-machine switch is for,
        set while `ray.init` resolves the address (its GCS, raylet, object manager and workers
        then listen on 127.0.0.1). Ray makes its temporary folder 0777 (/tmp/ray by default): it
        is made inside a folder of ttc's own, 0700, removed once the pool has stopped."""
        if self.address:
            yield {}
            return
        constants: Any = importlib.import_module("ray._private.ray_constants")
        cluster = constants.ENABLE_RAY_CLUSTER
        self._tmp = tempfile.mkdtemp(prefix="ttc-ray-")
        constants.ENABLE_RAY_CLUSTER = False
        try:
            yield {
                "num_cpus": self.workers,
                "include_dashboard": False,
                "_node_ip_address": "127.0.0.1",
                "_temp_dir": os.path.join(self._tmp, "ray"),
            }
        finally:
            constants.ENABLE_RAY_CLUSTER = cluster

    async def ready(self) -> None:
        """Wait until every actor has installed the suite; VerifierError if Ray did not start
        or a worker could not set the suite up."""
        async with self._lock:
            if self._slots:
                return
            self.start()
            assert self._starting is not None
            try:
                # Shielded: a cancelled waiter must not cancel the start (its thread settles it).
                slots = await asyncio.shield(asyncio.wrap_future(self._starting))
            except ConfigError:
                raise
            except Exception as exc:
                raise VerifierError(f"Ray did not start: {exc}") from exc
            try:
                workers = await asyncio.gather(*(s.actor.ready.remote(self._box) for s in slots))
            except self._ray.exceptions.RayError as exc:
                raise VerifierError(
                    "a Ray verifier worker could not set the suite up (its class must be "
                    "importable on every node, with ttc installed, and its prepare() must "
                    f"succeed): {_why(exc)}"
                ) from exc
            self._said(workers)
            self._slots = slots
            self.startup_s = time.perf_counter() - self._t0
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            log.info(
                "verifying on %s: %d workers, ready in %.1f s", where, len(slots), self.startup_s
            )

    def _said(self, workers: list[WorkerInfo]) -> None:
        """What the workers logged preparing the suite, once per node; and a worker whose
        methods would not run in its main thread (math-verify then has no timeouts)."""
        for node, line in dict.fromkeys((w.node, line) for w in workers for line in w.warnings):
            log.warning("Ray verifier worker on %s: %s", node, line)
        if not all(w.main_thread for w in workers):
            log.warning("Ray verifier workers judge outside their main thread: no signal.alarm")

    async def judge(self, item: Item, text: str) -> Verdict:
        """The verdict on one response."""
        return (await self.judge_many([(item, text)]))[0]

    async def judge_many(self, pairs: list[tuple[Item, str]]) -> list[Verdict]:
        """Verdicts on several responses: one round trip to an actor per part."""
        self.judged += len(pairs)
        if not pairs:
            return []
        await self.ready()
        parts = split(pairs, len(self._slots))
        judged = await asyncio.gather(*(self._judge_part(part) for part in parts))
        return [verdict for part in judged for verdict in part]

    async def _judge_part(self, pairs: list[tuple[Item, str]]) -> list[Verdict]:
        errors = self._ray.exceptions
        died: _Slot | None = None
        for _ in range(ATTEMPTS):
            slot = min(self._slots, key=lambda s: (s is died, s.busy))
            slot.busy += 1
            try:
                return list(await slot.actor.judge_many.remote(self._box, pairs))
            except JudgeRaised as exc:  # Ray's error is an instance of the judge's own
                raise exc.failure() from exc
            except (errors.RayActorError, errors.WorkerCrashedError, errors.NodeDiedError):
                died = slot
                log.warning(
                    "a Ray verifier worker died (or its node was lost) judging %d responses; "
                    "they are judged again",
                    len(pairs),
                )
            except errors.RayError as exc:
                raise VerifierError(f"Ray failed while judging: {exc}") from exc
            finally:
                slot.busy -= 1
        reason = f"Ray verifier worker died {ATTEMPTS} times on this batch"
        log.warning(reason)
        return [Verdict(0.0, None, reason) for _ in pairs]

    async def aclose(self) -> None:
        """Stops the actors, and the local Ray this pool started (never a cluster it joined)."""
        if self._starting is None or self._stopped is None:
            return
        self._closing.set()
        await asyncio.shield(asyncio.wrap_future(self._stopped))
        self._starting = self._stopped = None
        self._slots = []

    def _stop(self, slots: list[_Slot]) -> None:
        for slot in slots:
            with contextlib.suppress(Exception):
                self._ray.kill(slot.actor, no_restart=True)
        self._box = []
        if self._connected:
            self._connected = False
            self._ray.shutdown()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
