"""`benchmarks/paper.py --batch` against `ttc serve`'s Batch API (in process): a small grid sends
every round through the Batch API (not one synchronous completion on the server), lands what the
same grid lands synchronously, and costs exactly half; results.md says the cost and the rate.
Refused with a clear error: --batch with the sim provider. Simulated (the sim model behind
`ttc serve`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import paper  # noqa: E402
from _paper_plan import cell_dir  # noqa: E402

from ttc.adapters.sim import ServeOptions, running_server  # noqa: E402
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite  # noqa: E402
from ttc.engine import ConfigError  # noqa: E402

METHODS = ("elim", "adpt")


def _argv(out: Path, url: str, *extra: str) -> list[str]:
    return [
        "--out", str(out), "--suites", "reasoning_gym", "--methods", ",".join(METHODS),
        "--seeds", "0", "--rounds", "3", "--limit", "12", "--per-task", "3",
        "--embedder", "lexical", "--workers", "1", "--no-cache",
        "--provider", "openai", "--base-url", url, "--model", "sim", "--price", "1,1", *extra,
    ]  # fmt: skip


async def _grid(argv: list[str]) -> dict[str, Any]:
    opts = paper.options_from(paper.build_parser().parse_args(argv), argv)
    return await paper.run(opts)


def _summary(out: Path, method: str) -> dict[str, Any]:
    path = cell_dir(out, "reasoning_gym", 0, method) / "summary.json"
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


async def test_a_batch_grid_sends_nothing_synchronously_at_half_the_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    suite = ReasoningGymSuite(per_task=3)
    async with running_server(ServeOptions(port=0, batch_delay=0.2), suite) as server:
        url = server.base_url_openai
        batch = await _grid(_argv(tmp_path / "b", url, "--batch", "--batch-poll", "0.05"))
        stats = server.stats()
        sync = await _grid(_argv(tmp_path / "s", url))
    assert batch["exit_code"] == 0
    assert batch["runs"] == len(METHODS)
    assert stats["by_route"].get("openai.generate", 0) == 0  # not one synchronous completion
    assert stats["batch"]["batches"] > 0
    for method in METHODS:
        b, s = _summary(tmp_path / "b", method), _summary(tmp_path / "s", method)
        for key in ("coverage", "solved", "input_tokens", "output_tokens", "thinking_tokens"):
            assert b[key] == s[key], (method, key)
        assert b["cost_usd"] == pytest.approx(s["cost_usd"] / 2, rel=1e-9)
    assert batch["cost_usd"] == pytest.approx(sync["cost_usd"] / 2, abs=1e-4)
    md = (tmp_path / "b" / "results.md").read_text()
    total = sum(_summary(tmp_path / "b", m)["cost_usd"] for m in METHODS)
    assert f"Cost: ${total:.4f} for these runs (batch mode: the Batch API's tokens at the " in md
    assert "50% off list" in md
    assert "batch mode" not in (tmp_path / "s" / "results.md").read_text()


async def test_batch_discount_and_fallback_reach_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    argv = _argv(tmp_path, "http://127.0.0.1:9/v1", "--batch", "--batch-discount", "0.25",
                 "--batch-fallback", "sync")  # fmt: skip
    opts = paper.options_from(paper.build_parser().parse_args(argv), argv)
    assert opts.batch is not None
    assert (opts.batch.discount, opts.batch.fallback) == (0.25, "sync")
    spec = opts.spec("elim", 0)
    assert spec.batch == opts.batch
    assert spec.price == "1,1"


def test_batch_with_the_sim_provider_is_refused() -> None:
    argv = ["--out", "never-written", "--batch"]
    with pytest.raises(ConfigError, match="--batch: the sim provider has no Batch API"):
        paper.options_from(paper.build_parser().parse_args(argv), argv)
