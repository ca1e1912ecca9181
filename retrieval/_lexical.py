"""A dependency-free lexical embedder: signed feature hashing of word unigrams and bigrams.

The engine's default embedder when none is given (it needs no model and no network); the CLI's
`--embedder auto` prefers the MiniLM model (`ttc.adapters.make_embedder`).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from hashlib import blake2b
from itertools import pairwise

import numpy as np

from ttc.engine.contract import ConfigError, FloatArray

__all__ = ["LexicalEmbedder"]

_WORD = re.compile(r"\w+")


def _slot(feature: str) -> tuple[int, int]:
    """A stable 64-bit hash of `feature`: (bucket hash, sign bit)."""
    # blake2b, not hash(): Python's str hash is salted per process, and vectors must agree across
    # processes and runs.
    h = int.from_bytes(blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h & 0xFFFFFFFF, (h >> 32) & 1


class _StepAside:
    """Pure Python holds the GIL: in a worker thread (the engine embeds a test set in one while
    a round runs), an event loop's thread would wait up to the interpreter's switch interval
    (5 ms) each time it needs the GIL back. So, off the loop, the work steps aside for 0.1 ms
    after each millisecond, long enough for a waiting thread to take the GIL."""

    __slots__ = ("off_loop", "since")

    def __init__(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.off_loop = True
        else:
            self.off_loop = False
        self.since = time.perf_counter()

    def now_and_then(self) -> None:
        if self.off_loop and time.perf_counter() - self.since >= 0.001:
            time.sleep(0.0001)
            self.since = time.perf_counter()


class LexicalEmbedder:
    """Hashes lowercase word unigrams and bigrams into `dim` signed buckets, weighted 1 + log tf."""

    name = "lexical"

    # 256 signed buckets keep collisions rare for question-length texts, and keep the run's
    # vectors (and FAISS's copy of them) at 1 KB per question: 200 MB less at 100,000 questions.
    def __init__(self, dim: int = 256, batch_size: int = 256) -> None:
        if dim < 1:
            raise ConfigError(f"dim: must be >= 1, got {dim}")
        if batch_size < 1:
            raise ConfigError(f"batch_size: must be >= 1, got {batch_size}")
        self.dim = dim
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """L2-normalised float32 rows, one per text; a text without words gives a zero row."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        aside = _StepAside()
        for row, text in enumerate(texts):
            aside.now_and_then()
            words = _WORD.findall(text.lower())
            features = Counter(words)
            features.update(f"{a} {b}" for a, b in pairwise(words))
            vec = out[row]
            for feature, tf in features.items():
                bucket, sign = _slot(feature)
                weight = 1.0 + math.log(tf)  # sublinear: a repeated word is evidence, not proof
                vec[bucket % self.dim] += -weight if sign else weight
            norm = float(np.linalg.norm(vec))
            if norm > 0.0:  # colliding signs can cancel to zero: leave such a row zero, not NaN
                vec /= norm
        return out
