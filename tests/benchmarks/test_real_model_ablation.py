"""The real-model recipe `benchmarks/real_model_ablation.py` end to end against `ttc serve`
(the simulator behind an OpenAI-compatible URL, as llama.cpp's server would be): the warm-up,
the ablation's paired line, its simulated mark, and a second call that buys nothing."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson
import pytest

from ttc.adapters.sim import ServeOptions, running_server
from ttc.adapters.suites import MathSuite, local_data

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import real_model_ablation  # noqa: E402

pytestmark = pytest.mark.slow


async def test_the_recipe_pairs_the_warmups_unsolved_questions_and_resumes_for_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = local_data("math500")
    if data is None:
        pytest.skip("MATH-500 is not in the data directory")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    out = tmp_path / "real"
    argv = ["--model", "sim", "--out", str(out), "--limit", "12", "--concurrency", "8"]
    argv += ["--timeout", "60"]
    suite = MathSuite("math500", data)  # the server knows every question's answer
    async with running_server(ServeOptions(port=0, latency=0.01), suite) as server:
        argv += ["--base-url", server.url + "/v1"]
        assert await asyncio.to_thread(real_model_ablation.main, argv) == 0
        first = server.stats()["requests"]
        line = orjson.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert await asyncio.to_thread(real_model_ablation.main, argv) == 0
        again = server.stats()["requests"]
        second = orjson.loads(capsys.readouterr().out.strip().splitlines()[-1])
    questions = [orjson.loads(x) for x in (out / "questions.jsonl").read_bytes().splitlines()]
    assert questions
    assert all(q["level"] in (1, 2) for q in questions)
    summary = orjson.loads((out / "run" / "summary.json").read_bytes())
    unsolved = round(12 * (1 - summary["coverage"]))
    assert line["simulated"] is True  # ttc serve is the simulator, whatever the provider flag
    assert line["pairs"] == line["questions"] == unsolved > 0
    lo, hi = line["ci95"]
    assert lo <= line["effect"] <= hi
    assert 0 <= line["p_value"] <= 1
    # The warm-up (12) and one pair per unsolved question were bought, once.
    assert first == 12 + 2 * unsolved
    assert again == first
    assert {k: second[k] for k in ("pairs", "effect", "ci95")} == {
        k: line[k] for k in ("pairs", "effect", "ci95")
    }
