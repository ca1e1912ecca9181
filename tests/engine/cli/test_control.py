"""`ttc ctl DIR status|pause|resume|set`: the control socket (owner-only, reached however long its
path), pause holding new requests while those in flight finish, new limits in force at once,
journaled (the timeline marks them) and replayed by a resumed run."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSuite, ScriptedProvider, Step, items

from ttc.engine import ConfigError, Engine, Limiter, RunConfig
from ttc.engine.cli._control import (
    BatchSteering,
    Controller,
    ask,
    control_served,
    socket_path,
    status_text,
)
from ttc.engine.journal import LimitsSteered
from ttc.engine.journal._events import replay_steered, steer
from ttc.engine.journal._journal import steered_in
from ttc.engine.report._timeline import read_timeline, timeline
from ttc.engine.run._observer import RunObserver


def _controller(limiter: Limiter, applied: list[LimitsSteered]) -> Controller:
    def apply(change: LimitsSteered) -> None:
        steer(limiter, change)
        applied.append(change)

    return Controller(limiter, apply, lambda: {"done": 3, "total": 10, "per_minute": 12.0})


async def _ask(path: Path, **request: Any) -> dict[str, Any]:
    return await asyncio.to_thread(ask, path, request)


async def test_status_set_pause_and_resume_over_a_long_path(tmp_path: Path) -> None:
    # Far past the ~107 bytes a unix socket's address may hold.
    run = tmp_path / ("d" * 60) / ("e" * 60)
    run.mkdir(parents=True)
    path = socket_path(run)
    assert len(os.fsencode(path)) > 120
    limiter, applied = Limiter(rpm=600, max_concurrency=8), list[LimitsSteered]()
    async with control_served(path, _controller(limiter, applied)) as served:
        assert served == path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        status = (await _ask(path, action="status"))["status"]
        assert (status["rpm"], status["concurrency"], status["paused"]) == (600, 8, False)
        assert (status["done"], status["total"]) == (3, 10)
        answer = await _ask(path, action="set", rpm=1200, concurrency=3)
        assert answer["ok"]
        assert (limiter.rpm, limiter.max_concurrency, limiter.concurrency_cap) == (1200, 3, 3)
        assert (await _ask(path, action="pause"))["status"]["paused"]
        assert limiter.paused
        assert not (await _ask(path, action="resume"))["status"]["paused"]
        refused = await _ask(path, action="set", rpm=-5)
        assert not refused["ok"]
        assert limiter.rpm == 1200
        assert not (await _ask(path, action="set"))["ok"]  # nothing to set
        assert not (await _ask(path, action="jump"))["ok"]
    assert not path.exists()  # removed with the server
    assert [c.describe() for c in applied] == ["set rpm 1200 concurrency 3", "pause", "resume"]
    assert "running" in status_text(run, status)


async def test_pause_holds_new_requests_and_lets_those_in_flight_finish() -> None:
    limiter = Limiter(max_concurrency=4)
    async with limiter.slot():  # in flight when the pause comes
        limiter.pause()
        waiting = asyncio.create_task(limiter.slot().__aenter__())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()  # held at the gate
        assert limiter.in_flight == 1  # the one in flight goes on
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()  # still paused after the other finished
    limiter.unpause()
    await asyncio.wait_for(waiting, 10)
    assert limiter.in_flight == 1


async def test_a_socket_that_is_not_owner_only_is_not_used(tmp_path: Path) -> None:
    path = socket_path(tmp_path)
    async with control_served(path, _controller(Limiter(), [])):
        path.chmod(0o666)
        with pytest.raises(ConfigError, match="owner-only"):
            await _ask(path, action="status")
    with pytest.raises(ConfigError, match="is the run going"):
        await _ask(path, action="status")


async def test_no_socket_in_a_directory_others_may_write_in(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)
    async with control_served(socket_path(tmp_path), _controller(Limiter(), [])) as served:
        assert served is None
    os.chmod(tmp_path, 0o700)


async def test_a_batch_journals_its_changes_and_a_resumed_batch_replays_the_sets() -> None:
    journal: list[LimitsSteered] = []

    class Appends:
        def append(self, event: LimitsSteered) -> int:
            journal.append(event)
            return 0

    steering = BatchSteering(Limiter(rpm=100))
    steering.opened(Appends())
    steering.apply(LimitsSteered("set", rpm=300))
    steering.apply(LimitsSteered("pause"))
    steering.apply(LimitsSteered("set", concurrency=5))
    assert len(journal) == 3
    resumed = Limiter(rpm=100)
    BatchSteering(resumed).opened(None, journal)
    assert (resumed.rpm, resumed.max_concurrency, resumed.paused) == (300, 5, False)
    assert replay_steered(Limiter(), [LimitsSteered("pause")]) is None


class _SteerOnce(RunObserver):
    """Sets new limits through the engine when the first sample lands."""

    def __init__(self) -> None:
        self.engine: Engine | None = None

    def event(self, event: object) -> None:
        if self.engine is not None and type(event).__name__ == "SampleLanded":
            engine, self.engine = self.engine, None
            engine.steer(LimitsSteered("set", rpm=6000, concurrency=3))


async def test_a_change_is_journaled_drawn_and_replayed_on_resume(tmp_path: Path) -> None:
    from ttc.engine import EngineOptions

    out = tmp_path / "run"
    script: dict[str, list[Step]] = {f"q{i}": [f"right:q{i}"] for i in range(6)}
    observer = _SteerOnce()
    cfg = RunConfig(method="unif", rounds=1, verifier_workers=0, rpm=60000, concurrency=8)
    engine = Engine(
        ScriptedProvider(script),
        FakeSuite(pool=items(6)),
        cfg,
        out_dir=out,
        options=EngineOptions(observer=observer),
    )
    observer.engine = engine
    async with engine:
        await engine.run()
    assert engine.limiter.rpm == 6000
    assert steered_in(out / "journal.jsonl") == [LimitsSteered("set", 6000.0, None, 3)]
    tl = read_timeline(out)
    assert [what for _, what in tl.steered] == ["set rpm 6000 concurrency 3"]
    pytest.importorskip("matplotlib")
    assert "timeline" in timeline(out, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
    # Resumed: its limiter starts as `ttc ctl set` left it, not as the config says.
    again = Engine(
        ScriptedProvider(script), FakeSuite(pool=items(6)), cfg, out_dir=out, resume=True
    )
    async with again:
        await again.run()
    assert (again.limiter.rpm, again.limiter.max_concurrency) == (6000, 3)


async def test_requests_already_waiting_go_by_the_new_rates() -> None:
    # 0.6 RPM: the second request would wait 100 s; set anew, it goes at once.
    limiter = Limiter(rpm=0.6, tpm=6.0, max_concurrency=4)
    async with limiter.slot(est_tokens=1):
        pass
    waiting = asyncio.create_task(limiter.slot(est_tokens=1).__aenter__())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    limiter.retune(rpm=60000, tpm=6_000_000)
    await asyncio.wait_for(waiting, 30)
    assert (limiter.rpm, limiter.tpm) == (60000, 6_000_000)


async def test_a_socket_left_by_a_killed_process_is_replaced_and_a_live_one_kept(
    tmp_path: Path,
) -> None:
    import socket

    path = socket_path(tmp_path)
    with socket.socket(socket.AF_UNIX) as dead:  # bound, never listening: its process is gone
        dead.bind(str(path))
    async with control_served(path, _controller(Limiter(rpm=60), [])) as served:
        assert served == path
        assert (await _ask(path, action="status"))["ok"]
        async with control_served(path, _controller(Limiter(rpm=1), [])) as second:
            assert second is None  # another process serves it: left alone
        assert (await _ask(path, action="status"))["status"]["rpm"] == 60


async def test_a_concurrency_above_the_runs_own_is_refused_whole() -> None:
    limiter = Limiter(rpm=600, max_concurrency=8)
    with pytest.raises(ConfigError, match="at most the 8 the run started with"):
        limiter.retune(rpm=1200, concurrency=16)
    assert (limiter.rpm, limiter.max_concurrency) == (600, 8)  # nothing half applied
    limiter.retune(concurrency=4)
    limiter.retune(concurrency=8)  # back up to where it started
    assert limiter.max_concurrency == 8
    # A resume started for fewer places than a `set` left keeps to its own.
    resumed = Limiter(rpm=600, max_concurrency=2)
    assert replay_steered(resumed, [LimitsSteered("set", concurrency=6)]) is not None
    assert resumed.max_concurrency == 2
