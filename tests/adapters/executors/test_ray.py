"""Verification on Ray (`--executor ray`): the verdicts of the local process pool, the code
sandbox and `signal.alarm` holding inside Ray workers, a worker killed mid-batch losing no verdict,
and Ray's absence refused in one line.

One local Ray serves the module (its start costs seconds): a pool of two actors judging
`ProbeSuite` (tests/ray_probe.py), which also judges LiveCodeBench programs on the fixture's tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from ray_probe import PREPARED, NoSandboxSuite, ProbeSuite

from ttc.adapters.executors import INSTALL, RayVerifierPool
from ttc.adapters.executors._ray import ATTEMPTS, split
from ttc.adapters.sandbox import protections
from ttc.adapters.suites._lcb_records import TestCase
from ttc.engine import ConfigError, Item, Verdict, VerifierError
from ttc.engine.cli import main
from ttc.engine.run import VerifierPool

TESTS = Path(__file__).resolve().parents[2]
FIXTURE = TESTS / "data" / "lcb_fixture.jsonl"
RECORDS = [json.loads(line) for line in FIXTURE.read_text().splitlines()]


class Pool:
    """The module's Ray pool, and what it logged while its workers started."""

    def __init__(self, pool: RayVerifierPool, logged: list[str]) -> None:
        self.pool = pool
        self.logged = logged


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ray_pool() -> AsyncIterator[Pool]:
    """A local Ray of 3 CPUs started here (a pool uses a Ray its host started as it is), and a
    pool of 2 workers on it; the third CPU is for a pool that cannot start."""
    import ray

    # Ray's workers import ray_probe (and fakes) from this folder: they inherit the environment
    # of the Ray started here. Ray's SIGTERM handler is pytest's business, put back after.
    with pytest.MonkeyPatch.context() as mp:
        path = os.environ.get("PYTHONPATH")
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), path])))
        sigterm = signal.getsignal(signal.SIGTERM)
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
        signal.signal(signal.SIGTERM, sigterm)
    logged: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("ttc").addHandler(handler)
    pool = RayVerifierPool(ProbeSuite(), 2)
    try:
        pool.start()
        await pool.ready()
    finally:
        logging.getLogger("ttc").removeHandler(handler)
    try:
        yield Pool(pool, logged)
    finally:
        await pool.aclose()
        assert ray.is_initialized()  # a Ray the pool did not start, it leaves running
        ray.shutdown()


@pytest.fixture(scope="module")
def lcb() -> dict[str, Item]:
    return {item.id: item for item in ProbeSuite().lcb.items()}


def probe(n: int) -> list[Item]:
    return [Item(f"q{i}", f"question {i}", str(i % 2)) for i in range(n)]


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


async def on_both(pairs: list[tuple[Item, str]], ray: RayVerifierPool) -> list[Verdict]:
    """The verdicts of the Ray pool, checked equal to the local process pool's."""
    local = VerifierPool(ProbeSuite(), 2)
    local.start()
    try:
        expected = await local.judge_many(pairs)
    finally:
        await local.aclose()
    verdicts = await ray.judge_many(pairs)
    assert verdicts == expected
    return verdicts


@pytest.mark.parametrize(("n", "workers", "sizes"), [(3, 2, [3]), (16, 2, [8, 8]), (17, 4, [9, 8])])
def test_large_batches_are_split_across_workers(n: int, workers: int, sizes: list[int]) -> None:
    pairs = [(item, "") for item in probe(n)]
    parts = split(pairs, workers)
    assert [len(p) for p in parts] == sizes
    assert [pair for part in parts for pair in part] == pairs


def test_without_ray_the_pool_and_the_flag_are_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"Ray is not installed: pip install 'ttc\[ray\]'"):
        RayVerifierPool(ProbeSuite(), 2)
    code = main(["run", "--executor", "ray", "--limit", "4", "--out", str(tmp_path / "run")])
    assert code == 2
    assert (
        capsys.readouterr().err == f"ttc: error: --executor ray: Ray is not installed: {INSTALL}\n"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--ray-address", "127.0.0.1:6379"], "--ray-address: only with --executor ray"),
        (["--executor", "ray", "--workers", "0"], "--executor ray: --workers 0 verifies in ttc's"),
    ],
)
def test_bad_executor_flags_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    assert main(["run", "--limit", "4", "--out", str(tmp_path / "run"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ttc: error: {error}"), err
    assert err.count("\n") == 1, err


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_workers_judge_in_their_main_thread_with_the_hosts_sandbox(ray_pool: Pool) -> None:
    item = probe(1)[0]
    where, alarm, timeouts = await ray_pool.pool.judge_many(
        [(item, "where"), (item, "alarm"), (item, "timeouts")]
    )
    found = json.loads(str(where.answer))
    assert found["pid"] != os.getpid()
    assert found["main_thread"] is True
    # The same layers as in this process: namespaces, private root, seccomp, cgroup, uid.
    assert found["protections"] == json.loads(json.dumps(protections()))
    assert alarm.answer == "alarm fired"  # math-verify's signal.alarm timeouts hold
    assert timeouts.answer == "True"
    # What the suite logged while the workers prepared it reached the host, once.
    assert [line for line in ray_pool.logged if PREPARED in line] == [
        f"Ray verifier worker on {socket.gethostname()}: {PREPARED}"
    ]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_verdicts_equal_the_process_pools(ray_pool: Pool, lcb: dict[str, Item]) -> None:
    pairs = [(lcb[r["question_id"]], fenced(r["reference_solution"])) for r in RECORDS]
    pairs += [
        (lcb["lcb_sum_pairs"], fenced("print(0)")),
        (lcb["lcb_mean"], fenced("print(int(input()))")),
        (lcb["lcb_sum_pairs"], fenced("x = bytearray(64 * 1024**3)")),
    ]
    pairs += [(item, item.reference if i % 3 else "wrong") for i, item in enumerate(probe(20))]
    verdicts = await on_both(pairs, ray_pool.pool)
    assert [v.score for v in verdicts[: len(RECORDS)]] == [1.0] * len(RECORDS)
    assert [v.score for v in verdicts[len(RECORDS) : len(RECORDS) + 3]] == [0.0] * 3
    assert "memory limit exceeded" in verdicts[len(RECORDS) + 2].detail


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """A world-readable file of the host, outside the sandbox's root."""
    tmp_path.chmod(0o755)
    path = tmp_path / "host_secret.txt"
    path.write_text("the host's secret\n")
    path.chmod(0o644)
    return path


def escapes(port: int, marker: Path, target: str) -> str:
    """A program that tries to leave the sandbox each way, printing what happened to each."""
    return (
        "import os, socket\n"
        "def attempt(f):\n"
        "    try:\n"
        "        f()\n"
        "        print('ESCAPED')\n"
        "    except BaseException:\n"
        "        print('blocked')\n"
        f"attempt(lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2).close())\n"
        f"attempt(lambda: open({str(marker)!r}).read())\n"
        f"attempt(lambda: open({target!r}, 'w').write('x'))\n"
        "attempt(lambda: os.execv('/bin/sh', ['sh', '-c', 'echo escaped']))\n"
        "forked = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os._exit(0)\n"
        "        forked += 1\n"
        "    except BaseException:\n"
        "        pass\n"
        "print('forked', forked)\n"
    )


def exists(path: str) -> bool:
    return Path(path).exists()


def no_connection(srv: socket.socket) -> bool:
    try:
        srv.accept()[0].close()
    except BlockingIOError:
        return True
    return False


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_hostile_programs_stay_in_the_sandbox_inside_ray_workers(
    ray_pool: Pool, tcp_listener: socket.socket, marker: Path, tmp_path: Path
) -> None:
    port = tcp_listener.getsockname()[1]
    target = str(tmp_path / "written_by_the_program")
    program = escapes(port, marker, target)
    expected = "blocked\nblocked\nblocked\nblocked\nforked 0\n"
    # As a LiveCodeBench answer (the audit guard on), and with the kernel's layers alone.
    item = Item(
        "escape",
        "escape",
        "",
        {"testtype": "stdin", "func_name": None, "starter_code": "",
         "tests": (TestCase("", expected, "stdin", True),)},
    )  # fmt: skip
    guarded, kernel = await ray_pool.pool.judge_many(
        [(item, fenced(program)), (item, f"kernel:{program}")]
    )
    assert guarded.score == 1.0, guarded.detail
    if protections()["seccomp"] and protections()["namespaces"]:
        assert kernel.answer == expected, kernel.detail
    assert no_connection(tcp_listener)
    assert not exists(target)


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_worker_killed_mid_batch_loses_no_verdict(
    ray_pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    pool, items = ray_pool.pool, probe(24)
    (pid,) = await pool.judge_many([(items[0], "where")])
    victim = json.loads(str(pid.answer))["pid"]
    batch = asyncio.create_task(pool.judge_many([(item, "slow:0.25") for item in items]))
    await asyncio.sleep(1.0)  # both workers are half-way through their 12 responses
    os.kill(victim, signal.SIGKILL)
    with caplog.at_level(logging.WARNING, logger="ttc"):
        verdicts = await batch
    assert [v.score for v in verdicts] == [float(i % 2) for i in range(24)]
    assert "a Ray verifier worker died" in caplog.text
    # The pool goes on: its workers (one restarted) judge the next batch.
    assert [v.score for v in await pool.judge_many([(items[1], "1"), (items[2], "1")])] == [1, 0]


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_batch_that_kills_every_worker_scores_zero_with_the_reason(ray_pool: Pool) -> None:
    (verdict,) = await ray_pool.pool.judge_many([(probe(1)[0], "die")])
    assert verdict == Verdict(0.0, None, f"Ray verifier worker died {ATTEMPTS} times on this batch")


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_judge_that_raises_is_an_error_naming_the_item(ray_pool: Pool) -> None:
    with pytest.raises(VerifierError, match=r"raised ValueError.* on item q0"):
        await ray_pool.pool.judge_many([(probe(1)[0], "raise")])


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_worker_without_a_sandbox_stops_the_run_naming_why(ray_pool: Pool) -> None:
    pool = RayVerifierPool(NoSandboxSuite(), 1)
    pool.start()
    try:
        with pytest.raises(
            VerifierError, match=r"set the suite up .*: SandboxUnavailable: sandbox"
        ):
            await pool.judge_many([(probe(1)[0], "0")])
    finally:
        await pool.aclose()
