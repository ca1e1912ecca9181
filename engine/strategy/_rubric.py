"""The reward model's rubric: the prompt that asks an LLM judge for a score, and the parser of its
reply. The prompt is a plain string so the offline simulator can recognise one (`split_rubric`)
and answer it as a judge would.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "RESPONSE_BEGIN",
    "RESPONSE_END",
    "RUBRIC",
    "SCALE",
    "parse_score",
    "rubric",
    "split_rubric",
]

# The reward model's rubric. The response sits between two marker lines, so that a response
# which quotes the instructions cannot pass for them.
SCALE = 10
RESPONSE_BEGIN = "<<<BEGIN RESPONSE>>>"
RESPONSE_END = "<<<END RESPONSE>>>"
RUBRIC = (
    "You are grading a response to a problem. Judge only whether the response reaches a "
    "correct final answer by valid reasoning; ignore style and length.\n"
    "\n"
    "Problem:\n"
    "{question}\n"
    "\n"
    f"Response:\n{RESPONSE_BEGIN}\n{{response}}\n{RESPONSE_END}\n"
    "\n"
    f"Rate the correctness of the response from 0 to {SCALE}: 0 means certainly wrong, "
    f"{SCALE // 2} means you cannot tell, {SCALE} means certainly correct. Do not solve the "
    f'problem again at length. End your reply with one line of the form "Score: N".'
)


def rubric(question: str, response: str) -> str:
    """The reward model's prompt for one response."""
    return RUBRIC.format(question=question, response=response)


def split_rubric(prompt: str) -> tuple[str, str] | None:
    """(question, response) of a rubric prompt, or None if `prompt` is not one (for the sim)."""
    head, sep, rest = prompt.partition(f"\n\nResponse:\n{RESPONSE_BEGIN}\n")
    response, sep2, _ = rest.rpartition(f"\n{RESPONSE_END}\n")
    if not sep or not sep2 or not head.startswith(RUBRIC.partition("{question}")[0]):
        return None
    return head[len(RUBRIC.partition("{question}")[0]) :], response


# The forms a score may take, and only these: `Score: N` (markdown emphasis and a parenthesised
# range such as "(0-10)" allowed; `score = N` too), `N/10` or `N out of 10` on the rubric's own
# scale, or a reply that is nothing but a number. Any other number ("the answer 1/2 is wrong",
# "step 3", "a score of 9") is not a score.
_SCORE_LINE = re.compile(
    r"(?<!\w)score[\s*_]*(?:\([^)\n]*\))?[\s*_]*[:=][\s*_]*"
    r"(\d+(?:\.\d+)?)(?:[\s*_]*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?",
    re.I,
)
_ON_SCALE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)(?![\d.]*\d)", re.I
)
_BARE = re.compile(r"[\s*]*(\d+(?:\.\d+)?)[\s*]*\.?\s*")


def parse_score(text: str, scale: int = SCALE) -> float | None:
    """The score of a judge's reply as a share of `scale`, or None when it holds none.

    In order: the last `Score: N` (`Score: N/10` too), the last `N/10` (or `N out of 10`),
    a reply that is a number and nothing else. A value outside [0, scale], or over another
    denominator than `scale`, is no score.
    """
    value: str | None = None
    if found := _SCORE_LINE.findall(text):
        value, denominator = found[-1]
        if denominator and float(denominator) != scale:
            return None
    elif found := [f for f in _ON_SCALE.findall(text) if float(f[1]) == scale]:
        value = found[-1][0]
    elif bare := _BARE.fullmatch(text):
        value = bare.group(1)
    if value is None:
        return None
    number = float(value)
    if not (math.isfinite(number) and 0 <= number <= scale):
        return None
    return number / scale
