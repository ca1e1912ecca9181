"""`ttc run --metrics-port 0` in a process of its own: it says where its metrics are, serves
them while the run goes (scraped over HTTP and parsed by prometheus-client), and stops serving
when it exits."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttc.engine.journal import read_journal


def scrape(url: str) -> dict[str, float]:
    """Each metric's samples summed over their labels (`_created` left out)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_created"):
                totals[s.name] = totals.get(s.name, 0.0) + s.value
    return totals


def test_a_run_serves_its_metrics_while_it_goes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "ttc.engine.cli", "run",
            "--limit", "20", "--sim-latency", "0.3", "--concurrency", "2",
            "--embedder", "lexical", "--workers", "0", "--no-cache", "-q",
            "--metrics-port", "0", "--out", str(out),
        ],
        cwd=tmp_path,
        env={**os.environ, "TTC_CACHE_DIR": str(tmp_path / ".cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.fullmatch(r"ttc: metrics at (http://127\.0\.0\.1:\d+/metrics)\n", line)
        assert found, line
        url = found.group(1)
        live: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while live.get("ttc_requests_total", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            live = scrape(url)
        assert proc.poll() is None, "the run ended before it was seen under way"
        assert live["ttc_requests_total"] > 0
        assert 0 <= live["ttc_in_flight"] <= live["ttc_concurrency_max"] == 2
        assert live["ttc_tokens_total"] > 0
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    samples = [e for e in read_journal(out / "journal.jsonl") if e["ev"] == "sample"]
    assert live["ttc_requests_total"] <= len(samples)
    with pytest.raises(urllib.error.URLError, match="refused"):  # served no longer
        scrape(url)
