"""Two and four `ttc batch` processes on one 1,200 RPM quota shared through a redis-server of
their own, against one `ttc serve` enforcing 1,200 RPM: together they stay inside the limit (no
more than 1% refused; the rate the server saw never above it), reach most of it, and no request
is served twice. The 60 s figures are `benchmarks/quota_saturation.py --clients N`'s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
from _serving import RedisProcess, ServeProcess
from fakes import needs_redis_server
from quota_saturation import KEY_ENV, batch_input

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared_quota")]

RPM = 1200
REQUESTS = 240  # 12 s at the limit: four windows of the server's 3 s


def _batch(url: str, redis: str, inp: Path, out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ttc.engine.cli", "batch", str(inp), "--out", str(out)]
    command += ["--base-url", url + "/v1", "--api-key-env", KEY_ENV, "--quiet"]
    command += ["--rpm", str(RPM), "--concurrency", "32", "--shared-limits", redis]
    env = {**os.environ, KEY_ENV: "sk-sim"}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("clients", [2, 4])
def test_clients_sharing_one_quota_hold_it_together(clients: int, tmp_path: Path) -> None:
    flags = ["--rpm", str(RPM), "--window", "3", "--latency", "0.05", "--quiet"]
    needs_redis_server()
    with RedisProcess() as redis, ServeProcess(*flags) as server:
        procs = []
        for c in range(clients):
            inp, out = tmp_path / f"in{c}.jsonl", tmp_path / f"out{c}.jsonl"
            batch_input(inp, REQUESTS // clients, f"{c}-")
            procs.append(_batch(server.url, redis.url, inp, out))
        for proc in procs:
            _, stderr = proc.communicate(timeout=600)
            assert proc.returncode == 0, stderr.decode()
        stats = server.stats()
    answered = 0
    for c in range(clients):
        lines = [orjson.loads(x) for x in (tmp_path / f"out{c}.jsonl").read_bytes().splitlines()]
        answered += sum(1 for x in lines if x["response"]["status_code"] == 200)
    assert answered == REQUESTS
    assert stats["answered_again"] == 0
    assert stats["rate_limited"] < 0.01 * stats["requests"]
    # What the server saw while requests came: one schedule for all, so never above the limit
    # (clients pacing alone would each send at it: N times over), and most of it (0.98 unloaded;
    # a loaded machine only wakes the clients late, which lowers the rate, never raises it).
    span = stats["last_request_at"] - stats["first_request_at"]
    rate = (stats["requests"] - 1) / span * 60
    assert rate <= RPM
    assert rate >= 0.6 * RPM


def test_a_run_takes_its_slots_from_the_shared_quota(tmp_path: Path) -> None:
    import redis

    from ttc.engine.cli import main
    from ttc.engine.send._shared import quota_key

    needs_redis_server()
    with RedisProcess() as server:
        code = main(
            ["run", "--method", "unif", "--rounds", "1", "--per-task", "2", "--no-cache",
             "--workers", "0", "--rpm", "6000", "--shared-limits", server.url,
             "--out", str(tmp_path / "run")]
        )  # fmt: skip
        client = redis.Redis.from_url(server.url)
        try:
            key = quota_key("sim", None, None, None)
            held = client.hgetall(key)
            ttl = client.pttl(key)
        finally:
            client.close()
    assert code == 0
    assert b"next" in held  # the run's 8 requests moved the shared schedule
    assert 0 < ttl <= 61_000  # and it expires a period after its last slot
