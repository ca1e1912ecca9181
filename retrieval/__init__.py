"""Retrieval: the embedding cache, the lexical embedder, the FAISS index of solved questions,
neighbour selection and the run's demonstration plan."""

from ttc.retrieval._cache import cached_embeddings
from ttc.retrieval._index import SolvedIndex
from ttc.retrieval._kinds import EXACT_UP_TO, KINDS, IndexSpec, index_spec
from ttc.retrieval._lexical import LexicalEmbedder
from ttc.retrieval._neighbours import (
    EmbedderSpec,
    NoRetrieval,
    Retrieval,
    neighbourhood,
    resolve_embedder,
)
from ttc.retrieval._select import fixed_neighbours, random_solved, similar_solved

__all__ = [
    "EXACT_UP_TO",
    "KINDS",
    "EmbedderSpec",
    "IndexSpec",
    "LexicalEmbedder",
    "NoRetrieval",
    "Retrieval",
    "SolvedIndex",
    "cached_embeddings",
    "fixed_neighbours",
    "index_spec",
    "neighbourhood",
    "random_solved",
    "resolve_embedder",
    "similar_solved",
]
