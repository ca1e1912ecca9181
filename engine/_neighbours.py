"""The engine's view of retrieval: neighbours among questions that have a ỹ (the demonstration
pool: the solved questions under ground truth; see `ttc.engine.strategy._judges` for the others).

Question embeddings are computed once per run (and cached in the run directory); the FAISS index
of solved questions grows at each round barrier, never within a round, so a round's prompts do
not depend on the order in which its samples landed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ttc.engine._state import RunState
from ttc.engine._types import FloatArray
from ttc.engine.strategy._strategy import DemoPlan
from ttc.retrieval import SolvedIndex, fixed_neighbours, similar_solved


class Retrieval:
    """Neighbourhoods over one run's question embeddings (implements `Neighbourhood`)."""

    def __init__(self, state: RunState, vectors: FloatArray) -> None:
        if vectors.shape[0] != state.n:
            raise ValueError(f"{vectors.shape[0]} embeddings for {state.n} questions")
        self.state = state
        self.vectors = vectors
        self.index = SolvedIndex(vectors)
        self._fixed: npt.NDArray[np.int64] | None = None
        self.sync()

    def sync(self) -> None:
        """Index every question in the demonstration pool so far (called at round barriers)."""
        self.index.add([row for row in self.state.demo_rows() if row not in self.index])

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        if p == 0 or len(self.index) == 0:
            return {}
        found = similar_solved(self.index, rows, p)
        return {row: [(r, s) for r, s in hits] for row, hits in found.items()}

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        if p == 0:
            return {}
        if self._fixed is None or self._fixed.shape[1] != p:
            # The paper's algorithm box: neighbours fixed once among all questions.
            self._fixed = fixed_neighbours(self.vectors, p)
        plan: DemoPlan = {}
        for row in rows:
            plan[row] = [
                (int(r), float(self.vectors[row] @ self.vectors[r]))
                for r in self._fixed[row]
                if r >= 0 and self.state.has_demo(int(r))
            ]
        return plan
