"""Fakes for engine tests: a scripted provider that records its history, a tiny suite, an embedder.

The suite renders prompts with the paper's real Reasoning Gym templates, so tests check the
demonstrations exactly as a model would see them.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ttc.adapters.suites._templates import adaptive_prompt, warmup_prompt
from ttc.engine import Completion, Demo, Item, ProviderError, Request, Usage, Verdict
from ttc.engine._types import FloatArray


def items(n: int) -> list[Item]:
    """n questions q0..q{n-1}; the right answer to qi is `right:qi`."""
    return [Item(f"q{i}", f"question number {i}", f"right:q{i}") for i in range(n)]


@dataclass
class FakeSuite:
    """Judges `right:<id>...` as 1.0, anything else 0.0; prompts from the paper's templates."""

    name: str = "fake"
    sim_prose: bool = False
    pool: list[Item] = field(default_factory=list)

    def items(self) -> list[Item]:
        return list(self.pool)

    def warmup_prompt(self, item: Item) -> str:
        return warmup_prompt("reasoning_gym", item.question)

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        return adaptive_prompt(
            "reasoning_gym", item.question, [(d.question, d.response) for d in demos]
        )

    def judge(self, item: Item, response: str) -> Verdict:
        ok = response.startswith(item.reference)
        return Verdict(1.0 if ok else 0.0, response)

    def sim_response(self, item: Item, correct: bool, seed: int) -> str:
        return item.reference if correct else "wrong"

    def sim_is_correct(self, item: Item, response: str) -> bool:
        return response.startswith(item.reference)


# A scripted step: a response text, an error to raise, or (seconds to wait, text).
Step = str | ProviderError | tuple[float, str]


@dataclass
class ScriptedProvider:
    """Answers each question from its own script, in call order; records every request.

    A question whose script runs out answers `wrong`. Calls are keyed by item id, so the script
    is independent of the order in which concurrent requests arrive.
    """

    script: dict[str, list[Step]] = field(default_factory=dict)
    name: str = "scripted"
    model: str = "scripted-1"
    history: list[Request] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    async def generate(self, request: Request) -> Completion:
        self.history.append(request)
        steps = self.script.get(request.item_id, [])
        i = self.calls[request.item_id]
        self.calls[request.item_id] += 1
        step: Step = steps[i] if i < len(steps) else "wrong"
        if isinstance(step, ProviderError):
            raise step
        if isinstance(step, tuple):
            await asyncio.sleep(step[0])
            step = step[1]
        usage = Usage(input_tokens=len(request.messages[0].content) // 4, output_tokens=10)
        return Completion((step,), usage, ("stop",))

    async def aclose(self) -> None:
        return None

    def requests_for(self, item_id: str) -> list[Request]:
        return [r for r in self.history if r.item_id == item_id]


@dataclass
class TableEmbedder:
    """An embedder with hand-set vectors, so neighbours are known exactly."""

    vectors: dict[str, list[float]]
    name: str = "table"
    dim: int = 0
    batch_size: int = 64

    def __post_init__(self) -> None:
        self.dim = len(next(iter(self.vectors.values())))
        self._by_text = {f"question number {k[1:]}": v for k, v in self.vectors.items()}

    def embed(self, texts: Sequence[str]) -> FloatArray:
        mat = np.array([self._by_text[t] for t in texts], dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return (mat / np.where(norms == 0, 1, norms)).astype(np.float32)
