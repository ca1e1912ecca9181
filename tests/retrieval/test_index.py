"""The solved-question index, neighbour selection and the embedding cache, against brute force."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ttc.engine.contract._types import FloatArray
from ttc.retrieval import LexicalEmbedder
from ttc.retrieval._cache import cached_embeddings
from ttc.retrieval._index import SolvedIndex
from ttc.retrieval._select import fixed_neighbours, random_solved, similar_solved


def unit_vectors(n: int, dim: int, seed: int = 0) -> FloatArray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: FloatArray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def brute_force(
    vectors: FloatArray, indexed: Sequence[int], query: int, k: int
) -> list[tuple[int, float]]:
    """Top-k indexed rows other than the query, by (-cosine, row)."""
    candidates = [r for r in indexed if r != query]
    scores = vectors[candidates] @ vectors[query]
    ranked = sorted(zip(candidates, scores.tolist(), strict=True), key=lambda rs: (-rs[1], rs[0]))
    return ranked[:k]


def assert_same_neighbours(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [r for r, _ in got] == [r for r, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


def test_search_matches_brute_force_excluding_self() -> None:
    vectors = unit_vectors(300, 32)
    rng = random.Random(1)
    indexed = rng.sample(range(300), 120)
    index = SolvedIndex(vectors)
    index.add(indexed)
    queries = [*indexed[:20], *(r for r in range(300) if r not in set(indexed))][:60]
    results = index.search(queries, 5)
    assert len(results) == len(queries)
    for q, got in zip(queries, results, strict=True):
        assert len(got) == 5
        assert q not in [r for r, _ in got]
        assert all(r in index for r, _ in got)
        assert_same_neighbours(got, brute_force(vectors, indexed, q, 5))


def test_growing_the_index_changes_results() -> None:
    vectors = unit_vectors(100, 16, seed=2)
    # Row 60 is a near copy of the query, row 50: once solved it must be the best demonstration.
    near = vectors[50] + 0.05 * unit_vectors(1, 16, seed=3)[0]
    vectors[60] = near / np.linalg.norm(near)
    index = SolvedIndex(vectors)
    index.add(range(10))
    before = index.search([50], 3)[0]
    assert_same_neighbours(before, brute_force(vectors, range(10), 50, 3))
    index.add([60, 70])
    after = index.search([50], 3)[0]
    assert after[0][0] == 60
    assert after != before
    assert_same_neighbours(after, brute_force(vectors, [*range(10), 60, 70], 50, 3))


def test_add_ignores_duplicates_and_keeps_membership() -> None:
    vectors = unit_vectors(20, 8, seed=3)
    index = SolvedIndex(vectors)
    assert index.add([3, 5, 3]) == 2
    assert index.add([5, 7]) == 1
    assert len(index) == 3
    assert 5 in index
    assert 4 not in index
    assert index.rows == (3, 5, 7)
    got = index.search([0], 10)[0]
    assert sorted(r for r, _ in got) == [3, 5, 7]


def test_k_larger_than_index_and_empty_index() -> None:
    vectors = unit_vectors(10, 8, seed=4)
    index = SolvedIndex(vectors)
    assert index.search([0, 1], 3) == [[], []]
    index.add([0, 1, 2])
    got = index.search([0, 5], 10)
    assert [r for r, _ in got[0]] == [r for r, _ in brute_force(vectors, [0, 1, 2], 0, 10)]
    assert len(got[0]) == 2  # the query itself is not its own neighbour
    assert len(got[1]) == 3
    assert index.search([0], 0) == [[]]


def test_out_of_range_rows_raise() -> None:
    index = SolvedIndex(unit_vectors(4, 8))
    with pytest.raises(IndexError):
        index.add([4])
    with pytest.raises(IndexError):
        index.search([-1], 2)


def test_ties_are_ordered_by_row_whatever_the_insertion_order() -> None:
    base = unit_vectors(3, 8, seed=5)
    # Rows 0..6 are copies of one vector, so any of them has six neighbours tied at cosine 1,
    # more than k + 1: the tie crosses the k-th place and the rows beyond faiss's first answer.
    vectors = np.vstack([np.repeat(base[:1], 7, axis=0), base[1:]]).astype(np.float32)
    index = SolvedIndex(vectors)
    index.add([6, 5, 4, 8, 3, 2, 1, 7])
    got = index.search([0, 6, 2], 3)
    assert [[r for r, _ in found] for found in got] == [[1, 2, 3], [1, 2, 3], [1, 3, 4]]
    np.testing.assert_allclose([s for _, s in got[0]], [1.0, 1.0, 1.0], atol=1e-5)


def test_a_long_tie_is_followed_to_its_end() -> None:
    base = unit_vectors(40, 8, seed=6)
    vectors = np.vstack([np.repeat(base[:1], 60, axis=0), base[1:]]).astype(np.float32)
    order = list(range(len(vectors)))
    random.Random(3).shuffle(order)
    index = SolvedIndex(vectors)
    index.add(order)
    got = index.search([0, 59, 70], 4)
    assert [r for r, _ in got[0]] == [1, 2, 3, 4]
    assert [r for r, _ in got[1]] == [0, 1, 2, 3]
    assert_same_neighbours(got[2], brute_force(vectors, order, 70, 4))


def test_similar_solved_maps_each_query() -> None:
    vectors = unit_vectors(50, 16, seed=6)
    index = SolvedIndex(vectors)
    index.add(range(0, 50, 2))
    got = similar_solved(index, [1, 3, 4], 4)
    assert set(got) == {1, 3, 4}
    for q, found in got.items():
        assert_same_neighbours(found, brute_force(vectors, range(0, 50, 2), q, 4))


def brute_force_fixed(vectors: FloatArray, p: int) -> npt.NDArray[np.int64]:
    n = vectors.shape[0]
    out = np.full((n, p), -1, dtype=np.int64)
    for q in range(n):
        rows = [r for r, _ in brute_force(vectors, range(n), q, p)]
        out[q, : len(rows)] = rows
    return out


def test_fixed_neighbours_matches_brute_force() -> None:
    vectors = unit_vectors(200, 24, seed=7)
    got = fixed_neighbours(vectors, 4)
    assert got.shape == (200, 4)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, brute_force_fixed(vectors, 4))


def test_fixed_neighbours_pads_small_sets() -> None:
    vectors = unit_vectors(3, 8, seed=8)
    got = fixed_neighbours(vectors, 4)
    assert got.shape == (3, 4)
    np.testing.assert_array_equal(got, brute_force_fixed(vectors, 4))
    assert (got[:, 2:] == -1).all()
    assert fixed_neighbours(unit_vectors(1, 8), 2).tolist() == [[-1, -1]]


def test_random_solved_excludes_query_and_is_distinct() -> None:
    solved = list(range(0, 40, 2))
    rng = random.Random(0)
    for _ in range(200):
        query = rng.choice(solved)
        picked = random_solved(solved, query, 5, rng)
        assert len(picked) == 5
        assert len(set(picked)) == 5
        assert query not in picked
        assert set(picked) <= set(solved)


def test_random_solved_with_few_solved_returns_all_others() -> None:
    rng = random.Random(0)
    assert sorted(random_solved([1, 2, 3], 2, 5, rng)) == [1, 3]
    assert sorted(random_solved([1, 2, 3], 9, 5, rng)) == [1, 2, 3]
    assert random_solved([4], 4, 3, rng) == []
    assert random_solved([1, 2], 9, 0, rng) == []


def test_random_solved_is_deterministic_and_covers_all_rows() -> None:
    solved = list(range(30))
    first = [random_solved(solved, 7, 3, random.Random(42)) for _ in range(3)]
    assert first[0] == first[1] == first[2]
    rng = random.Random(1)
    seen = {r for _ in range(500) for r in random_solved(solved, 7, 3, rng)}
    assert seen == set(solved) - {7}


class CountingEmbedder:
    """A fake embedder that records how many texts it embedded, in how many calls."""

    def __init__(self, name: str = "fake", dim: int = 6, batch_size: int = 4) -> None:
        self.name = name
        self.dim = dim
        self.batch_size = batch_size
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> FloatArray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, len(text) % self.dim] = 1.0
        return out


IDS = [f"q{i}" for i in range(10)]
TEXTS = [f"question {'x' * i}" for i in range(10)]


def test_cache_computes_once_then_loads(tmp_path: Path) -> None:
    path = tmp_path / "run" / "embeddings.npy"
    embedder = CountingEmbedder()
    first = cached_embeddings(path, IDS, TEXTS, embedder)
    assert embedder.calls == [4, 4, 2]  # batches of batch_size
    assert first.shape == (10, 6)
    assert first.dtype == np.float32
    assert path.exists()
    assert json.loads(path.with_suffix(".json").read_text())["embedder"] == "fake"
    second = cached_embeddings(path, IDS, TEXTS, embedder)
    assert embedder.calls == [4, 4, 2]
    np.testing.assert_array_equal(first, second)
    assert sorted(p.name for p in path.parent.iterdir()) == ["embeddings.json", "embeddings.npy"]


@pytest.mark.parametrize(
    ("ids", "texts", "name"),
    [
        (IDS, [*TEXTS[:-1], "another question"], "fake"),
        ([*IDS[:-1], "other"], TEXTS, "fake"),
        (IDS[:-1], TEXTS[:-1], "fake"),
        (IDS, TEXTS, "other-embedder"),
    ],
)
def test_cache_recomputes_on_mismatch(
    tmp_path: Path, ids: list[str], texts: list[str], name: str
) -> None:
    path = tmp_path / "embeddings.npy"
    cached_embeddings(path, IDS, TEXTS, CountingEmbedder())
    embedder = CountingEmbedder(name=name)
    got = cached_embeddings(path, ids, texts, embedder)
    assert sum(embedder.calls) == len(texts)
    np.testing.assert_array_equal(got, embedder.embed(texts))
    # The new contents are what the cache now holds.
    again = CountingEmbedder(name=name)
    cached_embeddings(path, ids, texts, again)
    assert again.calls == []


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "sidecar", "deep sidecar"])
def test_cache_recomputes_a_damaged_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "embeddings.npy"
    want = cached_embeddings(path, IDS, TEXTS, CountingEmbedder())
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a numpy file")
    elif damage == "flip":  # a valid header over changed numbers
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    elif damage == "sidecar":
        path.with_suffix(".json").write_text("{not json")
    else:  # nested past Python's recursion limit
        path.with_suffix(".json").write_text("[" * 200_000 + "]" * 200_000)
    embedder = CountingEmbedder()
    got = cached_embeddings(path, IDS, TEXTS, embedder)
    assert sum(embedder.calls) == 10
    np.testing.assert_array_equal(got, want)


def test_cache_rejects_mismatched_lengths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ids"):
        cached_embeddings(tmp_path / "e.npy", IDS, TEXTS[:3], CountingEmbedder())


def test_an_embeddings_cache_that_cannot_be_written_costs_nothing_but_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import errno

    import ttc.retrieval._cache as cache_module

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_module, "_write_atomic", full)
    embedder = LexicalEmbedder(dim=32)
    path = tmp_path / "embeddings.npy"
    vectors = cached_embeddings(path, ["a", "b"], ["one two", "three four"], embedder)
    assert vectors.shape == (2, 32)
    assert "could not cache the embeddings" in caplog.text
    assert not path.exists()
