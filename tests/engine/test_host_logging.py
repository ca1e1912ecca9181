"""The engine in a host's loop: each run's run.log holds its own run's lines only, and the host's
logging stays as the host set it (the `ttc` logger's level, handlers and filters; what the host's
own handlers see)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ttc.adapters import ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import (
    Engine,
    EngineOptions,
    Event,
    RunConfig,
    RunObserver,
    RunState,
    StopReason,
    Usage,
)
from ttc.engine.journal import _logs
from ttc.retrieval import LexicalEmbedder

# A logger under `ttc` of the kind a module makes with getLogger(__name__).
CHILD = "ttc.host_test_child"


class Tagger(RunObserver):
    """Logs lines naming its run from everywhere code runs on the run's behalf: the hooks (called
    from the run's tasks), a task of its own, a thread (`asyncio.to_thread`), a `ttc.*` logger."""

    def __init__(self, tag: str, order: list[str]) -> None:
        self.tag = tag
        self.order = order
        self.ticker: asyncio.Task[None] | None = None
        self.events = 0

    def run_started(self, state: RunState, rounds: int, cost: object) -> None:
        self.ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            logging.getLogger("ttc").info("%s from its task", self.tag)
            await asyncio.sleep(0.001)

    def event(self, event: Event) -> None:
        self.order.append(self.tag)
        self.events += 1
        if self.events % 7 == 0:
            logging.getLogger(CHILD).info("%s from a ttc.* logger", self.tag)

    async def run_ended(self, stopped: StopReason | None) -> None:
        assert self.ticker is not None
        self.ticker.cancel()
        await asyncio.to_thread(logging.getLogger("ttc").info, "%s from a thread", self.tag)
        logging.getLogger("ttc").warning("%s warns once", self.tag)


async def run_tagged(out: Path, tag: str, order: list[str], rounds: int = 3) -> Usage:
    suite = ReasoningGymSuite(per_task=2)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=3, latency_s=0.002))
    config = RunConfig(method="adpt", rounds=rounds, verifier_workers=0)
    options = EngineOptions(observer=Tagger(tag, order))
    engine = Engine(
        provider, suite, config, embedder=LexicalEmbedder(), out_dir=out, options=options
    )
    async with engine:
        result = await engine.run(items)
    return result.usage


@pytest.fixture
def host_logging() -> Iterator[None]:
    """Whatever a test does to the `ttc` logger and root's handlers is undone after it."""
    ttc, root = logging.getLogger("ttc"), logging.getLogger()
    kept = (ttc.level, list(ttc.handlers), list(ttc.filters), list(root.handlers), root.level)
    maker = logging.Logger.manager.__dict__.get("getLogger")
    yield
    ttc.setLevel(kept[0])
    ttc.handlers[:], ttc.filters[:], root.handlers[:] = kept[1], kept[2], kept[3]
    root.setLevel(kept[4])
    if logging.Logger.manager.__dict__.get("getLogger") is not maker:  # a test's left-over
        logging.Logger.manager.__dict__.pop("getLogger", None)
        if maker is not None:
            logging.Logger.manager.__dict__["getLogger"] = maker


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.usefixtures("host_logging")
async def test_two_engines_at_once_in_one_loop_each_log_only_their_own_run(
    tmp_path: Path,
) -> None:
    order: list[str] = []
    await asyncio.gather(
        run_tagged(tmp_path / "a", "run-A", order, rounds=3),
        run_tagged(tmp_path / "b", "run-B", order, rounds=2),
    )
    # The two runs did overlap: their events interleave.
    switches = sum(x != y for x, y in itertools.pairwise(order))
    assert switches >= 3
    for mine, theirs, rounds in (("a", "run-B", 3), ("b", "run-A", 2)):
        log = (tmp_path / mine / "run.log").read_text()
        tag = "run-A" if mine == "a" else "run-B"
        assert theirs not in log
        for where in ("its task", "a thread", "a ttc.* logger"):
            assert f"{tag} from {where}" in log
        assert log.count(f"{tag} warns once") == 1
        assert log.count(" INFO round ") == rounds


@pytest.mark.parametrize("level", [logging.NOTSET, logging.WARNING, logging.DEBUG, logging.ERROR])
@pytest.mark.usefixtures("host_logging")
async def test_a_run_leaves_the_hosts_ttc_logger_as_it_was(tmp_path: Path, level: int) -> None:
    ttc = logging.getLogger("ttc")
    ttc.setLevel(level)
    ttc.addHandler(mine := Collect())
    ttc.addFilter(kept := logging.Filter("ttc"))
    child = logging.getLogger(CHILD)
    before = (ttc.level, list(ttc.handlers), list(ttc.filters), list(child.filters))
    await run_tagged(tmp_path / "run", "run-A", [], rounds=2)
    assert (ttc.level, ttc.handlers, ttc.filters, child.filters) == before
    assert ttc.handlers[-1] is mine
    assert ttc.filters[-1] is kept
    assert "INFO round 2/2" in (tmp_path / "run" / "run.log").read_text()


@pytest.mark.usefixtures("host_logging")
async def test_with_ttc_at_warning_the_hosts_handlers_see_no_info_line_of_a_run(
    tmp_path: Path,
) -> None:
    logging.getLogger("ttc").setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(console := Collect())
    await run_tagged(tmp_path / "run", "run-A", [], rounds=2)
    ours = [r for r in console.records if r.name.startswith("ttc")]
    # Exactly what the host would have seen without run.log: the run's one warning.
    assert [(r.levelname, r.getMessage()) for r in ours] == [("WARNING", "run-A warns once")]
    log = (tmp_path / "run" / "run.log").read_text()
    assert " INFO round 1/2" in log
    assert " INFO run-A from a thread" in log
    assert " WARNING run-A warns once" in log


class FreshLogger(RunObserver):
    """Makes a `ttc.*` logger no one has made before, mid-run, and logs on it at once (as a
    module imported mid-run may): its first line included, the run's gate must cover it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.logged = False

    def event(self, event: Event) -> None:
        if not self.logged:
            self.logged = True
            logging.getLogger(self.name).info("from a logger made mid-run")


async def hosts_view_of_a_fresh_logger(out: Path, name: str) -> list[str]:
    """A one-round run whose observer makes logger `name` and logs on it at once, with the host
    at WARNING: what the host's handler on root saw from that logger."""
    logging.getLogger("ttc").setLevel(logging.WARNING)
    logging.getLogger().addHandler(console := Collect())
    suite = ReasoningGymSuite(per_task=1)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=3, latency_s=0.001))
    config = RunConfig(method="unif", rounds=1, verifier_workers=0)
    options = EngineOptions(observer=(fresh := FreshLogger(name)))
    async with Engine(provider, suite, config, out_dir=out, options=options) as run:
        await run.run(items)
    assert fresh.logged
    return [r.getMessage() for r in console.records if r.name == name]


@pytest.mark.usefixtures("host_logging")
async def test_a_ttc_logger_made_mid_run_is_gated_from_its_first_line(tmp_path: Path) -> None:
    name = f"ttc.host_test_fresh_{tmp_path.name}"
    assert name not in logging.Logger.manager.loggerDict
    assert await hosts_view_of_a_fresh_logger(tmp_path / "run", name) == []
    assert "INFO from a logger made mid-run" in (tmp_path / "run" / "run.log").read_text()
    # Once the run is over, the manager makes loggers as it did.
    assert "getLogger" not in logging.Logger.manager.__dict__


@pytest.mark.usefixtures("host_logging")
async def test_with_ttc_at_info_the_hosts_handlers_see_every_line_of_both_runs(
    tmp_path: Path,
) -> None:
    # What the command line does (ttc at INFO, a console handler on root): it sees everything.
    logging.getLogger("ttc").setLevel(logging.INFO)
    logging.getLogger().addHandler(console := Collect())
    await asyncio.gather(
        run_tagged(tmp_path / "a", "run-A", [], rounds=2),
        run_tagged(tmp_path / "b", "run-B", [], rounds=2),
    )
    seen = [r.getMessage() for r in console.records if r.name.startswith("ttc")]
    assert sum(m.startswith("round 2/2") for m in seen) == 2
    assert {"run-A from a thread", "run-B from a thread"} <= set(seen)


@pytest.mark.usefixtures("host_logging")
async def test_a_hosts_own_logger_maker_is_kept_through_a_run(tmp_path: Path) -> None:
    manager = logging.Logger.manager
    made: list[str] = []
    plain = manager.getLogger

    def hosts(name: str) -> logging.Logger:
        made.append(name)
        return plain(name)

    manager.getLogger = hosts  # type: ignore[method-assign]
    try:
        name = f"ttc.host_test_kept_{tmp_path.name}"
        assert await hosts_view_of_a_fresh_logger(tmp_path / "run", name) == []
        assert name in made  # the host's maker made it, through the run's gate
        assert manager.__dict__["getLogger"] is hosts
    finally:
        del manager.getLogger


@pytest.mark.usefixtures("host_logging")
def test_a_logger_made_under_loggings_lock_as_the_last_run_log_closes_does_not_hang() -> None:
    # As `logging.config.dictConfig` does on a host's thread: logging's lock held, a logger made,
    # here through a maker of the host's that takes its time, while the last run.log closes.
    manager = logging.Logger.manager
    plain = manager.getLogger
    name = f"ttc.host_test_configured_{id(manager)}_{time.monotonic_ns()}"
    inside = threading.Event()

    def hosts(wanted: str) -> logging.Logger:
        if wanted == name:
            inside.set()
            time.sleep(0.2)  # meanwhile the other thread closes the last run.log
        return plain(wanted)

    manager.getLogger = hosts  # type: ignore[method-assign,assignment]
    logging.getLogger("ttc").setLevel(logging.WARNING)  # so closing puts a level back
    handler = logging.NullHandler()
    _logs.attach(handler)  # the run's maker goes on top of the host's

    def configure() -> None:
        with logging._lock:  # type: ignore[attr-defined]
            logging.getLogger(name)

    host = threading.Thread(target=configure, daemon=True)
    host.start()
    assert inside.wait(10)
    closer = threading.Thread(target=_logs.detach, args=(handler,), daemon=True)
    closer.start()
    host.join(10)
    closer.join(10)
    assert not host.is_alive()
    assert not closer.is_alive()
    assert manager.__dict__["getLogger"] is hosts  # the host's maker, as it was
