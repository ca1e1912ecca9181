"""The neighbourhood of a run that embeds nothing: its own module, free of numpy and FAISS, so
that a run whose method retrieves nothing (`unif`, random demonstrations) never loads them."""

from __future__ import annotations

from collections.abc import Sequence

from ttc.engine.contract import DemoPlan

__all__ = ["NoRetrieval"]


class NoRetrieval:
    """For interventions that need no embeddings (random demonstrations)."""

    def similar_solved(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("similar neighbours need embeddings")

    def fixed(self, rows: Sequence[int], p: int) -> DemoPlan:
        raise RuntimeError("fixed neighbours need embeddings")
