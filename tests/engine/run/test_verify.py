"""The verifier pool survives a worker process that dies, without a storm of restarts."""

from __future__ import annotations

import os
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes import FakeSuite, items

from ttc.engine import ConfigError, Item, Verdict, VerifierError
from ttc.engine.run._verify import VerifierPool


@dataclass
class DiesOnce(FakeSuite):
    """Kills its own worker process the first time it judges (a stand-in for an OOM kill)."""

    marker: str = ""

    def judge(self, item: Item, response: str) -> Verdict:
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)
        return super().judge(item, response)


async def test_a_dead_worker_is_replaced_once_and_every_batch_is_judged(tmp_path: Path) -> None:
    import asyncio

    pool_items = items(40)
    suite = DiesOnce(pool=pool_items, marker=str(tmp_path / "died"))
    pool = VerifierPool(suite, workers=2)
    pool.start()
    restarts = 0
    original = pool._restart

    def counting_restart() -> None:
        nonlocal restarts
        restarts += 1
        original()

    pool._restart = counting_restart  # type: ignore[method-assign]
    try:
        batches = [[(it, it.reference) for it in pool_items[i : i + 5]] for i in range(0, 40, 5)]
        results = await asyncio.gather(*(pool.judge_many(b) for b in batches))
    finally:
        await pool.aclose()
    verdicts = [v for batch in results for v in batch]
    assert len(verdicts) == 40
    assert all(v.score == 1.0 for v in verdicts)
    assert restarts == 1


class Buggy(FakeSuite):
    """A judge with a bug: it raises instead of scoring (module level: workers import it)."""

    def judge(self, item: Item, response: str) -> Verdict:
        if response == "boom":
            raise ZeroDivisionError("oops")
        return super().judge(item, response)


@pytest.mark.parametrize("workers", [0, 1])
async def test_a_judge_that_raises_is_an_error_naming_the_item_not_a_zero(workers: int) -> None:
    pool = VerifierPool(Buggy(pool=items(3)), workers=workers)
    pool.start()
    try:
        pairs = [(items(3)[0], "right:q0"), (items(3)[2], "boom")]
        with pytest.raises(
            VerifierError, match=r"raised ZeroDivisionError\('oops'\) on item q2"
        ) as e:
            await pool.judge_many(pairs)
        # The pool is still usable for responses its judge can read.
        [verdict] = await pool.judge_many(pairs[:1])
        assert verdict.score == 1.0
    finally:
        await pool.aclose()
    # The judge's traceback comes with the error, down to the suite's own line, even from a
    # verifier process.
    cause = str(e.value.__cause__)
    assert "in judge" in cause
    assert 'raise ZeroDivisionError("oops")' in cause


def test_a_suite_class_from_a_notebook_is_refused_before_any_process_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notebook = types.ModuleType("__main__")  # an interactive session's: it has no file
    monkeypatch.setitem(sys.modules, "__main__", notebook)

    class NotebookSuite(FakeSuite):
        pass

    NotebookSuite.__module__ = "__main__"
    pool = VerifierPool(NotebookSuite(), workers=2)
    with pytest.raises(ConfigError, match=r"interactive session.*verifier_workers=0"):
        pool.start()
    assert not pool.started
    # In-process judging needs no import, and works.
    assert VerifierPool(NotebookSuite(), workers=0).started


_KILLED_HOST = """
import asyncio
from fakes import FakeSuite, items
from ttc.engine.run._verify import VerifierPool

async def main():
    pool = VerifierPool(FakeSuite(pool=items(2)), workers=1)
    pool.start()
    await pool.ready()
    print("ready", *(w.process.pid for w in pool._pool._workers), flush=True)
    await asyncio.sleep(600)

if __name__ == "__main__":
    asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG and SIGKILL: Linux")
def test_a_host_killed_with_sigkill_leaves_no_worker_and_no_warning(tmp_path: Path) -> None:
    import signal
    import subprocess

    script = tmp_path / "host.py"
    script.write_text(_KILLED_HOST)
    tests = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), *sys.path])}
    host = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert host.stdout is not None
        said, *pids = host.stdout.readline().split()
        assert said == "ready"
        host.send_signal(signal.SIGKILL)
        # The tracker and the worker hold the host's stderr until they end: read it to its end.
        _, err = host.communicate(timeout=120)
    finally:
        host.kill()
    assert host.returncode == -signal.SIGKILL
    assert "leaked semaphore" not in err, err
    assert "Traceback" not in err, err
    for pid in map(int, pids):  # the kernel ended the worker with its parent
        for _ in range(600):
            if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"verifier worker {pid} outlived its killed host")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@dataclass(frozen=True)
class TaggedVerdict(Verdict):
    """A suite's own verdict class (module level: workers import it)."""

    tag: str = "mine"


@dataclass
class OwnClasses(FakeSuite):
    """Judges with its own verdict class, and reads the item's meta."""

    def judge(self, item: Item, response: str) -> Verdict:
        plain = super().judge(item, response)
        if item.meta.get("tagged"):
            return TaggedVerdict(plain.score, plain.answer, plain.detail, tag=item.meta["tagged"])
        return plain


async def test_items_and_verdicts_cross_to_the_workers_whole() -> None:
    pool_items = items(4)
    tagged = Item("q3", pool_items[3].question, pool_items[3].reference, {"tagged": "yes"})
    pool = VerifierPool(OwnClasses(pool=pool_items), workers=1)
    pool.start()
    try:
        pairs = [(it, it.reference) for it in pool_items[:3]] + [(tagged, "wrong")]
        verdicts = await pool.judge_many(pairs)
        in_process = VerifierPool(OwnClasses(pool=pool_items), workers=0)
        assert verdicts == await in_process.judge_many(pairs)
    finally:
        await pool.aclose()
    assert [type(v) for v in verdicts] == [Verdict, Verdict, Verdict, TaggedVerdict]
    assert isinstance(verdicts[3], TaggedVerdict)
    assert verdicts[3].tag == "yes"


async def test_a_set_that_breaks_while_it_starts_again_is_restarted_not_a_start_up_error() -> None:
    import signal

    pool_items = items(2)
    pool = VerifierPool(FakeSuite(pool=pool_items), workers=2)
    pool.start()
    try:
        await pool.ready()
        pool._restart()  # as after a worker died mid-run
        assert pool._pool is not None
        for w in pool._pool._workers:  # the new set dies before its set-up is done
            assert w.process.pid is not None
            os.kill(w.process.pid, signal.SIGKILL)
        # Not "exited while starting ... put the code under __main__": that is said only of
        # the first set; this batch is judged by a set started again.
        [verdict] = await pool.judge_many([(pool_items[0], pool_items[0].reference)])
    finally:
        await pool.aclose()
    assert verdict.score == 1.0
