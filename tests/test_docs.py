"""The pages stay true to the code: docs/architecture.md names every module of the library (and
none that is gone), every relative link of the README and docs/ leads to a file (and a heading
that is there), and the python examples of the pages are what the tests run."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import library_example

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("engine", "adapters", "retrieval")
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
# A module named as its path from the repository's root, e.g. `engine/run/_round.py`.
MODULE = re.compile(r"(?<![\w/])((?:engine|adapters|retrieval)/[\w/]*?\w+\.py)\b")
# [text](target): the target up to the closing parenthesis, without a title.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LANDING_LINES = 400


def _modules() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for layer in LAYERS
        for p in (ROOT / layer).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def _named(text: str) -> set[str]:
    return set(MODULE.findall(text))


def _prose(text: str) -> str:
    """A page without its fenced blocks: links and headings in code are not links or headings."""
    return FENCE.sub("", text)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _prose(page.read_text()).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = _anchor(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def _links(page: Path) -> Iterator[tuple[str, Path, str]]:
    """Each relative link of `page`: as written, the file it names, its anchor (or "")."""
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = target.partition("#")
        yield target, (page.parent / path).resolve() if path else page, anchor


def test_architecture_names_every_module_and_no_other() -> None:
    named, there = _named(ARCHITECTURE.read_text()), _modules()
    assert sorted(there - named) == [], "modules docs/architecture.md does not name"
    assert sorted(named - there) == [], "modules docs/architecture.md names that do not exist"


def test_the_module_check_sees_what_it_checks() -> None:
    """The pattern finds a module named in a table, in prose and in a list; not a bare name."""
    text = "| `engine/run/_round.py` | x |\nsee adapters/sim/_sim.py, `retrieval/_index.py`."
    assert _named(text) == {"engine/run/_round.py", "adapters/sim/_sim.py", "retrieval/_index.py"}
    assert _named("`_round.py` and ttc.engine.run._round") == set()
    assert "engine/run/_round.py" in _modules()


def _broken(page: Path) -> list[str]:
    """The relative links of `page` that lead to no file, or to no heading of a page."""
    broken = []
    for target, path, anchor in _links(page):
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    assert _broken(page) == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    """A missing file and a missing heading are seen; a heading's anchor as GitHub makes it
    (punctuation dropped, a repeated heading numbered), a web link and a link in code are not."""
    (tmp_path / "there.md").write_text("# A heading (`--flag`)\n\n## Twice\n\n## Twice\n")
    (tmp_path / "sub").mkdir()
    page = tmp_path / "sub" / "page.md"
    page.write_text(
        "[ok](../there.md) [ok](../there.md#a-heading---flag) [ok](../there.md#twice-1)\n"
        "[ok](#here) [x](gone.md) [x](../there.md#nowhere) [web](https://example.com/x.md)\n"
        "## Here\n```\n[code](gone.md)\n```\n"
    )
    assert _broken(page) == ["gone.md: no such file", "../there.md#nowhere: no such heading"]


def test_the_readme_is_a_landing_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= LANDING_LINES


def test_the_readmes_library_example_is_one_the_tests_run() -> None:
    """The README's python example is printed, word for word, on the library page, whose examples
    tests/e2e/test_readme.py runs as printed."""
    readme = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    page = (ROOT / "docs" / "library.md").read_text()
    run = {library_example(page, 0), library_example(page, 1)}
    assert readme
    assert [block for block in readme if block not in run] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_example_parses(page: Path) -> None:
    """Examples the tests do not run (a notebook's cell) are Python all the same; top-level
    `await` is allowed, as a notebook allows it."""
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
        compile(block, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _repeats(text: str) -> list[str]:
    """The paragraphs of three or more lines that a page holds more than once."""
    paragraphs = [p.strip() for p in _prose(text).split("\n\n") if p.strip().count("\n") >= 2]
    return sorted({p.splitlines()[0] for p in paragraphs if paragraphs.count(p) > 1})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_paragraph_twice_and_no_placeholder(page: Path) -> None:
    """A merge gone wrong shows as a paragraph written twice, or a placeholder left standing."""
    text = page.read_text()
    assert _repeats(text) == []
    assert "TODO" not in text


def test_the_repeat_check_sees_a_repeated_paragraph() -> None:
    paragraph = "one\ntwo\nthree"
    assert _repeats(f"{paragraph}\n\nother\n\n{paragraph}\n") == ["one"]
    assert _repeats(f"{paragraph}\n\nother\n") == []
