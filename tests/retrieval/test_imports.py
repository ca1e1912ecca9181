"""What a run loads of retrieval: a method that retrieves nothing loads neither numpy nor FAISS
(a third of a second of start-up, 25 MB), and one that retrieves loads both, off the host's
loop."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

_RUN = textwrap.dedent(
    """
    import asyncio, importlib.abc, sys, threading
    import orjson

    class Where(importlib.abc.MetaPathFinder):  # which thread imports faiss (finds nothing)
        thread = None

        def find_spec(self, name, path, target=None):
            if name == "faiss" and Where.thread is None:
                Where.thread = threading.current_thread().name
            return None

    sys.meta_path.insert(0, Where())
    from ttc.engine import Completion, Engine, Item, Provider, RunConfig, Suite, Usage, Verdict

    class Echo(Provider):
        name, model = "echo", "echo"

        async def generate(self, request):
            return Completion(("The answer is 4.",), Usage(10, 5), ("stop",), 0.0, "echo")

    class Fours(Suite):
        name = "fours"

        def items(self):
            return [Item(f"q{i}", f"What is {i} + 4 - {i}?", "4") for i in range(6)]

        def warmup_prompt(self, item):
            return item.question

        def adaptive_prompt(self, item, demos):
            return item.question + "".join(d.response for d in demos)

        def judge(self, item, response):
            return Verdict(float(response.endswith("4.") and item.id != "q5"), "4")

    async def main():
        config = RunConfig(method=sys.argv[1], rounds=2, verifier_workers=0)
        async with Engine(Echo(), Fours(), config, out_dir=sys.argv[2]) as engine:
            result = await engine.run()
        loaded = {m: m in sys.modules for m in ("numpy", "faiss")}
        on_loop = Where.thread == threading.main_thread().name
        print(orjson.dumps({"coverage": result.coverage, **loaded, "on_loop": on_loop}).decode())

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(("method", "retrieves"), [("unif", False), ("adpt", True)])
def test_only_a_method_that_retrieves_loads_numpy_and_faiss(
    tmp_path: Path, method: str, retrieves: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, method, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert line["coverage"] == pytest.approx(5 / 6)  # the run ran: q5 is never right
    assert line["numpy"] is retrieves
    assert line["faiss"] is retrieves
    # Loaded in a thread: the import (40-60 ms) never holds the host's loop.
    assert line["on_loop"] is False
