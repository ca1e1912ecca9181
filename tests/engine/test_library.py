"""The library as an embedding service uses it: inside a running loop, never owning it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import ttc.adapters.embedders._embedders as embedders
from ttc.adapters import ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, RunConfig
from ttc.retrieval import LexicalEmbedder

ROOT = Path(__file__).resolve().parents[2]


async def test_engine_runs_inside_an_already_running_loop(tmp_path: Path) -> None:
    suite = ReasoningGymSuite(per_task=3)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=5))
    loop = asyncio.get_running_loop()
    ticks = 0

    async def heartbeat() -> None:
        # The host service's own work keeps running while the engine runs.
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(heartbeat())
    config = RunConfig(method="adpt", rounds=3, verifier_workers=1)
    async with Engine(
        provider, suite, config, embedder=LexicalEmbedder(), out_dir=tmp_path
    ) as engine:
        result = await engine.run(items)
    beat.cancel()
    assert asyncio.get_running_loop() is loop
    assert not loop.is_closed()
    assert ticks > 10
    assert result.n == 12
    assert len(result.rounds) == 3
    assert result.coverage == result.rounds[-1].coverage


def test_the_library_never_starts_an_event_loop() -> None:
    offenders = []
    for folder in ("engine", "adapters", "retrieval"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.parent == ROOT / "engine" / "cli":
                continue  # the command line is the one owner of a loop
            text = path.read_text()
            if re.search(r"asyncio\.run\(|set_event_loop_policy|new_event_loop", text):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


async def test_fallback_embedder_is_named_in_the_run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedders, "minilm_available", lambda: False)
    suite = ReasoningGymSuite(per_task=2)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=1))
    config = RunConfig(method="adpt", rounds=2, verifier_workers=0)
    async with Engine(
        provider, suite, config, embedder=lambda: embedders.make_embedder("auto"), out_dir=tmp_path
    ) as engine:
        await engine.run(items)
    log = (tmp_path / "run.log").read_text()
    assert "lexical" in log
    assert "WARNING" in log
    assert "MiniLM" in log


async def test_a_missing_model_is_refused_before_the_journal_and_leaves_out_reusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    from ttc.engine import ConfigError

    monkeypatch.setattr(embedders, "minilm_available", lambda: False)
    suite = ReasoningGymSuite(per_task=1)
    items = suite.items()
    config = RunConfig(method="adpt", rounds=2, verifier_workers=0)
    handlers = list(logging.getLogger("ttc").handlers)
    provider = SimProvider(suite, items)
    with pytest.raises(ConfigError, match="--embedder"):
        await Engine(
            provider,
            suite,
            config,
            embedder=lambda: embedders.make_embedder("minilm"),
            out_dir=tmp_path,
        ).run(items)
    assert not (tmp_path / "journal.jsonl").exists()
    assert logging.getLogger("ttc").handlers == handlers
    result = await Engine(
        provider, suite, config, embedder=LexicalEmbedder(), out_dir=tmp_path
    ).run(items)
    assert len(result.rounds) == 2
