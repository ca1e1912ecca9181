"""Per-run logging: each run's run.log gets its own run's lines, and the host's logging is left as
the host set it.

The engine logs on the `ttc` logger (a few modules on `ttc.*` children). A run's lines are the
records logged on its behalf: by its own task, the tasks it starts and the threads it starts with
`asyncio.to_thread`, which all copy the run's context; a context variable names the run there
(`run_scope`, and `run_logging`, which opens run.log inside it).

While some run has a run.log open, the `ttc` logger is lowered to INFO (only if the host had it
higher), or the run's INFO lines would not exist at all; a gate on `ttc` and on every `ttc.*`
logger writes each record to the run.log of the run it was logged for, and lets it on to the
host's handlers only if the host's own level would have (the level the host gave `ttc`, or the one
it inherits). A `ttc.*` logger made while a run.log is open is gated as it is made, before its
first record (a logger filter does not see the records its children pass up, so an ungated child
would hand the host its INFO lines). When the last run.log closes, the gates go and the level is
put back: the `ttc` logger's level, handlers and filters are as they were, and its children's
too, and the logging manager makes loggers as before. A `ttc.*` logger the host set a level of
its own keeps it (its records below that level are not made at all).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttc.engine.journal._rundir import RunDir

_NAME = "ttc"
# The lowest level a run.log asks for: the run's INFO lines (more if the host asked for more).
_RUN_LEVEL = logging.INFO


class RunLogs:
    """The run.log handlers of one run (records logged in its context go to them)."""

    def __init__(self) -> None:
        # Replaced whole, never changed in place: threads read it while a run attaches.
        self.handlers: tuple[logging.Handler, ...] = ()
        self.ended = False

    def write(self, record: logging.LogRecord) -> None:
        for handler in self.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


_RUN: ContextVar[RunLogs | None] = ContextVar("ttc_run_logs", default=None)


class _Gate(logging.Filter):
    """On one `ttc` logger while run.logs are open: a record goes to its run's run.log, and on to
    the host's handlers only if the host's level lets it."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        logs = _RUN.get()
        if logs is not None:
            logs.write(record)
        _gates.cover_new()
        return record.levelno >= _gates.host_level(self.logger)


class _Gates:
    """The gates, and the `ttc` level the host had, while any run.log is open."""

    def __init__(self) -> None:
        # The logging module's own (reentrant) lock: the manager holds it while it makes a logger
        # (so does `logging.config` while it configures), and `attach` and `detach` set levels and
        # make loggers while holding this one. One lock for both, so no two threads can take
        # them in opposite orders.
        self.lock: threading.RLock = logging._lock  # type: ignore[attr-defined]
        self.owners: dict[logging.Handler, RunLogs] = {}
        self.saved = logging.NOTSET
        self.lowered = False
        self.gates: dict[str, _Gate] = {}
        self.known = 0  # how many loggers there were when they were last looked over
        self._made: object = None  # the manager's getLogger while it is watched
        self._shadowed: object = None  # the one it shadows, if a host had one on the instance

    def attach(self, handler: logging.Handler, logs: RunLogs) -> None:
        with self.lock:
            if not self.owners:
                logger = logging.getLogger(_NAME)
                self.saved = logger.level
                self.lowered = logger.getEffectiveLevel() > _RUN_LEVEL
                if self.lowered:
                    logger.setLevel(_RUN_LEVEL)
                self._watch()
            self.owners[handler] = logs
            logs.handlers = (*logs.handlers, handler)
            self._cover()

    def detach(self, handler: logging.Handler) -> None:
        with self.lock:
            logs = self.owners.pop(handler, None)
            if logs is None:
                return
            logs.handlers = tuple(h for h in logs.handlers if h is not handler)
            if self.owners:
                return
            self._unwatch()
            for gate in self.gates.values():
                gate.logger.removeFilter(gate)
            self.gates.clear()
            logger = logging.getLogger(_NAME)
            # Unless the host set a level of its own meanwhile.
            if self.lowered and logger.level == _RUN_LEVEL:
                logger.setLevel(self.saved)
            self.lowered = False

    def host_level(self, logger: logging.Logger) -> int:
        """The level `logger` would have in effect had no run lowered `ttc`."""
        current: logging.Logger | None = logger
        while current is not None:
            level = current.level
            if current.name == _NAME and self.lowered and level == _RUN_LEVEL:
                level = self.saved
            if level:
                return level
            current = current.parent
        return logging.NOTSET

    def cover_new(self) -> None:
        """Gates the `ttc.*` loggers made since the last look (a module imported mid-run)."""
        if len(logging.Logger.manager.loggerDict) != self.known:
            with self.lock:
                if self.owners:
                    self._cover()

    def _cover(self) -> None:
        loggers = list(logging.Logger.manager.loggerDict.items())
        self.known = len(loggers)
        for name, logger in loggers:
            self._gate(name, logger)

    def _gate(self, name: str, logger: object) -> None:
        ours = name == _NAME or name.startswith(_NAME + ".")
        if ours and isinstance(logger, logging.Logger) and name not in self.gates:
            gate = _Gate(logger)
            logger.addFilter(gate)
            self.gates[name] = gate

    def _watch(self) -> None:
        """Until `_unwatch`: every logger the manager makes is gated as it is made, if it is
        ours (the manager's own method, shadowed on the instance, then put back)."""
        manager = logging.Logger.manager
        make = manager.getLogger
        self._shadowed = manager.__dict__.get("getLogger")

        def get_logger(name: str) -> logging.Logger:
            logger = make(name)
            if name.startswith(_NAME) and name not in self.gates:
                with self.lock:
                    if self.owners:  # (the last run.log may have closed meanwhile)
                        self._gate(name, logger)
            return logger

        manager.getLogger = get_logger  # type: ignore[method-assign]
        self._made = get_logger

    def _unwatch(self) -> None:
        manager = logging.Logger.manager
        if manager.__dict__.get("getLogger") is self._made:  # unless someone else's is on top
            if self._shadowed is None:
                del manager.getLogger
            else:
                manager.__dict__["getLogger"] = self._shadowed
        self._made = self._shadowed = None


_gates = _Gates()


def attach(handler: logging.Handler) -> None:
    """Sends the records logged in this context (the run's) to `handler` until `detach`. Outside
    `run_scope`, this context becomes a run's of its own."""
    logs = _RUN.get()
    if logs is None or logs.ended:
        logs = RunLogs()
        _RUN.set(logs)
    _gates.attach(handler, logs)


def detach(handler: logging.Handler) -> None:
    """`handler` gets no more records; after the last one, the host's logging is as it was."""
    _gates.detach(handler)


@contextlib.contextmanager
def run_scope() -> Iterator[RunLogs]:
    """Names a run in this context for its whole body: the tasks and `to_thread` threads started
    inside copy it, so their records go to the run's run.log once `run_logging` opens it."""
    logs = RunLogs()
    token = _RUN.set(logs)
    try:
        yield logs
    finally:
        logs.ended = True
        # Left in another context (a generator closed elsewhere): that one keeps an ended run,
        # which writes nowhere.
        with contextlib.suppress(ValueError):
            _RUN.reset(token)


@contextlib.contextmanager
def run_logging(rundir: RunDir) -> Iterator[logging.Handler]:
    """The run's run.log, open for the body: gets the records logged on behalf of the run in
    this context (the `run_scope` it is in, else one for the body)."""
    with contextlib.ExitStack() as stack:
        current = _RUN.get()
        if current is None or current.ended:
            stack.enter_context(run_scope())
        handler = rundir.attach_log()
        stack.callback(rundir.detach_log, handler)
        yield handler


def to_run_log(level: int, message: str, exc: BaseException) -> None:
    """Writes `message` with `exc`'s traceback to this run's run.log only: for an error the run
    raises to its host, who sees the traceback with the exception (a library that also logs what
    it raises prints it twice)."""
    logs = _RUN.get()
    if logs is None or logs.ended:
        return
    exc_info = (type(exc), exc, exc.__traceback__)
    record = logging.getLogger(_NAME).makeRecord(_NAME, level, __file__, 0, message, (), exc_info)
    logs.write(record)
