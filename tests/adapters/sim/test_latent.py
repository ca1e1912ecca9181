"""The simulator's hidden truth: which questions help which (clusters of its own, from the data's
structure, not any embedder's similarity), and output lengths that depend on the question and on
success."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeSuite

from ttc.adapters.sim._latent import structure_of
from ttc.adapters.sim._sim import SimConfig, SimProvider
from ttc.adapters.suites._gpqa import GPQASuite
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._math import MathSuite
from ttc.adapters.suites._reasoning_gym import ReasoningGymSuite
from ttc.engine import Demo, Engine, Item, Message, Request, RunConfig, Sampling
from ttc.engine.contract import FloatArray
from ttc.retrieval import LexicalEmbedder

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
LCB_FIXTURE = Path(__file__).resolve().parents[2] / "data" / "lcb_fixture.jsonl"
_RNG = random.Random(0)
WORDS = ["".join(_RNG.choices("bcdfghjklmnpqrstvwxz", k=8)) for _ in range(4000)]


CLUSTERS = "abcdefgh"


def _families(n: int) -> list[Item]:
    """8n questions in eight hidden clusters (tasks a..h), in n lexical families: the eight
    members of a family share all their words but one, one member in each cluster; within a
    cluster no two questions share a word. So lexical neighbours always cross clusters."""
    items = []
    for i in range(n):
        words = " ".join(WORDS[i * 8 : i * 8 + 8])
        for k, c in enumerate(CLUSTERS):
            own = WORDS[2000 + i * 8 + k]
            items.append(Item(f"{c}{i}", f"{words} {own}", f"right:{c}{i}", {"task": c}))
    return items


def _request(item: Item, demos: list[Demo], seed: int = 0) -> Request:
    return Request(
        messages=(Message("user", item.question),),
        sampling=Sampling(temperature=0.3, seed=seed),
        item_id=item.id,
        demos=tuple(demos),
    )


def _right(item: Item) -> Demo:
    return Demo(item.id, item.question, item.reference)


def test_the_gain_follows_hidden_clusters_not_words() -> None:
    pool = _families(10)
    suite = FakeSuite(pool=pool)
    sim = SimProvider(suite, pool)
    lexical = LexicalEmbedder()
    gains_same, gains_twin = [], []
    for target in pool[:40]:
        same = [i for i in pool if i.meta == target.meta and i.id != target.id][:3]
        twins = [i for i in pool if i.id[1:] == target.id[1:] and i.id != target.id][:3]
        vec = lexical.embed([target.question, same[0].question, twins[0].question])
        assert vec[0] @ vec[1] < 0.3 < 0.7 < vec[0] @ vec[2]  # words say the twin, not the kin
        base = sim.success_probability(_request(target, []))
        shown = sim.success_probability(_request(target, [_right(i) for i in same]))
        gains_same.append(shown - base)
        shown = sim.success_probability(_request(target, [_right(i) for i in twins]))
        gains_twin.append(shown - base)
    # Correct demonstrations of the same hidden cluster help, whatever their words; a lexical
    # twin from another cluster earns nothing (it costs a little: off-topic context).
    assert min(gains_same) > 0.01
    assert statistics.fmean(gains_same) > 0.1
    assert max(gains_twin) <= 0.0
    # With the gain off, nothing helps.
    off = SimProvider(suite, pool, SimConfig(icl_gain=0.0))
    target, kin = pool[0], pool[8]
    assert off.success_probability(_request(target, [_right(kin)])) == pytest.approx(
        off.success_probability(_request(target, []))
    )


class ClusterEmbedder:
    """Vectors that know each question's hidden cluster and nothing of its words: a one-hot of the
    cluster plus noise, so lexical similarity is scrambled and clusters are kept."""

    name = "cluster"
    dim = 16
    batch_size = 64

    def __init__(self, pool: list[Item]) -> None:
        self._task = {i.question: i.meta["task"] for i in pool}

    def embed(self, texts: list[str]) -> FloatArray:
        rng = np.random.default_rng(0)
        out = rng.normal(0.0, 0.2, (len(texts), self.dim)).astype(np.float32)
        for row, text in enumerate(texts):
            out[row, CLUSTERS.index(self._task[text])] += 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


async def _coverage(method: str, pool: list[Item], embedder: object, seed: int) -> float:
    suite = FakeSuite(pool=pool)
    sim = SimProvider(suite, pool, SimConfig(seed=seed, icl_gain=2.0))
    cfg = RunConfig(method=method, rounds=4, seed=seed, verifier_workers=0)
    async with Engine(sim, suite, cfg, embedder=embedder) as engine:  # type: ignore[arg-type]
        return (await engine.run()).rounds[-1].coverage


async def test_an_embedder_earns_the_gain_only_by_finding_the_clusters() -> None:
    pool = _families(15)
    seeds = range(3)
    elim = statistics.fmean([await _coverage("elim", pool, None, s) for s in seeds])
    clusters = ClusterEmbedder(pool)
    by_cluster = statistics.fmean([await _coverage("adpt", pool, clusters, s) for s in seeds])
    lexical = LexicalEmbedder()
    by_words = statistics.fmean([await _coverage("adpt", pool, lexical, s) for s in seeds])
    assert by_cluster > elim + 0.08  # scrambled words, kept clusters: the gain
    assert by_words <= elim + 0.01  # every lexical neighbour is from the other cluster: none


def test_a_random_demonstration_earns_little() -> None:
    suite = ReasoningGymSuite(per_task=25)
    pool = suite.items()
    sim = SimProvider(suite, pool)
    rng = random.Random(0)
    same_gain, random_gain = [], []
    for target in pool:
        base = sim.success_probability(_request(target, []))
        kin = [i for i in pool if i.meta["task"] == target.meta["task"] and i.id != target.id]
        others = [i for i in pool if i.id != target.id]
        right = [Demo(i.id, i.question, f"\\boxed{{{i.reference}}}") for i in rng.sample(kin, 3)]
        anyone = [
            Demo(i.id, i.question, f"\\boxed{{{i.reference}}}") for i in rng.sample(others, 3)
        ]
        same_gain.append(sim.success_probability(_request(target, right)) - base)
        random_gain.append(sim.success_probability(_request(target, anyone)) - base)
    assert statistics.fmean(same_gain) > 0.1
    assert statistics.fmean(random_gain) < 0.25 * statistics.fmean(same_gain)


async def test_failed_responses_are_longer_and_lengths_vary_by_question() -> None:
    suite = ReasoningGymSuite(per_task=25)
    pool = suite.items()
    solves = SimProvider(suite, pool, SimConfig(ability=60.0))
    fails = SimProvider(suite, pool, SimConfig(ability=-60.0))
    solved, failed, per_question = [], [], []
    for item in pool:
        lengths = []
        for seed in range(8):
            request = Request((Message("user", "q"),), Sampling(seed=seed), item_id=item.id)
            right = (await solves.generate(request)).usage.output_tokens
            wrong = (await fails.generate(request)).usage.output_tokens
            solved.append(right)
            failed.append(wrong)
            lengths.append(right)
        per_question.append(statistics.fmean(lengths))
    assert statistics.fmean(failed) > 1.3 * statistics.fmean(solved)
    # Questions differ in their typical length, far beyond one sample's noise over 8 samples.
    spread = statistics.stdev(per_question) / statistics.fmean(per_question)
    assert spread > 0.2
    # And harder questions take longer.
    difficulty = [solves.difficulty(i.id) for i in pool]
    assert np.corrcoef(difficulty, per_question)[0, 1] > 0.2


async def test_in_a_run_failures_cost_more_tokens_than_successes() -> None:
    suite = ReasoningGymSuite(per_task=25)
    pool = suite.items()
    sim = SimProvider(suite, pool)
    solved: list[int] = []
    failed: list[int] = []
    for item in pool:
        for seed in range(4):
            request = Request((Message("user", "q"),), Sampling(seed=seed), item_id=item.id)
            completion = await sim.generate(request)
            ok = suite.judge(item, completion.texts[0]).score == 1.0
            (solved if ok else failed).append(completion.usage.output_tokens)
    assert solved
    assert failed
    assert statistics.fmean(failed) > 1.3 * statistics.fmean(solved)


def test_clusters_come_from_each_suite_s_own_data() -> None:
    rg = ReasoningGymSuite(per_task=3).items()
    assert {structure_of(i.meta) for i in rg} == {f"task={t}" for t in {i.meta["task"] for i in rg}}
    assert len({structure_of(i.meta) for i in rg}) == 4
    math500 = MathSuite("math500", DATA / "math500" / "test.jsonl").items()
    assert len({structure_of(i.meta) for i in math500}) == 7  # subjects
    minerva = MathSuite("minerva", DATA / "minerva_math" / "test.jsonl").items()
    assert len({structure_of(i.meta) for i in minerva}) >= 4  # courses
    gpqa = GPQASuite(DATA / "gpqa_diamond" / "gpqa_diamond.jsonl.gz").items()
    subdomains = Counter(structure_of(i.meta) for i in gpqa)
    assert None not in subdomains
    assert len(subdomains) >= 8
    lcb = LiveCodeBenchSuite(LCB_FIXTURE, start=None, end=None).items()
    assert {structure_of(i.meta) for i in lcb} == {
        "platform=atcoder",
        "platform=leetcode",
        "platform=codeforces",
    }
    # A mixed suite's items are told apart by their source too.
    assert structure_of({"source": "math500", "subject": "Algebra"}) == "math500/subject=Algebra"


def test_items_without_structure_get_seeded_clusters() -> None:
    pool = [Item(f"q{i}", f"question number {i}", f"right:q{i}") for i in range(200)]
    suite = FakeSuite(pool=pool)
    one = SimProvider(suite, pool, SimConfig(seed=1))
    again = SimProvider(suite, pool, SimConfig(seed=1))
    other = SimProvider(suite, pool, SimConfig(seed=2))
    clusters = [one.cluster(i.id) for i in pool]
    assert clusters == [again.cluster(i.id) for i in pool]
    assert clusters != [other.cluster(i.id) for i in pool]
    sizes = Counter(clusters)
    assert len(sizes) == 10  # about one per 20 questions (fallback_cluster_size)
    assert max(sizes.values()) < 40
    # Difficulty is the same per seed and shared within a cluster in part.
    assert [one.difficulty(i.id) for i in pool] == [again.difficulty(i.id) for i in pool]
