"""What `ttc serve` answers: the simulator for the served suite's prompts, prose otherwise.

A prompt rendered by the served suite is decoded (`PromptMap`) into its item and demos and
answered by `SimProvider`, so the suite's verifier judges the answers as it judges the
simulator's; any other prompt gets generic prose ending in a `\\boxed{}` answer, deterministic in
the prompt and seed. Embeddings are `LexicalEmbedder` vectors (256 dims).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ttc.adapters.sim._admission import Stats
from ttc.adapters.sim._options import ServeOptions
from ttc.adapters.sim._promptmap import PromptMap
from ttc.adapters.sim._prose import prose, stable_hash
from ttc.adapters.sim._sim import SimConfig, SimProvider, thought
from ttc.adapters.sim._wire import Call, estimate_tokens
from ttc.engine import Completion, Item, Request, Suite, Usage
from ttc.retrieval import LexicalEmbedder

__all__ = ["Answerer"]


class Answerer:
    """Turns a parsed call into a Completion: the sim for the suite's prompts, prose otherwise."""

    def __init__(self, options: ServeOptions, suite: Suite | None, items: Sequence[Item]) -> None:
        self.options = options
        self.map = PromptMap(suite, items) if suite is not None and items else None
        config = SimConfig(
            seed=options.seed, ability=options.sim_ability, thinking_ratio=options.sim_thinking
        )
        self.sim = SimProvider(suite, items, config) if suite is not None and self.map else None
        self._mu = math.log(config.mean_output_tokens) - config.output_tokens_sigma**2 / 2
        self._sigma = config.output_tokens_sigma
        self.embedder = LexicalEmbedder()
        self._embedders = {self.embedder.dim: self.embedder}

    async def answer(self, call: Call, stats: Stats) -> Completion:
        decoded = self.map.decode(call.prompt) if self.map is not None else None
        if decoded is None or self.sim is None:
            stats.prompts["unknown"] += 1
            return self._generic(call)
        stats.prompts["adaptive" if decoded.demos else "warmup"] += 1
        request = Request(call.messages, call.sampling, call.n, decoded.item.id, decoded.demos)
        return await self.sim.generate(request)

    def _generic(self, call: Call) -> Completion:
        """Filler prose and a boxed number, deterministic in the prompt and the seeds."""
        s = call.sampling
        rng = np.random.default_rng(stable_hash(self.options.seed, "serve", call.prompt, s.seed))
        texts: list[str] = []
        finish: list[str] = []
        output = 0
        for _ in range(call.n):
            tokens = max(1, round(float(rng.lognormal(self._mu, self._sigma))))
            answer = f"The final answer is \\boxed{{{int(rng.integers(0, 1000))}}}."
            if s.max_output_tokens is not None and tokens > s.max_output_tokens:
                tokens = s.max_output_tokens
                texts.append(prose(tokens * 4, rng))
                finish.append("length")
            else:
                text = prose(tokens * 4 - len(answer) - 2, rng)
                texts.append(f"{text}\n\n{answer}" if text else answer)
                finish.append("stop")
            output += tokens
        thinking = thought(self.options.sim_thinking, output, s, call.n)
        usage = Usage(estimate_tokens("".join(m.content for m in call.messages)), output, thinking)
        return Completion(tuple(texts), usage, tuple(finish), model="sim-generic")

    def embed(self, texts: list[str], dims: int | None) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Lexical vectors; fewer dimensions are hashed into fewer buckets, not truncated."""
        dim = dims or self.embedder.dim  # at most 256 embedders: larger dims are refused
        embedder = self._embedders.get(dim)
        if embedder is None:
            embedder = self._embedders[dim] = LexicalEmbedder(dim=dim)
        return embedder.embed(texts)
