"""Which FAISS index holds the solved questions: exact (`flat`) or approximate (`ivf`, `hnsw`).

Exact search costs (questions still open) × (questions solved) dot products a round: at a million
questions, tens of minutes a round on two cores. The approximate indexes search a small part of
the solved set, and may so miss a true neighbour: they change which demonstrations a question is
shown, which is why the kind and its parameters are recorded in config.json and a resumed run
must use the same. `auto` is exact up to `EXACT_UP_TO` questions, `ivf` above.

- `flat`: `IndexFlatIP`, exact cosine (the vectors are L2-normalised).
- `ivf`: an inverted file of 2·√n cells (cosine k-means, trained once on an evenly spaced sample
  of every question's vector, so the cells do not depend on which questions get solved), vectors
  stored as float16, `nprobe` cells searched. Adds and searches are deterministic.
- `hnsw`: a navigable small-world graph (M = 32); built on one thread, because FAISS's threaded
  insertion makes the graph, and so the neighbours, depend on thread timing.

The candidates an approximate index returns are ranked by the cosine of their vectors, computed
in float32 from the float16 copy the approximate kinds keep of every question's vector (half the
memory; a cosine off by at most about 1e-3), never by the index's own approximate score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ttc.engine.contract import INDEXES

# The kinds `--index` takes; the config checks them before any work (`RunConfig.index`).
KINDS = INDEXES
# `auto` searches exactly up to this many questions (100,000 questions: an exact adaptive round
# over them takes seconds here), approximately above.
EXACT_UP_TO = 100_000
_HNSW_M = 32


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """The kind of index and its parameters, as config.json records them."""

    kind: str = "flat"
    # ivf: cells, cells searched per query, and how many vectors train the cells.
    nlist: int = 0
    nprobe: int = 0
    train_size: int = 0
    # hnsw: links per node, and the search's candidate list (at least the depth searched).
    m: int = 0
    ef_search: int = 0

    def describe(self) -> dict[str, Any]:
        """The kind and the parameters that apply to it."""
        if self.kind == "ivf":
            return {
                "kind": "ivf",
                "nlist": self.nlist,
                "nprobe": self.nprobe,
                "train_size": self.train_size,
                "storage": "float16",
            }
        if self.kind == "hnsw":
            return {"kind": "hnsw", "m": self.m, "ef_search": self.ef_search}
        return {"kind": self.kind}

    @property
    def exact(self) -> bool:
        return self.kind == "flat"


def index_spec(kind: str, n: int) -> IndexSpec:
    """The index for `n` questions: `kind` as asked (`auto`: by size), with its parameters."""
    if kind not in KINDS:
        raise ValueError(f"index kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "auto":
        kind = "flat" if n <= EXACT_UP_TO else "ivf"
    if kind == "ivf":
        # Cells of about √n/2 vectors; 64 training vectors a cell is k-means' usual floor.
        nlist = max(1, min(n, round(2 * math.sqrt(max(n, 1)))))
        return IndexSpec("ivf", nlist=nlist, nprobe=min(nlist, 32), train_size=min(n, 64 * nlist))
    if kind == "hnsw":
        return IndexSpec("hnsw", m=_HNSW_M, ef_search=64)
    return IndexSpec("flat")


def new_index(spec: IndexSpec, dim: int) -> Any:
    """An empty FAISS index of this spec over `dim`-dimensional vectors (cosine as inner
    product). An ivf index must then be trained (`train_rows`) before vectors are added."""
    import faiss  # here, not at the top: `index_spec` is read by runs that never search

    if spec.kind == "ivf":
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, spec.nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )
        # (FAISS's Python wrapper keeps the quantizer alive as long as the index.)
        # Small sets (an ivf asked for by hand) train on what there is, without FAISS's warning.
        index.cp.min_points_per_centroid = 1
        index.cp.seed = 1234  # k-means' seed: the same cells on every run and every resume
        index.nprobe = spec.nprobe
        return index
    if spec.kind == "hnsw":
        graph = faiss.IndexHNSWFlat(dim, spec.m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efSearch = spec.ef_search
        return graph
    return faiss.IndexFlatIP(dim)


def train_rows(spec: IndexSpec, n: int) -> list[int]:
    """The rows an ivf index is trained on: `train_size` of the n, evenly spaced."""
    if spec.kind != "ivf" or n == 0:
        return []
    step = n / spec.train_size
    return sorted({min(n - 1, int(i * step)) for i in range(spec.train_size)})
