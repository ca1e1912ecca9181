"""What a host needs of its process and its type checker: FAISS's thread count left as the host
set it, and every type the engine's public signatures name importable from `ttc.engine`."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import ttc.engine
from ttc.engine import Engine, EngineOptions, RunObserver, RunResult

ROOT = Path(__file__).resolve().parents[2]

# In a process of its own: the OpenMP thread count is per thread, and this one's may have been
# changed by whatever ran before. OMP_NUM_THREADS=3 makes the host's count differ from 1 on any
# machine. One-query searches (a tie followed deeper) run on one thread, batches on the host's.
FAISS_PROGRAM = """
import asyncio, sys
from concurrent.futures import ThreadPoolExecutor
import faiss
import numpy as np

counts = {"main before": faiss.omp_get_max_threads()}
import ttc.retrieval
import ttc.engine
counts["main after import"] = faiss.omp_get_max_threads()

from ttc.adapters import ReasoningGymSuite, SimConfig, SimProvider
from ttc.engine import Engine, RunConfig
from ttc.retrieval import LexicalEmbedder
from ttc.retrieval import SolvedIndex


async def run(out):
    suite = ReasoningGymSuite(per_task=3)
    items = suite.items()
    provider = SimProvider(suite, items, SimConfig(seed=2))
    config = RunConfig(method="adpt", rounds=3, verifier_workers=0)
    async with Engine(provider, suite, config, embedder=LexicalEmbedder(), out_dir=out) as engine:
        await engine.run(items)
    return await asyncio.to_thread(faiss.omp_get_max_threads)


counts["worker after a run"] = asyncio.run(run(sys.argv[1]))
counts["main after a run"] = faiss.omp_get_max_threads()

seen = []


class Watched:
    def __init__(self, inner):
        self.inner = inner

    def add(self, x):
        self.inner.add(x)

    def search(self, x, k):
        seen.append((len(x), faiss.omp_get_max_threads()))
        return self.inner.search(x, k)


def tied_search():
    index = SolvedIndex(np.ones((12, 4), dtype=np.float32) / 2)
    index._index = Watched(index._index)
    index.add(range(10))
    index.search([10, 11], 1)  # every row ties: each query is followed deeper, alone
    return faiss.omp_get_max_threads()


with ThreadPoolExecutor(1) as worker:
    counts["worker before a search"] = worker.submit(faiss.omp_get_max_threads).result()
    counts["worker after a search"] = worker.submit(tied_search).result()
    counts["same worker later"] = worker.submit(faiss.omp_get_max_threads).result()
print(counts)
print(seen)
"""


def test_faiss_threads_are_the_hosts_after_import_and_after_a_runs_searches(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "3", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", FAISS_PROGRAM, str(tmp_path / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    counts_line, seen_line = proc.stdout.strip().splitlines()
    counts = ast.literal_eval(counts_line)
    assert counts == dict.fromkeys(counts, 3)
    seen: list[tuple[int, int]] = ast.literal_eval(seen_line)
    # The batch of two queries on the host's threads; each query followed deeper on one.
    assert seen[0] == (2, 3)
    assert len(seen) > 1
    assert set(seen[1:]) == {(1, 1)}


def _classes(hint: Any, into: set[type]) -> set[type]:
    """Every class a type hint names, through unions, generics and Callable's arguments."""
    if isinstance(hint, type):
        into.add(hint)
    for arg in typing.get_args(hint):
        for inner in arg if isinstance(arg, list) else [arg]:
            _classes(inner, into)
    return into


def _public_hints(cls: type) -> dict[str, Any]:
    """The hints of `cls`'s fields, `__init__`, public methods and properties, by name."""
    out: dict[str, Any] = {}
    if hasattr(cls, "__dataclass_fields__"):
        out.update({f"field {k}": v for k, v in typing.get_type_hints(cls).items()})
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        func = member.fget if isinstance(member, property) else member
        if inspect.isfunction(func):
            hints = typing.get_type_hints(func)
            out.update({f"{name} {k}": v for k, v in hints.items()})
    return out


def test_every_type_in_the_engines_signatures_is_exported_from_ttc_engine() -> None:
    named: dict[type, str] = {}
    for cls in (Engine, EngineOptions, RunObserver, RunResult):
        for where, hint in _public_hints(cls).items():
            for found in _classes(hint, set()):
                named.setdefault(found, f"{cls.__name__}.{where}")
    ours = {c: where for c, where in named.items() if c.__module__.startswith("ttc.")}
    assert len(ours) > 20  # the walk reached into the signatures
    missing = {
        f"{c.__module__}.{c.__qualname__} (in {where})"
        for c, where in ours.items()
        if getattr(ttc.engine, c.__name__, None) is not c or c.__name__ not in ttc.engine.__all__
    }
    assert missing == set()
