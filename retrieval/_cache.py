"""A run's cache of question embeddings: a .npy matrix and a .json sidecar that says what it holds.

The sidecar names the embedder, its dimension, a digest of the questions (ids and texts) and a
digest of the .npy bytes. It is the commit marker: it is removed before the matrix is rewritten
and written last, so a crash in between leaves no sidecar and the next run recomputes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ttc.engine.contract import Embedder, FloatArray

_log = logging.getLogger(__name__)

_FORMAT = 1
_CHUNK = 1 << 24


def cached_embeddings(
    path: Path, ids: Sequence[str], texts: Sequence[str], embedder: Embedder
) -> FloatArray:
    """The questions' embeddings: loaded from `path` if it holds them, else computed and saved."""
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
    if path.suffix == ".json":
        raise ValueError(f"embedding cache {path} must not end in .json: that is its sidecar")
    sidecar = path.with_suffix(".json")
    meta: dict[str, Any] = {
        "format": _FORMAT,
        "embedder": embedder.name,
        "dim": int(embedder.dim),
        "n": len(texts),
        "questions_sha256": _questions_digest(ids, texts),
    }
    cached = _load(path, sidecar, meta)
    if cached is not None:
        return cached
    vectors = _embed_all(texts, embedder)
    try:
        _save(path, sidecar, meta, vectors)
    except OSError as exc:
        # A cache: a full disk costs a resume the embedding, never the run (the journal's own
        # write error stops the run, with the file it could not write).
        _log.warning("could not cache the embeddings in %s (%s); this run keeps them", path, exc)
    return vectors


def _questions_digest(ids: Sequence[str], texts: Sequence[str]) -> str:
    """A digest of the ids and texts in order; lengths are prefixed so no two lists collide."""
    h = hashlib.sha256()
    for value in (*ids, *texts):
        data = value.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _load(path: Path, sidecar: Path, meta: dict[str, Any]) -> FloatArray | None:
    """The cached matrix if the sidecar matches `meta` and the file is intact, else None.

    The file is hashed in chunks and then loaded straight into its array: at a million
    questions a whole-file copy would cost as much memory as the matrix.
    """
    try:
        stored = json.loads(sidecar.read_text(encoding="utf-8"))
        digest = _file_digest(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # a sidecar nested too deep included
        _log.warning("embedding cache %s unreadable (%s); recomputing", path, exc)
        return None
    if not isinstance(stored, dict) or {k: stored.get(k) for k in meta} != meta:
        _log.info(
            "embedding cache %s is for other questions or another embedder; recomputing", path
        )
        return None
    if stored.get("data_sha256") != digest:
        _log.warning("embedding cache %s is corrupt; recomputing", path)
        return None
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        _log.warning("embedding cache %s is corrupt (%s); recomputing", path, exc)
        return None
    if vectors.dtype != np.float32 or vectors.shape != (meta["n"], meta["dim"]):
        _log.warning("embedding cache %s has shape %s; recomputing", path, vectors.shape)
        return None
    result: FloatArray = vectors
    return result


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _embed_all(texts: Sequence[str], embedder: Embedder) -> FloatArray:
    """Embed in batches of the embedder's batch size, into one preallocated matrix."""
    n, dim = len(texts), int(embedder.dim)
    out = np.empty((n, dim), dtype=np.float32)
    step = max(1, int(embedder.batch_size))
    for start in range(0, n, step):
        batch = list(texts[start : start + step])
        vectors = embedder.embed(batch)
        if vectors.shape != (len(batch), dim):
            raise ValueError(
                f"embedder {embedder.name!r} returned shape {vectors.shape} "
                f"for {len(batch)} texts of dimension {dim}"
            )
        out[start : start + len(batch)] = vectors
    return out


def _save(path: Path, sidecar: Path, meta: dict[str, Any], vectors: FloatArray) -> None:
    """Write the matrix, then the sidecar, each atomically; the matrix is written and hashed
    in chunks (numpy writes a non-file object 16 MB at a time), never copied whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sidecar.unlink(missing_ok=True)
    h = hashlib.sha256()

    def write(f: BinaryIO) -> None:
        np.save(_Hashing(f, h), vectors, allow_pickle=False)

    _write_atomic(path, write)
    full = {**meta, "data_sha256": h.hexdigest()}
    text = json.dumps(full, indent=2).encode("utf-8")
    _write_atomic(sidecar, lambda f: f.write(text))


class _Hashing:
    """A write-only file that hashes what goes through it."""

    def __init__(self, f: BinaryIO, h: Any) -> None:
        self._f, self._h = f, h

    def write(self, data: bytes) -> int:
        self._h.update(data)
        return self._f.write(data)


def _write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write to a temporary file in the same directory, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
