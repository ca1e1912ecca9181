"""A million questions: --index (the exact and approximate FAISS indexes of solved questions,
their choice by size, their record in config.json) and what the run keeps per question."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeSuite, items

from ttc.adapters import SimConfig, SimProvider
from ttc.engine import ConfigError, Engine, Item, RunConfig
from ttc.engine.cli import main
from ttc.engine.contract import FloatArray
from ttc.retrieval import EXACT_UP_TO, IndexSpec, index_spec
from ttc.retrieval._index import SolvedIndex


def clustered(n: int, dim: int, clusters: int, seed: int = 0) -> FloatArray:
    """Unit vectors around `clusters` centres: neighbours are meaningful, as with real text."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    v = centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim))
    out: FloatArray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def test_auto_is_exact_up_to_the_threshold_and_ivf_above() -> None:
    assert index_spec("auto", 500).kind == "flat"
    assert index_spec("auto", EXACT_UP_TO).kind == "flat"
    big = index_spec("auto", 1_000_000)
    assert (big.kind, big.nlist, big.nprobe, big.train_size) == ("ivf", 2000, 32, 128_000)
    assert index_spec("flat", 1_000_000).kind == "flat"
    assert index_spec("hnsw", 10).describe() == {"kind": "hnsw", "m": 32, "ef_search": 64}
    with pytest.raises(ValueError, match="index kind must be one of auto, flat, ivf, hnsw"):
        index_spec("annoy", 10)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_search_finds_most_exact_neighbours_with_exact_scores(kind: str) -> None:
    vectors = clustered(6000, 48, clusters=60)
    solved = list(range(0, 6000, 2))
    queries = list(range(1, 6000, 20))
    exact = SolvedIndex(vectors)
    approx = SolvedIndex(vectors, index_spec(kind, 6000))
    for index in (exact, approx):
        index.add(solved)
    want = exact.search(queries, 3)
    got = approx.search(queries, 3)
    recall = np.mean(
        [len({r for r, _ in g} & {r for r, _ in w}) / 3 for g, w in zip(got, want, strict=True)]
    )
    assert recall >= 0.9, recall
    for q, hits in zip(queries, got, strict=True):
        assert len(hits) == 3
        assert q not in [r for r, _ in hits]
        # The similarity shown is the cosine of the two vectors (kept as float16), not the
        # index's own score (the inner product of an IVF cell's residual, or a graph's).
        for r, s in hits:
            assert s == pytest.approx(approx.cosine(q, r), abs=1e-6)
            assert s == pytest.approx(float(vectors[q] @ vectors[r]), abs=2e-3)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_neighbours_do_not_depend_on_how_the_pool_grew(kind: str) -> None:
    """Rebuilt on a resume, the index must give the neighbours the uninterrupted run got."""
    vectors = clustered(3000, 32, clusters=30, seed=1)
    spec = index_spec(kind, 3000)
    queries = list(range(1, 3000, 7))
    one = SolvedIndex(vectors, spec)
    one.add(range(0, 3000, 3))
    again = SolvedIndex(vectors, spec)
    again.add(range(0, 3000, 3))
    assert one.search(queries, 2) == again.search(queries, 2)
    if kind == "ivf":  # cells trained on every vector: the barriers' batches do not matter
        split = SolvedIndex(vectors, spec)
        rows = list(range(0, 3000, 3))
        split.add(rows[:400])
        split.add(rows[400:])
        assert split.search(queries, 2) == one.search(queries, 2)


def test_an_ivf_index_over_few_questions_still_works() -> None:
    vectors = clustered(5, 8, clusters=2)
    index = SolvedIndex(vectors, index_spec("ivf", 5))
    assert index.search([0], 2) == [[]]
    index.add([1, 2])
    assert [r for r, _ in index.search([0], 3)[0]] in ([1, 2], [2, 1])


async def _run(tmp: Path, config: RunConfig, *, resume: bool = False) -> dict[str, object]:
    questions: list[Item] = items(12)
    suite = FakeSuite(pool=questions)
    provider = SimProvider(suite, questions, SimConfig(seed=1, latency_s=0.0))
    async with Engine(provider, suite, config, out_dir=tmp, resume=resume) as engine:
        await engine.run(questions)
    return dict(json.loads((tmp / "config.json").read_text()))


async def test_config_json_records_the_index_chosen_and_a_resume_must_match(
    tmp_path: Path,
) -> None:
    base = RunConfig(rounds=2, verifier_workers=0)
    described = await _run(tmp_path / "auto", base)
    assert described["index"] == {"kind": "flat"}  # auto, at 12 questions
    assert described["config"]["index"] == "auto"  # type: ignore[index]
    # `--index flat` is what auto chose: the same search, so the run resumes.
    await _run(
        tmp_path / "auto", RunConfig(rounds=2, verifier_workers=0, index="flat"), resume=True
    )
    described = await _run(tmp_path / "ivf", RunConfig(rounds=2, verifier_workers=0, index="ivf"))
    assert described["index"] == {
        "kind": "ivf", "nlist": 7, "nprobe": 7, "train_size": 12, "storage": "float16"
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"--index: the run in .* searched its neighbours with"):
        await _run(tmp_path / "ivf", base, resume=True)


def test_a_bad_index_is_refused_by_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--index", "annoy", "--limit", "3"])
    assert exit_.value.code == 2
    assert "--index: invalid choice: 'annoy'" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--index: must be one of auto, flat, ivf, hnsw"):
        RunConfig(index="annoy")


def test_the_spec_says_what_applies_to_its_kind() -> None:
    assert IndexSpec().describe() == {"kind": "flat"}
    assert IndexSpec().exact
    assert not index_spec("ivf", 100).exact


def test_a_solved_response_is_kept_packed_and_read_back_whole() -> None:
    """A run keeps one response per solved question (its demonstration): long ones compressed,
    the text read back the same, short ones as they are."""
    from ttc.engine.contract._state import Pick

    long = "We check each case in turn. " * 80 + "\n\n\\boxed{42} é"
    pick = Pick(2, 0, long, "42", True)
    assert isinstance(pick.packed, bytes)
    assert len(pick.packed) < len(long.encode()) / 3
    assert pick.text == long
    assert (pick.round, pick.k, pick.answer, pick.correct, pick.reward) == (2, 0, "42", True, None)
    assert pick == Pick(2, 0, long, "42", True)
    short = Pick(1, 1, "\\boxed{7}", "7", False, 0.5)
    assert short.packed == short.text == "\\boxed{7}"
    assert Pick(1, 0, None, None, False).text is None
