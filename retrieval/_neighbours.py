"""The engine's view of retrieval: neighbours among questions that have a ỹ (the demonstration
pool: the solved questions under ground truth; see `ttc.engine.strategy._judges` for the others).

Question embeddings are computed once per run (and cached in the run directory); the FAISS index
of solved questions grows at each round barrier, never within a round, so a round's prompts do
not depend on the order in which its samples landed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt

from ttc.engine.contract import (
    ConfigError,
    DemoPlan,
    Embedder,
    EmbedderSpec,
    FloatArray,
    RunState,
)
from ttc.retrieval._cache import cached_embeddings
from ttc.retrieval._index import SolvedIndex
from ttc.retrieval._kinds import index_spec
from ttc.retrieval._lexical import LexicalEmbedder
from ttc.retrieval._select import fixed_neighbours, similar_solved

log = logging.getLogger("ttc")


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


async def neighbourhood(
    state: RunState, embedder: Embedder, cache: Path | None, index: str = "flat"
) -> Retrieval:
    """The run's retrieval over the questions' embeddings, computed (or read from `cache`, the
    run directory's file) and indexed in threads while the warm-up round runs; nothing is in its
    index yet (`Retrieval.sync`). `index` is the kind asked for (RunConfig.index)."""
    ids = [item.id for item in state.items]
    texts = [item.question for item in state.items]
    if cache is not None:
        vectors = await asyncio.to_thread(cached_embeddings, cache, ids, texts, embedder)
    else:
        vectors = await asyncio.to_thread(embedder.embed, texts)
    del ids, texts
    return await asyncio.to_thread(Retrieval, state, vectors, index)


class Retrieval:
    """Neighbourhoods over one run's question embeddings (implements `Neighbourhood`).

    The solved questions join the index at each adaptive round's start (`sync`). With an
    approximate index the vectors are kept as float16 (half the memory: 0.5 GB at a million
    questions of 256 dimensions), as the index itself keeps them.
    """

    def __init__(self, state: RunState, vectors: FloatArray, index: str = "flat") -> None:
        if vectors.shape[0] != state.n:
            raise ValueError(f"{vectors.shape[0]} embeddings for {state.n} questions")
        self.state = state
        # `index`: the kind asked for (RunConfig.index); `auto` chooses by the number of questions.
        self.spec = index_spec(index, state.n)
        self.index = SolvedIndex(vectors, self.spec)
        self.vectors = self.index.vectors
        self._fixed: npt.NDArray[np.int64] | None = None

    def sync(self) -> None:
        """Index every question in the demonstration pool so far (before each adaptive round)."""
        self.index.add([row for row in self.state.demo_rows() if row not in self.index])

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        if p == 0 or len(self.index) == 0:
            return {}
        # The index's lists as they are (no copy: 666,000 of them in a round at a million).
        return cast(DemoPlan, similar_solved(self.index, rows, p))

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        if p == 0:
            return {}
        if self._fixed is None or self._fixed.shape[1] != p:
            # The paper's algorithm box: neighbours fixed once among all questions.
            matrix = np.asarray(self.vectors, dtype=np.float32)  # (a copy only from float16)
            self._fixed = fixed_neighbours(matrix, p, self.spec)
        plan: DemoPlan = {}
        for row in rows:
            plan[row] = [
                (int(r), self.index.cosine(row, int(r)))
                for r in self._fixed[row]
                if r >= 0 and self.state.has_demo(int(r))
            ]
        return plan
