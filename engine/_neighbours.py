"""The engine's view of retrieval: neighbours among questions that have a ỹ (the demonstration
pool: the solved questions under ground truth; see `ttc.engine.strategy._judges` for the others).

Question embeddings are computed once per run (and cached in the run directory); the FAISS index
of solved questions grows at each round barrier, never within a round, so a round's prompts do
not depend on the order in which its samples landed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ttc.engine._errors import ConfigError
from ttc.engine._lexical import LexicalEmbedder
from ttc.engine._state import RunState
from ttc.engine._types import Embedder, FloatArray
from ttc.engine.strategy._contract import DemoPlan
from ttc.retrieval import SolvedIndex, cached_embeddings, fixed_neighbours, similar_solved

log = logging.getLogger("ttc")

EmbedderSpec = Embedder | Callable[[], Embedder] | None


def resolve_embedder(spec: EmbedderSpec) -> Embedder:
    """The run's embedder: the one given, or built by the factory given (only when the method
    needs vectors, and after the run's log is attached), or the lexical default."""
    if isinstance(spec, str):
        raise ConfigError(
            f"embedder={spec!r}: the engine takes an Embedder; build one by name with "
            f"ttc.adapters.make_embedder({spec!r})"
        )
    if spec is None:
        # No model and no network: the library's default. `ttc run --embedder auto` (and
        # ttc.adapters.make_embedder("auto")) prefer the MiniLM model.
        log.info("no embedder given: using the lexical embedder")
        return LexicalEmbedder()
    return spec if isinstance(spec, Embedder) else spec()


async def embed_questions(state: RunState, embedder: Embedder, cache: Path | None) -> FloatArray:
    """The questions' embeddings, in a thread (cached in `cache`, the run directory's file)."""
    ids = [item.id for item in state.items]
    texts = [item.question for item in state.items]
    if cache is not None:
        return await asyncio.to_thread(cached_embeddings, cache, ids, texts, embedder)
    return await asyncio.to_thread(embedder.embed, texts)


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


class NoRetrieval:
    """For interventions that need no embeddings (random demonstrations)."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("similar neighbours need embeddings")

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("fixed neighbours need embeddings")
