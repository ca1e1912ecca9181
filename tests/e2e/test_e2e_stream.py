"""Streaming and the Responses API end to end: `ttc run` against `ttc serve` in subprocesses.

A streamed run against a server whose streams stall (`--fault-stall`) retries each stalled stream
after `--stall-timeout`, journals its partial answer, and ends with the token totals the server
says it delivered whole; `--api responses` runs synchronously, streamed, and in batch mode through
the Batch API's /v1/responses, its totals again the server's."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from e2e.test_e2e_serve import TTC, Server, env

from ttc.engine.journal import read_journal

SUITE = ["--per-task", "6"]
RUN = [
    *SUITE,
    "--embedder",
    "lexical",
    "--workers",
    "1",
    "--no-cache",
    "-q",
    "--no-live",
    "--model",
    "sim",
    "--rounds",
    "3",
]


def ttc(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TTC, *args],
        cwd=tmp,
        env=env(tmp),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def summary(run: Path) -> Any:
    return orjson.loads((run / "summary.json").read_bytes())


def totals(run: Path) -> dict[str, int]:
    s = summary(run)
    return {
        "input": s["input_tokens"],
        "output": s["output_tokens"],
        "thinking": s["thinking_tokens"],
    }


# Anthropic's base URL is the API's root; thinking is asked for there.
WIRES = {
    "openai": ("/v1",),
    "anthropic": ("", "--thinking-budget", "2048"),
    "gemini": ("",),
}


@pytest.mark.slow
@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_streamed_run_through_stalls_counts_what_the_server_delivered(
    tmp_path: Path, wire: str
) -> None:
    server = Server(
        tmp_path, *SUITE, "--fault-stall", "0.05", "--seed", "3", "--sim-thinking", "0.25"
    )
    path, *flags = WIRES[wire]
    try:
        run = ttc(
            tmp_path,
            "run",
            *RUN,
            "--provider",
            wire,
            "--base-url",
            server.url + path,
            *flags,
            "--stream",
            "--stall-timeout",
            "2",
            "--max-attempts",
            "8",
            "--out",
            "run",
        )
        stats = server.stats()
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr
    events = list(read_journal(tmp_path / "run" / "journal.jsonl"))
    stalls = [e for e in events if e["ev"] == "retry" and "stalled" in e["message"]]
    assert stats["by_fault"]["stall"] > 0
    assert len(stalls) == stats["by_fault"]["stall"]  # each stall found, retried
    assert all(e["error"] == "transient" for e in stalls)
    # Each stall's partial answer is journaled with its retry, its tokens estimated.
    assert any(e["partial"][0] for e in stalls)
    assert all(len(e["est"]) == 3 for e in stalls)
    assert summary(tmp_path / "run")["complete"] is True
    # Only whole answers are counted, by the run as by the server.
    assert totals(tmp_path / "run") == stats["tokens"]
    assert stats["tokens"]["thinking"] > 0
    samples = [e for e in events if e["ev"] == "sample"]
    assert all(e["ok"] for e in samples)
    assert stats["ok"] == len(samples)


@pytest.mark.slow
def test_the_responses_api_end_to_end_plain_streamed_and_in_batch_mode(tmp_path: Path) -> None:
    server = Server(tmp_path, *SUITE, "--batch-delay", "1", "--sim-thinking", "0.25")
    url = ["--provider", "openai", "--base-url", server.url + "/v1", "--api", "responses"]
    try:
        seen: dict[str, dict[str, int]] = {}
        runs = {"plain": [], "streamed": ["--stream"], "batch": ["--batch", "--batch-poll", "0.5"]}
        for name, flags in runs.items():
            server_before = server.stats()
            run = ttc(tmp_path, "run", *RUN, *url, *flags, "--out", name)
            assert run.returncode == 0, run.stderr
            after = server.stats()
            key = "batch" if name == "batch" else None
            now = after["batch"]["tokens"] if key else after["tokens"]
            before = server_before["batch"]["tokens"] if key else server_before["tokens"]
            seen[name] = {k: now[k] - before[k] for k in now}
        stats = server.stats()
    finally:
        server.stop()
    for name in runs:
        assert totals(tmp_path / name) == seen[name], name
        assert summary(tmp_path / name)["simulated"] is True
    assert seen["plain"]["thinking"] > 0
    # The same seed: the same answers however they came.
    assert seen["plain"] == seen["streamed"] == seen["batch"]
    assert "openai.generate" not in stats["by_route"]  # nothing went to chat completions
    assert stats["by_route"]["openai.responses"] > 0
    assert stats["batch"]["batches"] >= 1
