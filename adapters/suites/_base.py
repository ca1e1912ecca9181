"""The templated-suite base: a suite whose two prompts are the paper's templates for its name.

MATH-500, Minerva, GPQA, LiveCodeBench and Reasoning Gym differ in their data and their verifier,
not in how they render prompts: each renders the template set of its `name` (`_templates`), and
LiveCodeBench adds each item's starter code. The custom suite renders its own templates.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttc.adapters.suites import _templates
from ttc.engine import Demo, Item, Suite

__all__ = ["TemplatedSuite"]


class TemplatedSuite(Suite):
    """A suite rendering the paper's warm-up and adaptive templates of `name` (Appendix A)."""

    name: str = ""

    def starter_code(self, item: Item) -> str:
        """Code the prompt offers the model to start from; none but for LiveCodeBench."""
        return ""

    def warmup_prompt(self, item: Item) -> str:
        """The paper's warm-up prompt of this suite."""
        return _templates.warmup_prompt(
            self.name, item.question, starter_code=self.starter_code(item)
        )

    def adaptive_prompt(self, item: Item, demos: Sequence[Demo]) -> str:
        """The paper's adaptive prompt of this suite, with the demos in order."""
        return _templates.adaptive_prompt(
            self.name,
            item.question,
            [(d.question, d.response) for d in demos],
            starter_code=self.starter_code(item),
        )
