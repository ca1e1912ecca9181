"""The offline simulator: determinism, its success model, usage, latency and its knobs."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.sim._sim import SimConfig, SimProvider
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite, extract_last_boxed
from ttc.engine.contract._errors import BadRequest, ConfigError
from ttc.engine.contract._types import Demo, Item, Message, Provider, Request, Sampling
from ttc.retrieval import LexicalEmbedder

SEEDS = range(4)


@pytest.fixture(scope="module")
def suite() -> ReasoningGymSuite:
    return ReasoningGymSuite(per_task=40)


@pytest.fixture(scope="module")
def items(suite: ReasoningGymSuite) -> list[Item]:
    return suite.items()


def _request(
    suite: ReasoningGymSuite,
    item: Item,
    demos: Sequence[Demo] = (),
    seed: int | None = 0,
    n: int = 1,
) -> Request:
    prompt = suite.adaptive_prompt(item, demos) if demos else suite.warmup_prompt(item)
    return Request(
        messages=(Message("user", prompt),),
        sampling=Sampling(temperature=0.3, seed=seed),
        n=n,
        item_id=item.id,
        demos=tuple(demos),
    )


def _demos(
    suite: ReasoningGymSuite, item: Item, pool: Sequence[Item], *, same_task: bool, correct: bool
) -> list[Demo]:
    chosen = [
        other
        for other in pool
        if other.id != item.id and (other.meta["task"] == item.meta["task"]) == same_task
    ][:3]
    return [Demo(o.id, o.question, answers_for(suite).sim_response(o, correct, 7)) for o in chosen]


def test_lexical_embedder_basics() -> None:
    emb = LexicalEmbedder(dim=64)
    vecs = emb.embed(
        ["the cat sat on the mat", "the cat sat on the mat", "a cat on a mat", "", "zq"]
    )
    assert vecs.shape == (5, 64)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs[[0, 1, 2, 4]], axis=1), 1.0, rtol=1e-5)
    assert not vecs[3].any()
    assert np.isfinite(vecs).all()
    assert vecs[0] @ vecs[1] == pytest.approx(1.0, abs=1e-6)
    unrelated = emb.embed(["quantum chromodynamics lattice gauge"])[0]
    assert vecs[0] @ vecs[2] > vecs[0] @ unrelated
    assert emb.embed([]).shape == (0, 64)


def test_lexical_embedder_is_the_same_in_another_process() -> None:
    # A stable hash, not the salted hash(): another process with another hash seed agrees.
    code = (
        "import sys; from ttc.retrieval import LexicalEmbedder; "
        "sys.stdout.write(LexicalEmbedder().embed(['the cat sat on the mat']).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    here = LexicalEmbedder().embed(["the cat sat on the mat"])
    assert bytes.fromhex(out) == here.tobytes()


async def test_same_request_same_completion(suite: ReasoningGymSuite, items: list[Item]) -> None:
    sim, other = SimProvider(suite, items), SimProvider(suite, items)
    assert isinstance(sim, Provider)
    for item in items[:20]:
        request = _request(suite, item, n=3)
        first = await sim.generate(request)
        assert first == await sim.generate(request) == await other.generate(request)
    draws = {(await sim.generate(_request(suite, items[0], seed=s))).texts for s in range(10)}
    assert len(draws) > 5
    changed = SimProvider(suite, items, SimConfig(seed=1))
    request = _request(suite, items[0], n=4)
    assert (await changed.generate(request)).texts != (await sim.generate(request)).texts
    await sim.aclose()


async def _success_rate(
    sim: SimProvider,
    suite: ReasoningGymSuite,
    items: list[Item],
    demos_for: Callable[[Item], list[Demo]],
) -> float:
    wins = []
    for item in items:
        demos = demos_for(item)
        for seed in SEEDS:
            completion = await sim.generate(_request(suite, item, demos, seed=seed, n=2))
            wins += [answers_for(suite).sim_is_correct(item, text) for text in completion.texts]
    return sum(wins) / len(wins)


async def test_demonstrations_move_success_as_modelled(
    suite: ReasoningGymSuite, items: list[Item]
) -> None:
    sim = SimProvider(suite, items)

    def pick(same_task: bool, correct: bool) -> Callable[[Item], list[Demo]]:
        return lambda item: _demos(suite, item, items, same_task=same_task, correct=correct)

    def mean_p(fn: Callable[[Item], list[Demo]]) -> float:
        return statistics.fmean(sim.success_probability(_request(suite, i, fn(i))) for i in items)

    def nothing(item: Item) -> list[Demo]:
        return []

    base = await _success_rate(sim, suite, items, nothing)
    similar = await _success_rate(sim, suite, items, pick(True, True))
    dissimilar = await _success_rate(sim, suite, items, pick(False, True))
    wrong = await _success_rate(sim, suite, items, pick(True, False))
    assert similar > base + 0.15
    assert dissimilar <= base + 0.02
    assert wrong < base - 0.03
    # The same ordering, exactly, in the model's own probabilities.
    p_base = mean_p(nothing)
    assert mean_p(pick(True, True)) > p_base
    assert mean_p(pick(False, True)) < p_base
    assert mean_p(pick(True, False)) < p_base


async def test_texts_end_with_an_answer_the_real_judge_agrees_with(
    suite: ReasoningGymSuite, items: list[Item]
) -> None:
    always = SimProvider(suite, items, SimConfig(ability=60.0))
    never = SimProvider(suite, items, SimConfig(ability=-60.0))
    coin = SimProvider(suite, items)
    for item in items:
        (good,) = (await always.generate(_request(suite, item))).texts
        (bad,) = (await never.generate(_request(suite, item))).texts
        assert good.rstrip().endswith(f"\\boxed{{{item.reference}}}")
        assert suite.judge(item, good).score == 1.0
        assert extract_last_boxed(bad) is not None
        assert suite.judge(item, bad).score < 1.0
        assert "\n\n" in good  # reasoning prose, then the answer
        for text in (await coin.generate(_request(suite, item, n=3))).texts:
            assert (suite.judge(item, text).score == 1.0) == answers_for(suite).sim_is_correct(
                item, text
            )


async def test_usage(suite: ReasoningGymSuite, items: list[Item]) -> None:
    sim = SimProvider(suite, items, SimConfig(thinking_ratio=0.5))
    item = items[0]
    short = await sim.generate(_request(suite, item, n=4))
    demos = _demos(suite, item, items, same_task=True, correct=True)
    long = await sim.generate(_request(suite, item, demos, n=4))
    for completion in (short, long):
        usage = completion.usage
        assert usage.input_tokens > 0
        assert usage.output_tokens > 0
        assert usage.thinking_tokens == round(0.5 * usage.output_tokens)
        assert len(completion.texts) == 4
        assert completion.finish_reasons == ("stop",) * 4
        assert completion.model.startswith("sim-2@")
        chars = sum(len(t) for t in completion.texts)
        assert 0.5 < chars / (4.0 * usage.output_tokens) < 1.5  # prose sized to the token count
    assert long.usage.input_tokens > short.usage.input_tokens
    prompt_chars = len(suite.warmup_prompt(item))
    assert short.usage.input_tokens == -(-prompt_chars // 4)
    lengths = [
        (await sim.generate(_request(suite, i, seed=s))).usage.output_tokens
        for i in items
        for s in SEEDS
    ]
    # lognormal around each question's length (mean_output_tokens=300 when solved, x1.6 failed)
    assert 250 < statistics.fmean(lengths) < 500


async def test_latency_knob(
    suite: ReasoningGymSuite, items: list[Item], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(delay)

    monkeypatch.setattr("ttc.adapters.sim._sim.asyncio.sleep", recording_sleep)
    instant = await SimProvider(suite, items).generate(_request(suite, items[0]))
    assert slept == []
    assert instant.latency_s == 0.0
    slow = SimProvider(suite, items, SimConfig(latency_s=0.002, latency_sigma=0.1))
    loop = asyncio.get_running_loop()
    start = loop.time()
    completion = await slow.generate(_request(suite, items[0]))
    assert slept == [completion.latency_s]
    assert 0.001 < completion.latency_s < 0.004
    assert loop.time() - start >= completion.latency_s * 0.9
    # Latency is drawn last: it never changes what the model says.
    assert completion.texts == instant.texts


async def test_unknown_items_and_truncation(suite: ReasoningGymSuite, items: list[Item]) -> None:
    sim = SimProvider(suite, items)
    with pytest.raises(BadRequest, match="unknown item"):
        await sim.generate(Request(messages=(Message("user", "hi"),), item_id="nope/0"))
    # A demonstration from outside the test set (a fixed few-shot example) belongs to no hidden
    # cluster: it neither helps nor hurts, whatever its question says.
    bare = sim.success_probability(_request(suite, items[0], []))
    same = Demo("fewshot/1", items[0].question, "\\boxed{1}")
    other = Demo("fewshot/1", "zebra quilt kettle", "\\boxed{1}")
    assert sim.success_probability(_request(suite, items[0], [same])) == bare
    assert sim.success_probability(_request(suite, items[0], [other])) == bare
    request = Request(
        messages=(Message("user", "hi"),),
        sampling=Sampling(seed=0, max_output_tokens=5),
        item_id=items[0].id,
    )
    completion = await sim.generate(request)
    assert completion.finish_reasons == ("length",)
    assert completion.usage.output_tokens == 5
    assert extract_last_boxed(completion.texts[0]) is None


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("difficulty_std", -1.0),
        ("icl_gain", -0.1),
        ("cluster_difficulty_share", 1.0),
        ("cluster_difficulty_share", -0.1),
        ("fallback_cluster_size", 0.0),
        ("failure_length_ratio", 0.9),
        ("question_length_sigma", -0.1),
        ("length_difficulty", -0.1),
        ("dissimilar_penalty", -1.0),
        ("wrong_demo_penalty", -1.0),
        ("mean_output_tokens", 0.0),
        ("output_tokens_sigma", -0.5),
        ("thinking_ratio", -1.0),
        ("latency_s", -0.1),
        ("latency_sigma", -1.0),
        ("chars_per_token", 0.0),
        ("ability", float("nan")),
        ("seed", 1.5),
    ],
)
def test_bad_knob_is_a_config_error(knob: str, value: float) -> None:
    with pytest.raises(ConfigError, match=knob):
        SimConfig(**{knob: value})  # type: ignore[arg-type]


def test_the_model_name_carries_the_knobs_that_shape_answers() -> None:
    suite = ReasoningGymSuite(per_task=1)
    items = suite.items()
    base = SimProvider(suite, items).model
    assert SimProvider(suite, items, SimConfig(ability=1.0)).model != base
    assert SimProvider(suite, items, SimConfig(seed=3)).model != base
    # latency changes how long answers take, not what they are
    assert SimProvider(suite, items, SimConfig(latency_s=0.01)).model == base
