"""Embedders: the local MiniLM model, the lexical one (the engine's), OpenAI's and Gemini's APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttc._lazy import lazy_names

if TYPE_CHECKING:
    from ttc.adapters.embedders._embedders import make_embedder as make_embedder
    from ttc.adapters.embedders._minilm import MiniLMEmbedder as MiniLMEmbedder
    from ttc.adapters.embedders._minilm import minilm_available as minilm_available
    from ttc.adapters.embedders._remote_embed import EmbedOptions as EmbedOptions
    from ttc.adapters.embedders._remote_embed import GeminiEmbedder as GeminiEmbedder
    from ttc.adapters.embedders._remote_embed import OpenAIEmbedder as OpenAIEmbedder
    from ttc.retrieval import LexicalEmbedder as LexicalEmbedder

# Each public name, and the module it is loaded from on first use (`_lazy`).
_HOMES: dict[str, str] = {
    "EmbedOptions": "ttc.adapters.embedders._remote_embed",
    "GeminiEmbedder": "ttc.adapters.embedders._remote_embed",
    "LexicalEmbedder": "ttc.retrieval",
    "make_embedder": "ttc.adapters.embedders._embedders",
    "minilm_available": "ttc.adapters.embedders._minilm",
    "MiniLMEmbedder": "ttc.adapters.embedders._minilm",
    "OpenAIEmbedder": "ttc.adapters.embedders._remote_embed",
}

__all__ = [
    "EmbedOptions",
    "GeminiEmbedder",
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
    "minilm_available",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
