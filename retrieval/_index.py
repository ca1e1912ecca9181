"""The FAISS index of solved questions: cosine search over a growing set of rows.

A row is a question's position in the run's item list; the engine maps ids to rows. Vectors are
L2-normalised, so the inner product is the cosine similarity. The index is exact (`flat`) or
approximate (`ivf`, `hnsw`: see `ttc.retrieval._kinds`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

import faiss
import numpy as np
import numpy.typing as npt

from ttc.engine.contract import FloatArray
from ttc.retrieval._kinds import IndexSpec, new_index, train_rows

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


# An approximate index is asked for this many more candidates than wanted; they are then ranked
# by their exact cosine.
_SLACK = 8
# Queries whose candidates are re-ranked exactly at once (their vectors gathered: ~40 MB at 384
# dimensions).
_CHUNK = 4096


class SolvedIndex:
    """Cosine top-k over the solved questions, which are added as they get solved."""

    def __init__(self, vectors: FloatArray, spec: IndexSpec | None = None) -> None:
        # The full matrix of every question's embedding: queries and additions are rows of it.
        # An approximate index keeps it as float16 (half the memory), and hands FAISS float32
        # rows as it needs them.
        self.spec = spec or IndexSpec()
        matrix = as_matrix(vectors)
        self._vectors = matrix if self.spec.exact else matrix.astype(np.float16)
        del matrix
        n, dim = self._vectors.shape
        self._index = new_index(self.spec, dim)
        trained = train_rows(self.spec, n)
        if trained:  # ivf: the cells, from every question's vector, before any is added
            self._index.train(self._rows_of(trained))
        self._rows: list[int] = []  # faiss id -> row, in insertion order
        self._members = np.zeros(n, dtype=bool)  # a bit per question, not a set of ints
        self._labels: npt.NDArray[np.int64] | None = None  # array form of _rows, built lazily

    @property
    def vectors(self) -> npt.NDArray[np.float32 | np.float16]:
        """The (n, dim) matrix of all questions' embeddings (float16 for an approximate index)."""
        return self._vectors

    def cosine(self, a: int, b: int) -> float:
        """The cosine similarity of two questions (rows), in float32."""
        return float(self._rows_of([a])[0] @ self._rows_of([b])[0])

    def _rows_of(self, rows: Sequence[int] | npt.NDArray[np.int64]) -> FloatArray:
        """These rows of the matrix, as the float32 FAISS takes."""
        out: FloatArray = np.ascontiguousarray(self._vectors[rows], dtype=np.float32)
        return out

    @property
    def rows(self) -> tuple[int, ...]:
        """The indexed rows, in the order they were added."""
        return tuple(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, int | np.integer) or not 0 <= row < self._members.shape[0]:
            return False
        return bool(self._members[row])

    def add(self, rows: Iterable[int]) -> int:
        """Index these rows; rows already indexed are ignored. Returns how many were new."""
        new: list[int] = []
        n = self._vectors.shape[0]
        for raw in rows:
            row = int(raw)
            if not 0 <= row < n:
                raise IndexError(f"row {row} out of range for {n} questions")
            if not self._members[row]:
                self._members[row] = True
                new.append(row)
        if new:
            # hnsw on one thread: FAISS's threaded insertion makes the graph depend on timing.
            threads = one_thread() if self.spec.kind == "hnsw" else contextlib.nullcontext()
            with threads:
                self._index.add(self._rows_of(new))
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
        if not self.spec.exact:
            return self._search_approximate(queries, k, labels)
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

    def _search_approximate(
        self, queries: list[int], k: int, labels: npt.NDArray[np.int64]
    ) -> list[Neighbours]:
        """The approximate index's candidates, ranked by exact cosine (ties by row)."""
        depth = min(k + 1 + _SLACK, len(self._rows))
        out: list[Neighbours] = []
        for start in range(0, len(queries), _CHUNK):
            chunk = queries[start : start + _CHUNK]
            _, ids = self._search(chunk, depth)
            # Padding (id -1) gathers row 0's vector; `_rank` drops it.
            rows = labels[np.maximum(ids, 0)]
            exact = np.einsum("qd,qcd->qc", self._rows_of(chunk), self._rows_of(rows))
            out += [_rank(labels, exact[i], ids[i], q)[:k] for i, q in enumerate(chunk)]
        return out

    def _search(
        self, rows: list[int], depth: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """FAISS's top `depth` for these rows: a single row on one thread (`one_thread`)."""
        threads = one_thread() if len(rows) == 1 else contextlib.nullcontext()
        with threads:
            scores, ids = self._index.search(self._rows_of(rows), depth)
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
