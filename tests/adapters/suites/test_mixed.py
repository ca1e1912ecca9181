"""The failure-mode test set (Table 7): questions of LiveCodeBench, MATH-500 and GPQA chosen far
apart, each prompted and judged by its own suite. (No GPQA question is ever printed.)"""

from __future__ import annotations

import pickle
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.suites import MIXED_SOURCES, GPQASuite, LiveCodeBenchSuite, MathSuite, MixedSuite
from ttc.adapters.suites._mixed import far_apart
from ttc.engine import Demo, Item, Suite
from ttc.retrieval import LexicalEmbedder

DATA = Path(__file__).resolve().parents[4] / "shared" / "data"
LCB_FIXTURE = Path(__file__).resolve().parents[2] / "data" / "lcb_fixture.jsonl"


@pytest.fixture(scope="module")
def sources() -> dict[str, Suite]:
    return {
        "livecodebench": LiveCodeBenchSuite(LCB_FIXTURE, start=None, end=None),
        "math500": MathSuite("math500", DATA / "math500" / "test.jsonl"),
        "gpqa": GPQASuite(DATA / "gpqa_diamond" / "gpqa_diamond.jsonl.gz"),
    }


@pytest.fixture(scope="module")
def mixed(sources: dict[str, Suite]) -> MixedSuite:
    return MixedSuite(sources)


def test_twenty_of_each_source_taking_turns(mixed: MixedSuite) -> None:
    items = mixed.items()
    counts = Counter(item.meta["source"] for item in items)
    # 20 of each; the LiveCodeBench fixture has only 7 problems, so it gives all it has.
    assert counts == {"livecodebench": 7, "math500": 20, "gpqa": 20}
    assert [item.meta["source"] for item in items[:6]] == [*MIXED_SOURCES, *MIXED_SOURCES]
    assert len({item.id for item in items}) == len(items)
    assert all(item.id == f"{item.meta['source']}/{item.meta['inner_id']}" for item in items)
    # The same 47 on every construction.
    assert [i.id for i in MixedSuite(mixed.suites).items()] == [i.id for i in items]


def _closest(items: list[Item]) -> float:
    """The mean, over the items, of each one's highest cosine similarity to another."""
    vectors = LexicalEmbedder().embed([item.question for item in items])
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return float(sims.max(axis=1).mean())


def test_the_questions_are_chosen_far_apart(mixed: MixedSuite, sources: dict[str, Suite]) -> None:
    chosen = _closest(mixed.items())
    rng = random.Random(0)
    for _ in range(5):  # any other draw of the same sizes sits closer together
        drawn = [
            *rng.sample(sources["math500"].items(), 20),
            *rng.sample(sources["gpqa"].items(), 20),
            *sources["livecodebench"].items(),
        ]
        assert chosen < _closest(drawn)


def test_each_item_is_judged_by_its_own_source(
    mixed: MixedSuite, sources: dict[str, Suite]
) -> None:
    sim = answers_for(mixed)
    judged: Counter[str] = Counter()
    for item in mixed.items():
        own, inner = mixed.source_of(item)
        assert own is sources[item.meta["source"]]
        right = answers_for(own).sim_response(inner, True, 3)
        wrong = answers_for(own).sim_response(inner, False, 3)
        assert mixed.judge(item, right) == own.judge(inner, right)
        assert mixed.judge(item, right).score == 1.0
        assert mixed.judge(item, wrong).score < 1.0
        assert sim.sim_is_correct(item, right)
        assert not sim.sim_is_correct(item, wrong)
        judged[type(own).__name__] += 1
    assert judged == {"LiveCodeBenchSuite": 7, "MathSuite": 20, "GPQASuite": 20}
    # A right answer of one source is no answer to another's question: a GPQA letter does not
    # pass a program's tests, and a program is not a letter.
    by_source = {item.meta["source"]: item for item in mixed.items()}
    letter = answers_for(sources["gpqa"]).sim_response(
        mixed.source_of(by_source["gpqa"])[1], True, 0
    )
    assert mixed.judge(by_source["livecodebench"], letter).score == 0.0
    code = answers_for(sources["livecodebench"]).sim_response(
        mixed.source_of(by_source["livecodebench"])[1], True, 0
    )
    assert mixed.judge(by_source["gpqa"], code).score == 0.0


def test_prompts_are_each_source_s_and_workers_judge_alike(
    mixed: MixedSuite, sources: dict[str, Suite]
) -> None:
    items = mixed.items()
    demos = [Demo(items[1].id, items[1].question, "\\boxed{1}")]
    for item in items[:6]:
        own, inner = mixed.source_of(item)
        assert mixed.warmup_prompt(item) == own.warmup_prompt(inner)
        assert mixed.adaptive_prompt(item, demos) == own.adaptive_prompt(inner, demos)
    worker = pickle.loads(pickle.dumps(mixed))  # the verifier processes' copy
    worker.prepare()
    for item in items[:6]:
        own, inner = mixed.source_of(item)
        text = answers_for(own).sim_response(inner, True, 1)
        assert worker.judge(item, text) == mixed.judge(item, text)


def test_far_apart_takes_what_each_source_has() -> None:
    groups = {
        "a": [Item(f"a{i}", f"alpha word{i}", "") for i in range(3)],
        "b": [Item(f"b{i}", f"beta word{i}", "") for i in range(1)],
    }
    picked = far_apart(groups, 2, LexicalEmbedder())
    assert [name for name, _ in picked] == ["a", "b", "a"]
    assert far_apart({}, 5, LexicalEmbedder()) == []
