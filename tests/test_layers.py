"""The import rules that keep the layers one-way, and the size of the rooms.

Inside `ttc.engine` the sub-packages come in an order (`ENGINE_ORDER`): a module may import its
own package and those before it, never one after it; `ttc.engine/__init__.py` gathers the public
API and may import them all. `ttc.retrieval` sits between `strategy` and `run`: it imports the
contract and the helpers, and `run` (and what comes after it) imports retrieval.

Across layers (adapters, retrieval, benchmarks, and the engine's sub-packages reaching the other
layers) only public names are imported: a module path with no private part, or
`ttc.engine._util`, the helpers package every layer may share (never one of its private
modules). The engine imports nothing from `ttc.adapters`; only `engine/cli/`, the composition
root, wires adapters in, by their public names.

A round's Batch API dispatcher (`run/batch/`) is handed what it needs of its round (a `Landing`,
`run/_dispatch`); it never imports the round itself (`ROUND`), which imports it. The strategy is
pure policy: it imports nothing of `send` (the role models' calls are the run's).

No library module is over `SOFT_CAP` lines but those named in `LARGE`, each with its reason; and
no `# fmt: skip` joins lines in library code (literal tables go between `# fmt: off` and
`# fmt: on`).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("engine", "adapters", "retrieval")
# Who may import whom inside the engine: each may import itself and the ones before it.
ENGINE_ORDER = ("contract", "_util", "send", "journal", "strategy", "run", "report", "cli")
# Where retrieval sits in that order: it imports up to here, and what comes after imports it.
RETRIEVAL_AFTER = "strategy"
UTIL = "ttc.engine._util"
# The round, which `run/batch/` (its Batch API dispatcher) must not import: the round imports it.
ROUND = "ttc.engine.run._round"
# The send path, which `strategy/` (pure policy) must not import.
SEND = "ttc.engine.send"
SOFT_CAP = 600
# Modules allowed past SOFT_CAP, and why. Keep this list short, and say why each is here.
LARGE: dict[str, str] = {}


def _modules(folder: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / folder).rglob("*.py"))


def _package_of(rel: Path) -> str:
    """The dotted package a file's relative imports start from."""
    if rel.parts[0] == "benchmarks":
        return "benchmarks"
    parts = rel.parent.parts
    return ".".join(("ttc", *parts))


def _imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Every module an import statement of `path` names (relative imports resolved)."""
    rel = path.relative_to(root)
    package = _package_of(rel)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            yield node.lineno, base
            for alias in node.names:  # `from ttc.engine.run import _round` names a module too
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"{base}.{alias.name}"


def _private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _public(module: str) -> bool:
    return not _private(module) or module == UTIL


def _engine_rank(module: str) -> int | None:
    """Where an engine module's sub-package sits in ENGINE_ORDER (None: `ttc.engine` itself)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[2] not in ENGINE_ORDER:
        return None
    return ENGINE_ORDER.index(parts[2])


def _rank_of_file(rel: Path) -> int | None:
    if rel.parts[0] == "retrieval":
        return ENGINE_ORDER.index(RETRIEVAL_AFTER) + 0
    if rel.parts[0] != "engine" or len(rel.parts) < 3:
        return None  # adapters, benchmarks, engine/__init__.py
    return ENGINE_ORDER.index(rel.parts[1])


def _check(rel: Path, module: str) -> str | None:
    """Why importing `module` from the file `rel` breaks a rule, or None."""
    layer = rel.parts[0]
    mine = _rank_of_file(rel)
    in_cli = rel.parts[:2] == ("engine", "cli")
    if layer == "engine" and not in_cli and module.startswith("ttc.adapters"):
        return "the engine imports no adapter"
    if module == "ttc.engine" or module.startswith("ttc.engine."):
        theirs = _engine_rank(module)
        if mine is not None and theirs is not None and theirs > mine:
            return f"{ENGINE_ORDER[theirs]} comes after {ENGINE_ORDER[mine]}"
        if layer != "engine" and not _public(module):
            return "a private module of another layer"
        if layer == "retrieval" and not module.startswith(("ttc.engine.contract", UTIL)):
            return "retrieval imports only the contract and the helpers"
    elif module.startswith("ttc.retrieval"):
        if layer == "engine" and mine is not None and mine <= ENGINE_ORDER.index(RETRIEVAL_AFTER):
            return f"retrieval comes after {ENGINE_ORDER[mine]}"
        if layer != "retrieval" and _private(module):
            return "a private module of another layer"
    elif module.startswith("ttc.adapters") and layer != "adapters" and _private(module):
        return "a private module of another layer"
    return None


def _check_rooms(rel: Path, module: str) -> str | None:
    """Why a file may not import `module` though the order allows it, or None: `run/batch/`
    never imports the round; `strategy/` never imports the send path; no sub-package but the CLI
    imports `ttc.engine` itself, which gathers them all."""
    in_package = rel.parts[0] == "engine" and len(rel.parts) > 2
    if module == "ttc.engine" and in_package and rel.parts[1] != "cli":
        return "the top level gathers every sub-package: import from the sub-package"
    if rel.parts[:3] == ("engine", "run", "batch") and (
        _within(module, ROUND) or module == "ttc.engine.run"
    ):
        return "run/batch is handed a Landing, never the round"
    if rel.parts[:2] == ("engine", "strategy") and _within(module, SEND):
        return "the strategy is pure policy: it sends nothing"
    return None


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _violations(root: Path = ROOT) -> list[str]:
    found = []
    for folder in (*LAYERS, "benchmarks"):
        for path in _modules(folder, root):
            rel = path.relative_to(root)
            for line, module in _imports(path, root):
                if module.startswith("ttc") and (
                    why := _check(rel, module) or _check_rooms(rel, module)
                ):
                    found.append(f"{rel}:{line}: {module} ({why})")
    return found


def test_layers_import_one_way_and_only_public_names() -> None:
    assert _violations() == []


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checker itself, on a made-up tree: each forbidden import is seen, the allowed are not."""
    files = {
        "adapters/sim/_x.py": "from ttc.engine.contract._types import Item\n"
        "from ttc.engine import Item\nfrom ttc.engine._util import redact\n"
        "from ttc.engine._util._secrets import redact\n"
        "from ttc.adapters.suites._math import MathSuite\n",
        "engine/send/_y.py": "from ttc.adapters import SimProvider\n"
        "from ttc.engine.contract._types import Item\nfrom ttc.engine.run._round import x\n"
        "from ttc.engine import Limiter\n",
        "engine/strategy/_z.py": "from ttc.engine.cli import main\nfrom ttc.retrieval import y\n"
        "from ttc.engine.send._sender import Sender\nfrom ttc.engine.sender import x\n",
        "engine/cli/_w.py": "from ttc.adapters.sim._sim import SimProvider\n"
        "from ttc.adapters.sim import SimProvider\nfrom ttc.engine.run._engine import Engine\n",
        "engine/run/_v.py": "from ttc.retrieval._index import SolvedIndex\n"
        "from ttc.retrieval import SolvedIndex\n",
        "engine/run/batch/_u.py": "from ttc.engine.run._dispatch import Landing\n"
        "from ttc.engine.run._round import RoundRun\nfrom .. import _round\n"
        "from ttc.engine.run._scheduler import single\nfrom ttc.engine.run import Engine\n",
        "benchmarks/b.py": "from ttc.engine.journal import _rundir\nfrom ._local import x\n",
        "retrieval/_r.py": "from ttc.engine.contract import FloatArray\n"
        "from ttc.engine.send import Sender\nfrom ttc.engine import Item\n",
    }
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    assert _violations(tmp_path) == [
        "engine/cli/_w.py:1: ttc.adapters.sim._sim (a private module of another layer)",
        "engine/run/_v.py:1: ttc.retrieval._index (a private module of another layer)",
        "engine/run/batch/_u.py:2: ttc.engine.run._round (run/batch is handed a Landing, never "
        "the round)",
        "engine/run/batch/_u.py:3: ttc.engine.run (run/batch is handed a Landing, never the round)",
        "engine/run/batch/_u.py:3: ttc.engine.run._round (run/batch is handed a Landing, never "
        "the round)",
        "engine/run/batch/_u.py:5: ttc.engine.run (run/batch is handed a Landing, never the round)",
        "engine/send/_y.py:1: ttc.adapters (the engine imports no adapter)",
        "engine/send/_y.py:3: ttc.engine.run._round (run comes after send)",
        "engine/send/_y.py:4: ttc.engine (the top level gathers every sub-package: import from the "
        "sub-package)",
        "engine/strategy/_z.py:1: ttc.engine.cli (cli comes after strategy)",
        "engine/strategy/_z.py:2: ttc.retrieval (retrieval comes after strategy)",
        "engine/strategy/_z.py:3: ttc.engine.send._sender (the strategy is pure policy: it sends "
        "nothing)",
        "adapters/sim/_x.py:1: ttc.engine.contract._types (a private module of another layer)",
        "adapters/sim/_x.py:4: ttc.engine._util._secrets (a private module of another layer)",
        "retrieval/_r.py:2: ttc.engine.send (retrieval imports only the contract and the helpers)",
        "retrieval/_r.py:3: ttc.engine (retrieval imports only the contract and the helpers)",
        "benchmarks/b.py:1: ttc.engine.journal._rundir (a private module of another layer)",
    ]


@pytest.mark.parametrize("folder", LAYERS)
def test_no_library_module_is_a_hall(folder: str) -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in _modules(folder)
        if (n := len(p.read_text().splitlines())) > SOFT_CAP
        and str(p.relative_to(ROOT)) not in LARGE
    }
    assert too_long == {}, f"over {SOFT_CAP} lines: say in LARGE why the concept needs the room"


@pytest.mark.parametrize("folder", LAYERS)
def test_no_lines_joined_against_the_formatter(folder: str) -> None:
    joined = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _modules(folder)
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
    ]
    assert joined == []


def test_the_public_api_is_curated_and_every_name_loads() -> None:
    """`ttc.engine` exports what a library user needs, at most 62 names, each of which loads from
    the sub-package it names; everything else is a sub-package's (or private)."""
    import ttc.engine

    names = ttc.engine.__all__
    assert len(names) <= 62
    assert sorted(names) == sorted(ttc.engine._HOMES) == dir(ttc.engine)
    for name in names:
        home = importlib.import_module(ttc.engine._HOMES[name])
        assert getattr(ttc.engine, name) is getattr(home, name)
        assert name in home.__all__


def test_a_name_from_before_the_curation_still_loads_and_says_where_it_went() -> None:
    import ttc.engine

    assert not set(ttc.engine._MOVED) & set(ttc.engine.__all__)
    for name, (module, new) in ttc.engine._MOVED.items():
        with pytest.warns(DeprecationWarning, match=rf"use `from {module} import {new}`"):
            value = getattr(ttc.engine, name)
        assert value is getattr(importlib.import_module(module), new)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = ttc.engine.Nothing


def test_each_sub_package_is_an_attribute_of_ttc_engine() -> None:
    import ttc.engine

    for name in ttc.engine._PACKAGES:
        assert getattr(ttc.engine, name) is importlib.import_module(f"ttc.engine.{name}")
    assert set(ttc.engine._PACKAGES) == {
        p.parent.name for p in (ROOT / "engine").glob("*/__init__.py")
    } - {"_util"}
