"""`ttc run` over three `ttc serve` replicas (`--base-url` three times), one of them killed
with SIGKILL mid-run: the run completes with every sample answered, as a run on one server does,
the dead replica's share retried on the two left. In subprocesses; everything here is simulated
(the sim model behind `ttc serve`)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from e2e.test_e2e_serve import TTC, Server, env
from e2e.test_overnight import outcome

from ttc.engine.journal import journal_text

SUITE = ["--per-task", "15"]
RUN = [*SUITE, "--embedder", "lexical", "--workers", "1", "--no-cache", "-q", "--no-live",
       "--provider", "openai", "--model", "sim", "--concurrency", "6"]  # fmt: skip


def _samples(run: Path) -> list[dict[str, Any]]:
    try:
        lines = [raw.rstrip(b"\n") for raw in journal_text(run / "journal.jsonl")]
    except FileNotFoundError:
        return []
    # The last line may be half written while the run goes on.
    events = [orjson.loads(x) for x in lines[:-1]]
    return [e for e in events if e["ev"] == "sample"]


@pytest.mark.slow
def test_a_replica_killed_mid_run_and_the_run_completes_on_the_others(tmp_path: Path) -> None:
    servers = [Server(tmp_path, *SUITE, "--latency", "0.3") for _ in range(3)]
    doomed = servers[2]
    try:
        one = subprocess.run([TTC, "run", *RUN, "--base-url", servers[0].url + "/v1",
                              "--out", "one"], cwd=tmp_path, env=env(tmp_path),
                             capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert one.returncode == 0, one.stderr
        urls = [arg for s in servers for arg in ("--base-url", s.url + "/v1")]
        run = tmp_path / "three"
        proc = subprocess.Popen([TTC, "run", *RUN, *urls, "--out", str(run)], cwd=tmp_path,
                                env=env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(_samples(run)) < 15:
            assert proc.poll() is None, "the run ended before the replica was killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        answered_by_doomed = doomed.stats()["by_route"].get("openai.generate", 0)
        doomed.proc.kill()
        doomed.proc.wait()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        served = [s.stats()["by_route"].get("openai.generate", 0) for s in servers[:2]]
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.stop()
            elif server.proc.stdout is not None:
                server.proc.stdout.close()
    assert answered_by_doomed > 0  # it had its share before it died
    # Every sample answered, as on one server: the same questions, answers, rounds and tokens.
    assert outcome(run) == outcome(tmp_path / "one")
    samples = _samples(run)
    assert all(e["ok"] for e in samples)
    assert any(e["attempts"] > 1 for e in samples)  # those cut off with it, retried
    config = orjson.loads((run / "config.json").read_bytes())
    assert config["endpoint"] == ",".join(s.url + "/v1" for s in servers)
    log = (run / "run.log").read_text()
    assert f"replica {doomed.url}/v1 is down" in log
    # The two left answered the rest (the first run's requests went to the first server).
    assert min(served) > 0
