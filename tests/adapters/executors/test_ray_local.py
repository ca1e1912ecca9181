"""A local Ray that ttc starts (`--executor ray` without --ray-address) listens on loopback only,
and keeps its files in a private folder: every socket its processes listen on is 127.0.0.1's
(Ray on Linux swaps 127.0.0.1 for the machine's address, and listened on every interface), no
dashboard, and no world-writable /tmp/ray. Its own module: the pool starts Ray itself, where
test_ray.py's pool uses a Ray its host started."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from ray_probe import ProbeSuite

from ttc.adapters.executors import RayVerifierPool
from ttc.engine import Item

TESTS = Path(__file__).resolve().parents[2]


def _descends_from(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
    return False


def _mode(path: str) -> int | None:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return None


def _listening(root: int) -> list[str]:
    """The local addresses that `root` and its descendants listen on (TCP)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pids = [int(p) for p in re.findall(r"pid=(\d+)", line)]
        if any(_descends_from(p, root) for p in pids):
            found.append(line.split()[3])
    return found


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to list sockets")
async def test_a_local_ray_listens_on_loopback_only_with_private_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ray

    assert not ray.is_initialized()
    # Ray's workers import ray_probe from this folder; its SIGTERM handler is pytest's business.
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), path])))
    sigterm = signal.getsignal(signal.SIGTERM)
    pool = RayVerifierPool(ProbeSuite(), 1)
    try:
        pool.start()
        await pool.ready()
        verdicts = await pool.judge_many([(Item("q", "question", "1"), "1")])
        assert len(verdicts) == 1
        addresses = _listening(os.getpid())
        assert addresses  # GCS, raylet, object manager, workers...
        loopback = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")
        assert [a for a in addresses if not a.startswith(loopback)] == []
        tmp = pool._tmp
        assert tmp is not None
        assert _mode(tmp) == 0o700
    finally:
        await pool.aclose()
        signal.signal(signal.SIGTERM, sigterm)
    assert not ray.is_initialized()
    assert _mode(tmp) is None  # removed with the Ray it held
