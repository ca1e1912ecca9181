"""The FAISS index of solved questions: exact cosine search over a growing set of rows.

A row is a question's position in the run's item list; the engine maps ids to rows. Vectors are
L2-normalised, so the inner product of `IndexFlatIP` is the cosine similarity.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import faiss
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    # Annotations only: at run time ttc.engine imports this package, not the reverse.
    from ttc.engine import FloatArray

Neighbours = list[tuple[int, float]]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """FAISS on one OpenMP thread for the body, then as the host left it.

    A one-query search is several times faster on one thread (OpenMP's start-up and
    synchronisation cost more than its arithmetic: 3.8 s instead of 10.9 s for the 3,300 of an
    adaptive round over 100,000 questions, 2 cores), while a batch of queries gains from every
    thread. OpenMP keeps the count per thread, so it is set and put back in the thread that
    searches (a worker thread of `asyncio.to_thread`, in a run); the process's stays the host's.
    """
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def as_matrix(vectors: FloatArray) -> FloatArray:
    """Return `vectors` as a C-contiguous float32 (n, dim) matrix, copying only when needed."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected an (n, dim) matrix of vectors, got shape {matrix.shape}")
    return matrix


class SolvedIndex:
    """Exact cosine top-k over the solved questions, which are added as they get solved."""

    def __init__(self, vectors: FloatArray) -> None:
        # The full matrix of every question's embedding: queries and additions are rows of it.
        self._vectors = as_matrix(vectors)
        self._index = faiss.IndexFlatIP(self._vectors.shape[1])
        self._rows: list[int] = []  # faiss id -> row, in insertion order
        self._members: set[int] = set()
        self._labels: npt.NDArray[np.int64] | None = None  # array form of _rows, built lazily

    @property
    def vectors(self) -> FloatArray:
        """The (n, dim) matrix of all questions' embeddings."""
        return self._vectors

    @property
    def rows(self) -> tuple[int, ...]:
        """The indexed rows, in the order they were added."""
        return tuple(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, row: object) -> bool:
        return row in self._members

    def add(self, rows: Iterable[int]) -> int:
        """Index these rows; rows already indexed are ignored. Returns how many were new."""
        new: list[int] = []
        n = self._vectors.shape[0]
        for raw in rows:
            row = int(raw)
            if not 0 <= row < n:
                raise IndexError(f"row {row} out of range for {n} questions")
            if row not in self._members:
                self._members.add(row)
                new.append(row)
        if new:
            self._index.add(self._vectors[new])
            self._rows.extend(new)
            self._labels = None
        return len(new)

    def search(self, query_rows: Sequence[int], k: int) -> list[Neighbours]:
        """Each query row's top-k indexed rows other than itself, as (row, cosine), best first.

        Ties are ordered by row, also at the k-th place, so results do not depend on the order in
        which rows were added.
        """
        queries = [int(q) for q in query_rows]
        n = self._vectors.shape[0]
        for q in queries:
            if not 0 <= q < n:
                raise IndexError(f"query row {q} out of range for {n} questions")
        if k <= 0 or not self._rows or not queries:
            return [[] for _ in queries]
        labels = self._row_labels()
        total = len(self._rows)
        # k + 1 to drop the query's own entry, and one more so that the k-th place is never the
        # deepest returned unless it ties with the entry after it.
        depth = min(k + 2, total)
        scores, ids = self._search(queries, depth)
        out: list[Neighbours] = []
        for i, q in enumerate(queries):
            found = _rank(labels, scores[i], ids[i], q)
            deeper, deepest = depth, float(scores[i][-1])
            while deeper < total and _tied_at_cut(found, deepest, k):
                # Unreturned rows may tie with the k-th: look deeper until the tie has ended.
                deeper = min(2 * deeper, total)
                row_scores, row_ids = self._search([q], deeper)
                found = _rank(labels, row_scores[0], row_ids[0], q)
                deepest = float(row_scores[0][-1])
            out.append(found[:k])
        return out

    def _search(
        self, rows: list[int], depth: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """FAISS's top `depth` for these rows: a single row on one thread (`one_thread`)."""
        threads = one_thread() if len(rows) == 1 else contextlib.nullcontext()
        with threads:
            scores, ids = self._index.search(self._vectors[rows], depth)
        return scores, ids

    def _row_labels(self) -> npt.NDArray[np.int64]:
        if self._labels is None:
            self._labels = np.asarray(self._rows, dtype=np.int64)
        return self._labels


def _rank(
    labels: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float32],
    ids: npt.NDArray[np.int64],
    query_row: int,
) -> Neighbours:
    """Map faiss ids to rows, drop the query and padding, and order by (-cosine, row)."""
    found = [
        (int(labels[i]), float(s))
        for i, s in zip(ids.tolist(), scores.tolist(), strict=True)
        if i >= 0 and int(labels[i]) != query_row
    ]
    found.sort(key=lambda rs: (-rs[1], rs[0]))
    return found


def _tied_at_cut(found: Neighbours, deepest: float, k: int) -> bool:
    """Whether the k-th result scores the same as the deepest one faiss returned."""
    return len(found) >= k and found[k - 1][1] == deepest
