"""Judgements: when a response is accepted, when a question is resolved, what it shows and answers.

- ground truth (γ): a response is accepted when the suite's verifier scores it >= γ; the question
  is resolved by its first accepted response, which is its ỹ and its final answer.
- reward model (threshold): accepted when an LLM judge's rubric score reaches the threshold share
  of the scale; resolved and ỹ as above; the final answer is the highest-rewarded response.
- noisy (p): another judgement's binary verdict, flipped with probability p; a question with no
  accepted response shows (and answers with) its most recent response (section 5.3).
- consensus (share): self-consistency, no oracle; nothing is accepted; resolved once `share` of at
  least two extracted answers agree; ỹ is the first response carrying the majority answer (for a
  resolved question), and the majority answer is the final one.

"First" and "most recent" are in (round, k) order. The ground-truth verdict of every response is
computed and journaled whatever the judgement, but only coverage and accuracy read it.

The reward model is an LLM (the `judge` role) asked with `RUBRIC`; `RewardScorer` sends those
requests through their own limiter and the engine's retry policy, and parses the score.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from ttc.engine._errors import ProviderError
from ttc.engine._limiter import Limiter
from ttc.engine._retry import RetryPolicy
from ttc.engine._scheduler import Job, Sender
from ttc.engine._state import Pick, QuestionRecord, Scored
from ttc.engine._types import Item, Message, Provider, Request, Sampling, Usage, Verdict

T = TypeVar("T")


class Judgement(Protocol):
    """Decides which responses count, which questions are done, and what each one answers."""

    @property
    def name(self) -> str: ...

    @property
    def reward_model(self) -> bool:
        """Whether each response must first be scored by the reward model (the `judge` role)."""
        ...

    @property
    def keeps_recent(self) -> bool:
        """Whether records keep the most recent response's text (a demonstration fallback)."""
        ...

    @property
    def tallies(self) -> bool:
        """Whether records count extracted answers (self-consistency)."""
        ...

    def describe(self) -> dict[str, Any]: ...

    def accepts(self, s: Scored) -> bool: ...

    def resolved(self, rec: QuestionRecord) -> bool: ...

    def demo(self, rec: QuestionRecord) -> Pick | None: ...

    def selected(self, rec: QuestionRecord) -> Pick | None: ...


@dataclass(frozen=True, slots=True)
class GroundTruth:
    """The suite's verifier against the reference; accepted when the score reaches γ."""

    gamma: float = 1.0
    name: str = "ground-truth"
    reward_model: bool = False
    keeps_recent: bool = False
    tallies: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "gamma": self.gamma}

    def passed(self, verdict: Verdict) -> bool:
        return verdict.score >= self.gamma

    def accepts(self, s: Scored) -> bool:
        return s.score >= self.gamma

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent


@dataclass(frozen=True, slots=True)
class RewardModel:
    """An LLM judge's rubric score (0-10, as a share of 10); accepted at `threshold`."""

    threshold: float = 0.7
    name: str = "reward-model"
    reward_model: bool = True
    keeps_recent: bool = False
    tallies: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, "scale": SCALE}

    def accepts(self, s: Scored) -> bool:
        # A float share can land a hair under the threshold (7/10 < 0.7 in binary).
        return s.reward is not None and s.reward >= self.threshold - 1e-9

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.best or rec.recent


@dataclass(frozen=True, slots=True)
class Noisy:
    """Another judgement whose binary verdict flips with probability `p`.

    The flip of a response is a draw seeded by (seed, item, round, k), so a resumed run flips the
    same ones. As in the paper's noisy-reward ablation, a question with no accepted response
    shows (and answers with) its most recent response.
    """

    inner: GroundTruth | RewardModel
    p: float
    seed: int
    keeps_recent: bool = True
    tallies: bool = False

    @property
    def name(self) -> str:
        return f"noisy-{self.inner.name}"

    @property
    def reward_model(self) -> bool:
        return self.inner.reward_model

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p, "inner": self.inner.describe()}

    def flipped(self, s: Scored) -> bool:
        return unit_draw(self.seed, "noise", s.item_id, s.round, s.k) < self.p

    def accepts(self, s: Scored) -> bool:
        return self.inner.accepts(s) != self.flipped(s)

    def resolved(self, rec: QuestionRecord) -> bool:
        return rec.accepted is not None

    def demo(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent

    def selected(self, rec: QuestionRecord) -> Pick | None:
        return rec.accepted or rec.recent


@dataclass(frozen=True, slots=True)
class Consensus:
    """Self-consistency: no oracle; resolved once `share` of at least `min_answers` extracted
    answers agree. ỹ is a response carrying the majority answer (the first that gave it)."""

    share: float = 0.75
    min_answers: int = 2
    name: str = "consensus"
    reward_model: bool = False
    keeps_recent: bool = False
    tallies: bool = True

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "share": self.share, "min_answers": self.min_answers}

    def accepts(self, s: Scored) -> bool:
        return False

    def resolved(self, rec: QuestionRecord) -> bool:
        if not rec.tally:
            return False
        total = sum(t.count for t in rec.tally.values())
        top = rec.majority()
        return total >= self.min_answers and top is not None and top.count >= self.share * total

    def demo(self, rec: QuestionRecord) -> Pick | None:
        if not self.resolved(rec):
            return None
        top = rec.majority()
        return None if top is None else top.first

    def selected(self, rec: QuestionRecord) -> Pick | None:
        top = rec.majority()
        return None if top is None else top.first


def unit_draw(seed: int, *parts: object) -> float:
    """A uniform draw in [0, 1) fixed by `seed` and `parts`, the same in every process."""
    key = "/".join(map(str, (seed, *parts))).encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


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


_SCORE_LINE = re.compile(r"score\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?", re.I)
_FRACTION = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)", re.I)
_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d.])")


def parse_score(text: str, scale: int = SCALE) -> float | None:
    """The score of a judge's reply as a share of `scale`, or None when it holds none.

    In order: the last `Score: N` (or `Score: N/M`), the last `N/M` or `N out of M`, a reply
    that is a lone number. A value outside [0, scale] is no score.
    """
    value: float | None = None
    out_of = float(scale)
    if found := _SCORE_LINE.findall(text):
        number, denominator = found[-1]
        value, out_of = float(number), float(denominator or scale)
    elif found := _FRACTION.findall(text):
        value, out_of = float(found[-1][0]), float(found[-1][1])
    elif len(found := _NUMBER.findall(text.strip())) == 1 and len(text.strip()) <= 8:
        value = float(found[0])
    if value is None or not out_of > 0 or not 0 <= value <= out_of or not math.isfinite(value):
        return None
    return value / out_of


@dataclass(frozen=True, slots=True)
class RewardResult:
    """One reward-model call: the share it gave (None: unparsed, or the call failed)."""

    reward: float | None
    text: str | None
    usage: Usage
    error: str | None = None

    @property
    def unparsed(self) -> bool:
        return self.error is None and self.reward is None

    def event(self) -> dict[str, Any]:
        """The journal's fields for this call (merged into a `judge` event)."""
        u = self.usage
        if self.error is not None:
            return {"ok": False, "error": self.error}
        return {
            "ok": True,
            "reward": self.reward,
            "text": self.text,
            "usage": [u.input_tokens, u.output_tokens, u.thinking_tokens],
        }

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> RewardResult:
        return cls(event.get("reward"), event.get("text"), Usage(*event["usage"]))


# Role models answer as deterministically as their API allows.
JUDGE_SAMPLING = Sampling(temperature=0.0)


class RoleCaller:
    """Sends one role's requests (judge, difficulty) through their own limiter and the engine's
    retry policy; a role's calls never queue behind the policy model's."""

    def __init__(
        self,
        provider: Provider,
        concurrency: int,
        retry: RetryPolicy,
        timeout_s: float,
        seed: int,
        sampling: Sampling = JUDGE_SAMPLING,
    ) -> None:
        self.provider = provider
        self.seed = seed
        self.sampling = sampling
        self.retries = 0
        limiter = Limiter(None, None, concurrency)
        self.sender = Sender(provider, limiter, retry, timeout_s, self._on_retry)

    def _on_retry(self, job: Job, attempt: int, error: ProviderError, delay: float) -> None:
        self.retries += 1

    async def ask(self, item: Item, prompt: str, *key: object) -> tuple[str | None, Usage, str]:
        """(reply text, usage, error): text None when the call failed after its retries."""
        seed = int(unit_draw(self.seed, "role", item.id, *key) * 2**31)
        sampling = replace(self.sampling, seed=seed)
        request = Request((Message("user", prompt),), sampling, 1, item.id)
        outcome = await self.sender.send_with_retry(Job(-1, 0, 0, request, len(prompt) // 4 + 64))
        if outcome.completion is None:
            assert outcome.error is not None
            return None, Usage(), f"{outcome.error.kind}: {outcome.error}"[:300]
        return outcome.completion.texts[0], outcome.completion.usage, ""

    async def score(self, item: Item, round_no: int, k: int, response: str) -> RewardResult:
        """The reward model's rating of one response."""
        text, usage, error = await self.ask(item, rubric(item.question, response), round_no, k)
        if text is None:
            return RewardResult(None, None, usage, error)
        return RewardResult(parse_score(text), text, usage)


async def bounded(things: Iterable[T], fn: Callable[[T], Awaitable[Any]], workers: int) -> None:
    """Runs `await fn(x)` for every x, at most `workers` at once, with no task per x."""
    it = iter(things)

    async def worker() -> None:
        for x in it:  # a shared iterator: each x goes to one worker
            await fn(x)

    async with asyncio.TaskGroup() as tg:
        for _ in range(max(1, workers)):
            tg.create_task(worker())
