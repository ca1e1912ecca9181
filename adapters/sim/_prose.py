"""What the simulator and `ttc serve` write with: stable hashes and filler reasoning prose.

Every draw of the simulator is seeded by a hash of what it answers, the same in every process, so
the same request gets the same completion; a response's reasoning is a slice of a fixed block of
step-by-step filler, sized to the tokens drawn.
"""

from __future__ import annotations

import random
from hashlib import blake2b

import numpy as np

__all__ = ["prose", "stable_hash"]


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of `parts` that is the same in every process (unlike the salted hash())."""
    key = "\x1f".join(map(repr, parts)).encode("utf-8")
    return int.from_bytes(blake2b(key, digest_size=8).digest(), "little")


def _make_prose() -> str:
    """A long block of step-by-step filler, built once; samples take slices of it."""
    sentences = [
        "Let us restate the problem in our own words before doing anything else.",
        "First, we identify the quantities that are given and the one that is asked for.",
        "Next, we write down the relation between them and simplify it carefully.",
        "We check each intermediate value, because a small slip here would propagate.",
        "Then we substitute the known values and carry out the computation step by step.",
        "It helps to consider a smaller case first and see whether the pattern holds.",
        "We verify that the result satisfies every condition stated in the problem.",
        "Counting again in a different order gives the same total, which is reassuring.",
        "The edge cases need a separate look, so we treat them one at a time.",
        "Rounding is applied only at the end, to the precision the problem requests.",
        "Combining the partial results, we obtain the value we were looking for.",
        "A quick estimate confirms that the magnitude of this answer is reasonable.",
    ]
    rng = random.Random(0)
    return " ".join(rng.choice(sentences) for _ in range(2_000))


_PROSE = _make_prose()


def prose(chars: int, rng: np.random.Generator) -> str:
    """About `chars` characters of filler, starting at a random sentence of the block."""
    if chars <= 0:
        return ""
    start = int(rng.integers(0, len(_PROSE) // 2))
    text = _PROSE
    if start + chars + 200 > len(text):  # only for samples of tens of thousands of tokens
        text = (_PROSE + " ") * ((start + chars + 200) // len(_PROSE) + 1)
    start = text.find(". ", start) + 2  # begin at a sentence
    end = text.find(". ", start + chars)
    return text[start : end + 1] if end != -1 else text[start:]
