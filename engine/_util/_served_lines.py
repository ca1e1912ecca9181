"""JSON lines a server sends (a Batch API's results file): read as they arrive, never whole, each
line checked before it is used.

A results file is input like any other a server sends: it may be hundreds of megabytes, hold a
torn or garbage line, or a line nested a hundred thousand deep. `served_lines` splits a stream of
chunks into lines, holds at most `max_line` bytes of one (a longer line is skipped to its end,
never held), and yields each as a JSON object, or as `Unreadable` saying why it is not one: the
caller counts those and goes on, so the answers already bought on the other lines are kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "Unreadable", "served_lines", "served_lines_of"]

MAX_DEPTH = 64
"""The deepest nesting a served line may have: results lines nest about ten deep, and deeper
ones would make the recursive readers after this one (redaction, pydantic) raise."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A line that is no JSON object: why (its number, 1-based, is `line`)."""

    line: int
    why: str


def _depth_over(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (iterative: the check itself cannot recurse)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return False


def _parse(raw: bytes, number: int) -> dict[str, Any] | Unreadable:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # orjson refuses past 1,024 levels too
        text = str(exc).split(":", 1)[0]
        return Unreadable(number, f"not JSON ({text})")
    if not isinstance(value, dict):
        return Unreadable(number, f"a JSON {type(value).__name__}, not an object")
    if _depth_over(value, MAX_DEPTH):
        return Unreadable(number, f"nested deeper than {MAX_DEPTH} levels")
    return value


async def served_lines(
    chunks: AsyncIterable[bytes], max_line: int
) -> AsyncIterator[dict[str, Any] | Unreadable]:
    """The JSON object of each non-blank line of `chunks`, or `Unreadable` (a line over
    `max_line` bytes among them, which is skipped as it arrives)."""
    held = bytearray()
    number = 0
    skipping = False  # inside a line over the cap: its bytes are dropped until its end
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                held += piece
                if len(held) > max_line:
                    skipping = True
                    held.clear()
            if end < 0:
                break
            number += 1
            if skipping:
                yield Unreadable(number, f"over {max_line:,} bytes (--max-response-bytes)")
            elif held.strip():
                yield _parse(bytes(held), number)
            held.clear()
            skipping = False
            start = end + 1
    if skipping:
        yield Unreadable(number + 1, f"over {max_line:,} bytes (--max-response-bytes)")
    elif held.strip():
        yield _parse(bytes(held), number + 1)


def served_lines_of(data: bytes, max_line: int) -> Iterable[dict[str, Any] | Unreadable]:
    """`served_lines` of a body already read (a vendor's client that only hands it whole)."""
    for number, raw in enumerate(data.splitlines(), start=1):
        if len(raw) > max_line:
            yield Unreadable(number, f"over {max_line:,} bytes (--max-response-bytes)")
        elif raw.strip():
            yield _parse(raw, number)
