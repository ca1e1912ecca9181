"""Which solved questions become a question's demonstrations, for the three intervention modes.

similar: the top-p most similar solved questions, from the growing `SolvedIndex` (the method);
fixed: each question's top-p most similar questions of the whole set, computed once (the paper's
algorithm box for fixed demonstrations); random: p solved questions drawn uniformly (Ours-Rand).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ttc.retrieval._index import Neighbours, SolvedIndex, as_matrix
from ttc.retrieval._kinds import IndexSpec

if TYPE_CHECKING:
    # Annotations only: at run time ttc.engine imports this package, not the reverse.
    from ttc.engine.contract import FloatArray


def similar_solved(index: SolvedIndex, query_rows: Sequence[int], p: int) -> dict[int, Neighbours]:
    """Each query row's top-p most similar solved rows as (row, cosine), best first."""
    rows = [int(q) for q in query_rows]
    return dict(zip(rows, index.search(rows, p), strict=True))


def fixed_neighbours(
    vectors: FloatArray, p: int, spec: IndexSpec | None = None
) -> npt.NDArray[np.int64]:
    """An (n, p) matrix: each row's top-p most similar other rows, best first, padded with -1
    (searched with an index of `spec`, exact by default)."""
    matrix = as_matrix(vectors)
    n = matrix.shape[0]
    out = np.full((n, max(p, 0)), -1, dtype=np.int64)
    if n == 0 or p <= 0:
        return out
    # A temporary index over every row gives the same search and tie order as the solved one.
    index = SolvedIndex(matrix, spec)
    index.add(range(n))
    for row, found in enumerate(index.search(range(n), p)):
        out[row, : len(found)] = [r for r, _ in found]
    return out


def random_solved(
    solved_rows: Sequence[int], query_row: int, p: int, rng: random.Random
) -> list[int]:
    """p distinct solved rows other than the query, uniformly at random (all of them if fewer).

    `solved_rows` must hold distinct rows. Drawing p + 1 and dropping the query (or the extra draw)
    keeps every p-subset of the other rows equally likely, in O(p) rather than O(len(solved_rows)).
    """
    if p <= 0:
        return []
    drawn = rng.sample(solved_rows, min(p + 1, len(solved_rows)))
    picked = [int(r) for r in drawn if int(r) != query_row]
    return picked[:p]
