"""Retrieval: embedding cache, the FAISS index of solved questions, neighbour selection."""

from ttc.retrieval._cache import cached_embeddings
from ttc.retrieval._index import SolvedIndex
from ttc.retrieval._kinds import EXACT_UP_TO, KINDS, IndexSpec, index_spec
from ttc.retrieval._select import fixed_neighbours, random_solved, similar_solved

__all__ = [
    "EXACT_UP_TO",
    "KINDS",
    "IndexSpec",
    "SolvedIndex",
    "cached_embeddings",
    "fixed_neighbours",
    "index_spec",
    "random_solved",
    "similar_solved",
]
