"""Embedders: the local MiniLM model, the lexical one (the engine's), OpenAI's and Gemini's APIs."""

from ttc.adapters.embedders._embedders import make_embedder
from ttc.adapters.embedders._minilm import MiniLMEmbedder, minilm_available
from ttc.adapters.embedders._remote_embed import EmbedOptions, GeminiEmbedder, OpenAIEmbedder
from ttc.retrieval import LexicalEmbedder

__all__ = [
    "EmbedOptions",
    "GeminiEmbedder",
    "LexicalEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
    "minilm_available",
]
