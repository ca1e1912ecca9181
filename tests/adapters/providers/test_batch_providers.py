"""Both Batch API adapters (OpenAI's and Gemini's, through their official clients) driving whole
runs against `ttc serve` in process, with failures and expiries inside batches: the run
completes, equals a synchronous run of the same seed, sends nothing synchronously, and costs
half as much. Simulated (the sim model behind `ttc serve`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ttc.adapters import GeminiProvider, OpenAIProvider
from ttc.adapters.providers import GeminiBatchAPI, OpenAIBatchAPI
from ttc.adapters.sim import ServeOptions, SimServer, running_server
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine import Engine, EngineOptions, Price, Provider, RunConfig
from ttc.retrieval import LexicalEmbedder


def _provider(kind: str, server: SimServer, batch: bool) -> Provider:
    provider: Provider
    if kind == "openai":
        openai = OpenAIProvider("sim", base_url=server.base_url_openai, api_key="x")
        if batch:
            openai.batch = OpenAIBatchAPI(openai, poll_s=(0.05, 0.2))
        provider = openai
    else:
        gemini = GeminiProvider("sim", base_url=server.url, api_key="x")
        if batch:
            gemini.batch = api = GeminiBatchAPI(gemini, poll_s=(0.05, 0.2))
            if kind == "gemini-file":  # every round over the inline limit: a Files API upload
                api.inline_bytes = 0
        provider = gemini
    return provider


async def _run(provider: Provider, suite: ReasoningGymSuite, out: Path) -> Any:
    config = RunConfig(method="adpt", rounds=3, verifier_workers=0)
    options = EngineOptions(price=Price(1.0, 1.0, 1.0))
    try:
        async with Engine(provider, suite, config, out_dir=out, embedder=LexicalEmbedder(),
                          options=options) as engine:  # fmt: skip
            result = await engine.run()
            assert result.state is not None
            return result, engine.cost(result.state.total_usage())
    finally:
        if provider.batch is not None:
            await provider.batch.aclose()
        await provider.aclose()


@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
@pytest.mark.parametrize("kind", ["openai", "gemini", "gemini-file"])
async def test_a_batch_run_with_failures_equals_a_synchronous_run(
    kind: str, tmp_path: Path
) -> None:
    suite = ReasoningGymSuite(per_task=5)
    options = ServeOptions(port=0, batch_delay=0.3, batch_fail=0.1, batch_expire=0.5, seed=1)
    async with running_server(options, suite) as server:
        batched, cost_b = await _run(_provider(kind, server, True), suite, tmp_path / "b")
        stats = server.stats()
        synced, cost_s = await _run(_provider(kind, server, False), suite, tmp_path / "s")
    assert batched.complete
    wire = kind.split("-")[0]
    assert stats["by_route"].get(f"{wire}.generate", 0) == 0
    if kind == "gemini-file":
        routes = stats["batch"]["by_route"]
        # one upload (start and bytes) per batch, and one download of each batch's responses
        assert routes["gemini.files.upload"] == 2 * stats["batch"]["batches"]
        assert routes["gemini.files.download"] == stats["batch"]["batches"]
    assert stats["batch"]["requests_failed"] + stats["batch"]["requests_undone"] > 0
    for b, s in zip(batched.records, synced.records, strict=True):
        assert (b.samples, b.usage, b.covered_round) == (s.samples, s.usage.bought_in_batch(),
                                                          s.covered_round)  # fmt: skip
    assert cost_b == pytest.approx(cost_s / 2)
