"""Retrieval: the embedding cache, the lexical embedder, the FAISS index of solved questions,
neighbour selection and the run's demonstration plan.

Its names load on first use (`ttc._lazy`): a run whose method retrieves nothing reads the index
kinds and `NoRetrieval` without loading numpy or FAISS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.retrieval._cache import cached_embeddings as cached_embeddings
    from ttc.retrieval._index import SolvedIndex as SolvedIndex
    from ttc.retrieval._kinds import EXACT_UP_TO as EXACT_UP_TO
    from ttc.retrieval._kinds import KINDS as KINDS
    from ttc.retrieval._kinds import IndexSpec as IndexSpec
    from ttc.retrieval._kinds import index_spec as index_spec
    from ttc.retrieval._lexical import LexicalEmbedder as LexicalEmbedder
    from ttc.retrieval._neighbours import Retrieval as Retrieval
    from ttc.retrieval._neighbours import neighbourhood as neighbourhood
    from ttc.retrieval._neighbours import resolve_embedder as resolve_embedder
    from ttc.retrieval._none import NoRetrieval as NoRetrieval
    from ttc.retrieval._select import fixed_neighbours as fixed_neighbours
    from ttc.retrieval._select import random_solved as random_solved
    from ttc.retrieval._select import similar_solved as similar_solved

# Each public name, and the module it is loaded from on first use.
_HOMES: dict[str, str] = {
    "cached_embeddings": "ttc.retrieval._cache",
    "EXACT_UP_TO": "ttc.retrieval._kinds",
    "fixed_neighbours": "ttc.retrieval._select",
    "index_spec": "ttc.retrieval._kinds",
    "IndexSpec": "ttc.retrieval._kinds",
    "KINDS": "ttc.retrieval._kinds",
    "LexicalEmbedder": "ttc.retrieval._lexical",
    "neighbourhood": "ttc.retrieval._neighbours",
    "NoRetrieval": "ttc.retrieval._none",
    "random_solved": "ttc.retrieval._select",
    "resolve_embedder": "ttc.retrieval._neighbours",
    "Retrieval": "ttc.retrieval._neighbours",
    "similar_solved": "ttc.retrieval._select",
    "SolvedIndex": "ttc.retrieval._index",
}

__all__ = sorted(_HOMES)

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
