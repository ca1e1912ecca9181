"""The import rules that keep the layers one-way, and the size of the rooms.

- The engine (`engine/`, its strategies included) imports nothing from `ttc.adapters` and nothing
  from its own command line: `engine/cli/` is the one place that wires adapters in.
- Every layer imports only the public names of another (`from ttc.engine import Item`, never
  `ttc.engine._types`); the CLI wires adapters in by their public names too.
- No library module is over `MAX_LINES` lines, but those named in `LARGE`, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("engine", "adapters", "retrieval")
MAX_LINES = 400
# Modules allowed past MAX_LINES, and why. Keep this list short, and say why each is here.
LARGE: dict[str, str] = {}


def _modules(folder: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / folder).rglob("*.py"))


def _imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Every module an import statement of `path` names (relative imports resolved)."""
    rel = path.relative_to(root)
    package = "benchmarks" if rel.parts[0] == "benchmarks" else ".".join(("ttc", *rel.parent.parts))
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
            for alias in node.names:  # `from ttc.engine import _x` names a module too
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"{base}.{alias.name}"


def _owner(rel: Path) -> str:
    """The import prefix a module may reach privately: its own top-level layer."""
    return f"ttc.{rel.parts[0]}" if rel.parts[0] in LAYERS else rel.parts[0]


def _private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _violations(root: Path = ROOT) -> list[str]:
    found = []
    for folder in (*LAYERS, "benchmarks"):
        for path in _modules(folder, root):
            rel = path.relative_to(root)
            in_cli = rel.parts[:2] == ("engine", "cli")
            for line, module in _imports(path, root):
                where = f"{rel}:{line}: {module}"
                if not module.startswith("ttc"):
                    continue
                if rel.parts[0] == "engine" and not in_cli:
                    if module.startswith("ttc.adapters"):
                        found.append(f"{where} (the engine imports no adapter)")
                        continue
                    if module.startswith("ttc.engine.cli"):
                        found.append(f"{where} (only the CLI imports the CLI)")
                        continue
                # The CLI wires adapters in, by their public names like everyone else.
                if _private(module) and not module.startswith(_owner(rel) + "."):
                    found.append(f"{where} (a private module of another layer)")
    return found


def test_layers_import_one_way_and_only_public_names() -> None:
    assert _violations() == []


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checker itself, on a made-up tree: each forbidden import is seen, the allowed are not."""
    files = {
        "adapters/sim/_x.py": "from ttc.engine._types import Item\nfrom ttc.engine import Item\n"
        "from ttc.adapters.suites._math import MathSuite\n",
        "engine/_y.py": "from ttc.adapters import SimProvider\n"
        "from ttc.engine._types import Item\n",
        "engine/strategy/_z.py": "from ttc.engine.cli import main\n",
        "engine/cli/_w.py": "from ttc.adapters.sim._sim import SimProvider\n"
        "from ttc.adapters.sim import SimProvider\nfrom ttc.engine._types import Item\n",
        "engine/_v.py": "from ttc.retrieval._index import SolvedIndex\n",
        "benchmarks/b.py": "from ttc.engine import _rundir\nfrom ._local import x\n",
        "retrieval/_r.py": "from ttc.engine import FloatArray\n",
    }
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    found = _violations(tmp_path)
    assert found == [
        "engine/_v.py:1: ttc.retrieval._index (a private module of another layer)",
        "engine/_y.py:1: ttc.adapters (the engine imports no adapter)",
        "engine/cli/_w.py:1: ttc.adapters.sim._sim (a private module of another layer)",
        "engine/strategy/_z.py:1: ttc.engine.cli (only the CLI imports the CLI)",
        "adapters/sim/_x.py:1: ttc.engine._types (a private module of another layer)",
        "benchmarks/b.py:1: ttc.engine._rundir (a private module of another layer)",
    ]


@pytest.mark.parametrize("folder", LAYERS)
def test_no_library_module_is_a_hall(folder: str) -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in _modules(folder)
        if (n := len(p.read_text().splitlines())) > MAX_LINES
        and str(p.relative_to(ROOT)) not in LARGE
    }
    assert too_long == {}, f"over {MAX_LINES} lines: split them, or name them in LARGE with why"
