"""Decoding a prompt text back into the item and demonstrations it was rendered from.

Over HTTP only the prompt text arrives, but the simulator needs the target item and the demos
(with their responses). `PromptMap` inverts a suite's two renderings:

- a warm-up prompt, `suite.warmup_prompt(item)`, by an exact dict lookup;
- an adaptive prompt, `suite.adaptive_prompt(item, demos)`, by its structure. The template is
  rendered once with sentinel demos (private-use characters no real text holds) to learn its
  separators: `pre[n]` before demo n's question (the head and "Example 1" for n = 1, the joiner
  and "Example n" after), `mid[n]` between demo n's question and its response, and each item's
  suffix after the last response. Renderings are checked to be exactly
  `pre[1] q1 mid[1] r1 ... pre[m] qm mid[m] rm suffix(item)` for every m up to `max_demos` (more
  levels are learnt on first need), with the suffix independent of the demos; a suite whose
  rendering does not fit decodes warm-up prompts only, and an item whose rendering does not fit
  is left out.

The target is found by its suffix. When the suffixes share a distinctive opening (the tail text
the templates put before the target question, e.g. "Now solve the following"), the suffix starts
at one of that opening's last occurrences and is an exact dict lookup. Otherwise they are indexed
by the 64 characters just before the ending they all share, and a hit is confirmed with
`endswith`. The middle then splits into demos: a question runs to the first `mid[n]` after which
the text is a known question (a question holding the separator moves on to the next
occurrence), a response to the next `pre[n+1]` after which the rest decodes, or to the end.
Everything is precomputed at construction: a decode is a few dict probes and `str.find`s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ttc.engine import Demo, Item, Suite

__all__ = ["Decoded", "PromptMap"]

_KEY = 64  # characters of the window that indexes suffixes without a shared opening
_ANCHOR = 16  # a shared opening at least this long locates the suffix directly
_MAX_LEVEL = 256  # demos per prompt beyond which prompts are not decoded
_MAX_STEPS = 10_000  # backtracking budget of one decode (reached by pathological texts only)
_MARK = "\ue000"


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a prompt was rendered from: the target item and the demos shown before it."""

    item: Item
    demos: tuple[Demo, ...] = ()


def _sentinels(m: int, tag: str = "") -> list[Demo]:
    return [
        Demo(f"{_MARK}{n}", f"{_MARK}Q{n}{tag}{_MARK}", f"{_MARK}R{n}{tag}{_MARK}")
        for n in range(1, m + 1)
    ]


def _render(pre: Sequence[str], mid: Sequence[str], demos: Sequence[Demo]) -> str:
    """The skeleton pre[1] q1 mid[1] r1 ... of `demos` (separators 1-based)."""
    return "".join(pre[n] + d.question + mid[n] + d.response for n, d in enumerate(demos, start=1))


def _common_suffix(a: str, b: str, upto: int) -> int:
    """The length of the longest common suffix of `a` and `b`, at most `upto`."""
    upto = min(upto, len(a), len(b))
    if a.endswith(b[len(b) - upto :]):
        return upto
    lo, hi = 0, upto  # a suffix of length lo is shared, one of length hi is not
    while hi - lo > 1:
        half = (lo + hi) // 2
        if a.endswith(b[len(b) - half :]):
            lo = half
        else:
            hi = half
    return lo


def _common_prefix(texts: Sequence[str]) -> str:
    """The longest common prefix of `texts` (the one of their lexicographic extremes)."""
    if not texts:
        return ""
    a, b = min(texts), max(texts)
    lo, hi = 0, len(a) + 1  # a prefix of length lo is shared, one of length hi is not
    while hi - lo > 1:
        half = (lo + hi) // 2
        if b.startswith(a[:half]):
            lo = half
        else:
            hi = half
    return a[:lo]


class PromptMap:
    """Decodes prompts rendered by `suite.warmup_prompt` / `suite.adaptive_prompt` (module doc)."""

    def __init__(self, suite: Suite, items: Sequence[Item], *, max_demos: int = 16) -> None:
        self.suite = suite
        self._warmup: dict[str, Item] = {}
        self._questions: dict[str, Item] = {}
        for item in items:
            self._warmup.setdefault(suite.warmup_prompt(item), item)
            self._questions.setdefault(item.question, item)
        self._ref: Item | None = items[0] if items else None
        self._pre: list[str] = [""]  # 1-based, like the demos: _pre[n], _mid[n]
        self._mid: list[str] = [""]
        self._suffix = ""  # the reference item's suffix
        self._ceiling = _MAX_LEVEL  # lowered when learning more levels fails
        self._by_suffix: dict[str, Item] = {}
        self._anchor = ""
        self._windows: dict[str, list[tuple[str, Item]]] = {}
        self._shared = 0
        self._widths: tuple[int, ...] = ()  # the window widths in use, _KEY and shorter ones
        self.adaptive = self._ref is not None and self._learn(max(1, max_demos))
        """Whether adaptive prompts can be decoded (the suite's rendering fits the structure)."""
        if self.adaptive:
            self.adaptive = self._index(items)

    # Learning the template

    def _learn(self, m: int) -> bool:
        """Learns pre[n], mid[n] for n <= m from the reference item; False if it does not fit."""
        assert self._ref is not None
        try:
            text = self.suite.adaptive_prompt(self._ref, _sentinels(m))
            pre, mid, at = [""], [""], 0
            for demo in _sentinels(m):
                qa, ra = text.find(demo.question), text.find(demo.response)
                if not at <= qa < ra or text.count(demo.question) + text.count(demo.response) != 2:
                    return False
                pre.append(text[at:qa])
                mid.append(text[qa + len(demo.question) : ra])
                at = ra + len(demo.response)
            suffix = text[at:]
            if _MARK in suffix or any(_MARK in s for s in pre + mid):
                return False
            known = len(self._pre) - 1
            if known and (pre[: known + 1] != self._pre or mid[: known + 1] != self._mid):
                return False  # separators that change with the number of demos
            if known and suffix != self._suffix:
                return False
            # Every count of demos, and other demo texts, render the same skeleton and suffix.
            for k in range(max(1, known), m):
                if self.suite.adaptive_prompt(self._ref, _sentinels(k)) != (
                    _render(pre, mid, _sentinels(k)) + suffix
                ):
                    return False
            other = _sentinels(min(m, 2), "x")
            if self.suite.adaptive_prompt(self._ref, other) != _render(pre, mid, other) + suffix:
                return False
        except Exception:  # a suite that cannot render sentinel demos decodes warm-ups only
            return False
        self._pre, self._mid, self._suffix = pre, mid, suffix
        return True

    def _level(self, n: int) -> bool:
        """Whether pre[n] and mid[n] are known, learning more levels on first need."""
        if n < len(self._pre):
            return True
        if n > self._ceiling:
            return False
        if not self._learn(min(self._ceiling, max(n, 2 * (len(self._pre) - 1)))):
            self._ceiling = len(self._pre) - 1
            return False
        return True

    def _index(self, items: Sequence[Item]) -> bool:
        head = _render(self._pre, self._mid, _sentinels(1))
        for item in items:
            try:
                text = self.suite.adaptive_prompt(item, _sentinels(1))
            except Exception:
                continue  # this item's adaptive prompts stay unknown
            if text.startswith(head) and _MARK not in text[len(head) :]:
                self._by_suffix.setdefault(text[len(head) :], item)
        if not self._by_suffix:
            return False
        suffixes = list(self._by_suffix)
        self._anchor = _common_prefix(suffixes)
        if len(self._anchor) >= _ANCHOR:
            return True
        self._anchor = ""
        first = suffixes[0]
        shared = len(first)
        for suffix in suffixes:
            shared = _common_suffix(first, suffix, shared)
        self._shared = shared
        widths = set()
        for suffix, item in self._by_suffix.items():
            # A suffix shorter than the window is indexed by all of it but the shared ending.
            width = min(_KEY, len(suffix) - shared)
            widths.add(width)
            key = suffix[len(suffix) - shared - width : len(suffix) - shared]
            self._windows.setdefault(key, []).append((suffix, item))
        self._widths = tuple(sorted(widths, reverse=True))
        return True

    # Decoding

    def decode(self, prompt: str) -> Decoded | None:
        """The item and demos `prompt` was rendered from, or None for a prompt not of this suite."""
        item = self._warmup.get(prompt)
        if item is not None:
            return Decoded(item)
        if not self.adaptive or not prompt.startswith(self._pre[1]):
            return None
        start = len(self._pre[1])
        for end, target in self._targets(prompt, start):
            demos = self._demos(prompt, 1, start, end, [_MAX_STEPS])
            if demos is not None:
                return Decoded(target, tuple(demos))
        return None

    def _targets(self, prompt: str, lo: int) -> Iterator[tuple[int, Item]]:
        """(where the suffix starts, its item) for the items whose suffix ends `prompt`."""
        if self._anchor:
            anchor = self._anchor
            at = prompt.rfind(anchor, lo)
            while at != -1:
                item = self._by_suffix.get(prompt[at:])
                if item is not None:
                    yield at, item
                at = prompt.rfind(anchor, lo, at + len(anchor) - 1)
            return
        size, shared = len(prompt), self._shared
        for width in self._widths:
            if size - shared - width < lo:
                continue
            for suffix, item in self._windows.get(
                prompt[size - shared - width : size - shared], ()
            ):
                if size - len(suffix) >= lo and prompt.endswith(suffix):
                    yield size - len(suffix), item

    def _demos(self, text: str, n: int, pos: int, end: int, budget: list[int]) -> list[Demo] | None:
        """Demos n, n+1, ... of `text[pos:end]` (pos at demo n's question), or None."""
        mid = self._mid[n]
        at = text.find(mid, pos, end)
        while at != -1:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            item = self._questions.get(text[pos:at])
            if item is not None:
                start = at + len(mid)
                if self._level(n + 1):
                    pre = self._pre[n + 1]
                    cut = text.find(pre, start, end)
                    while cut != -1:
                        rest = self._demos(text, n + 1, cut + len(pre), end, budget)
                        if rest is not None:
                            return [Demo(item.id, item.question, text[start:cut]), *rest]
                        if budget[0] < 0:
                            return None
                        cut = text.find(pre, cut + 1, end)
                return [Demo(item.id, item.question, text[start:end])]
            at = text.find(mid, at + 1, end)
        return None
