"""The paper's prompt templates (Appendix A), word for word, as plain text.

Each suite has a warm-up (zero-shot) prompt and an adaptive prompt that shows solved neighbours
before the target question. The LaTeX of the paper is turned into text this way: `\\boxed\\{\\}`
is `\\boxed{}`, a `\\\\` line break is a newline, `\\medskip` is a blank line, a horizontal rule
and `\\texttt{---}` are a line `---`, itemize bullets are lines starting with `- `.

The adaptive templates of the paper show three examples; here they render any number m >= 1 of
demonstrations, numbered Example 1..m, each with the same block, followed by the tail. The fixed
wording ("up to 3 previously solved ...") is kept verbatim whatever m is: it is the paper's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttc.engine import ConfigError

__all__ = ["SUITES", "adaptive_prompt", "warmup_prompt"]

_RULE = "---"


@dataclass(frozen=True, slots=True)
class _Templates:
    """One suite's format strings; `head + joiner.join(examples) + tail` is the adaptive prompt."""

    warmup: str  # fields: {question} (and {starter} for LiveCodeBench)
    head: str  # no fields
    example: str  # fields: {n}, {question}, {response}
    joiner: str  # between two examples
    tail: str  # fields: {question}, or {base} for LiveCodeBench


# MATH-500, MinervaMath and Reasoning Gym share the example block of their adaptive prompts.
_PROBLEM_SOLUTION = "Example {n}\nProblem:\n{question}\n\nSolution:\n{response}"

_MATH500 = _Templates(
    warmup=(
        "Reason step by step and put the final answer in \\boxed{{}}.\n"
        "Problem:\n"
        "{question}\n"
        "\n"
        "Solution:"
    ),
    head="",
    example=_PROBLEM_SOLUTION,
    joiner="\n\n",
    tail=(
        "\n\n"
        f"{_RULE}\n"
        "\n"
        "Now solve the following. Put the final answer in \\boxed{{}}.\n"
        "Problem:\n"
        "{question}\n"
        "\n"
        "Solution:"
    ),
)

_MINERVA_INSTRUCTION = (
    "Let's solve this step by step and put the final answer in \\boxed{{}} "
    "with just the numeric value."
)

_MINERVA = _Templates(
    warmup=f"{_MINERVA_INSTRUCTION}\nProblem:\n{{question}}\n\nSolution:",
    head="",
    example=_PROBLEM_SOLUTION,
    joiner="\n\n",
    tail=f"\n\n{_RULE}\n\n{_MINERVA_INSTRUCTION}\nProblem:\n{{question}}\n\nSolution:",
)

_GPQA_INSTRUCTION = (
    "Solve the problem step by step.\nSelect one selection and answer A, B, C or D in \\boxed{{}}."
)

_GPQA = _Templates(
    warmup=f"{_GPQA_INSTRUCTION}\n\nQuestion: {{question}}",
    head=(
        "You will see up to 3 previously answered multiple-choice questions.\n"
        "Use them as guidance. After the examples, solve the question step by step.\n"
        "Select one selection and answer A, B, C or D in \\boxed{}.\n"
        "\n"
        f"{_RULE}\n"
        "\n"
    ),
    example="Example {n}\n{question}\nAnswer: {response}",
    joiner=f"\n\n{_RULE}\n\n",
    tail=f"\n\n{_RULE}\n\n{_GPQA_INSTRUCTION}\n\nQuestion: {{question}}",
)

_LIVECODEBENCH = _Templates(
    warmup=(
        "You are a competitive programming assistant.\n"
        "Return ONLY valid Python 3 code that solves the task. "
        "Do not include explanations, comments, or markdown fences.\n"
        "\n"
        "Problem:\n"
        "{question}\n"
        "\n"
        "Starter (optional):\n"
        "{starter}\n"
        "\n"
        "I/O requirements:\n"
        "- Read from STDIN exactly as described in the problem.\n"
        "- Write only the required answer(s) to STDOUT (no extra prints).\n"
        "- Do not read/write files. Do not use network.\n"
        "- Avoid heavy/obscure libraries.\n"
        "\n"
        "Constraints:\n"
        "- Python 3.10+.\n"
        "- Prefer iterative solutions if deep recursion could occur.\n"
        "- If multiple test cases exist, handle them all.\n"
        "\n"
        "Return ONLY the Python source code."
    ),
    head=(
        "You will see up to 3 previously solved coding problems with their Python 3 solutions.\n"
        "Use them as guidance. After the examples, follow the final instructions below.\n"
        "Return ONLY valid Python 3 code (no explanations, comments, or markdown fences).\n"
        "\n"
        f"{_RULE}\n"
        "\n"
    ),
    example="Example {n}\nProblem:\n{question}\n\nSolution (Python 3 code only):\n{response}",
    joiner=f"\n\n{_RULE}\n\n",
    tail=f"\n\n{_RULE}\n\nBase prompt (appended verbatim):\n{{base}}",
)

_REASONING_GYM = _Templates(
    warmup="Put the final answer within \\boxed{{}}.\nProblem:\n{question}\n\nSolution:",
    head="",
    example=_PROBLEM_SOLUTION,
    joiner="\n\n",
    tail=(
        "\n\n"
        f"{_RULE}\n"
        "\n"
        "Now solve the following. Put the final answer within \\boxed{{}}.\n"
        "Problem:\n"
        "{question}\n"
        "\n"
        "Solution:"
    ),
)

_BY_SUITE: dict[str, _Templates] = {
    "math500": _MATH500,
    "minerva": _MINERVA,
    "gpqa": _GPQA,
    "livecodebench": _LIVECODEBENCH,
    "reasoning_gym": _REASONING_GYM,
}

SUITES: tuple[str, ...] = tuple(_BY_SUITE)
"""The suite names the templates know."""


def _templates(suite: str) -> _Templates:
    try:
        return _BY_SUITE[suite]
    except KeyError:
        raise ConfigError(
            f"suite: unknown {suite!r}; expected one of {', '.join(SUITES)}"
        ) from None


def warmup_prompt(suite: str, question: str, *, starter_code: str = "") -> str:
    """The suite's warm-up (zero-shot) prompt for `question`."""
    t = _templates(suite)
    # The paper's LiveCodeBench placeholder is "starter_code or N/A".
    starter = starter_code if starter_code.strip() else "N/A"
    if suite == "livecodebench":
        return t.warmup.format(question=question, starter=starter)
    return t.warmup.format(question=question)


def adaptive_prompt(
    suite: str, question: str, demos: Sequence[tuple[str, str]], *, starter_code: str = ""
) -> str:
    """The suite's adaptive prompt: demos as (question, response) pairs, then `question`."""
    t = _templates(suite)
    if not demos:
        raise ValueError("adaptive_prompt needs at least one demonstration")
    examples = t.joiner.join(
        t.example.format(n=n, question=q, response=r) for n, (q, r) in enumerate(demos, start=1)
    )
    if suite == "livecodebench":
        # The adaptive LiveCodeBench prompt appends the whole base (warm-up) prompt verbatim.
        tail = t.tail.format(base=warmup_prompt(suite, question, starter_code=starter_code))
    else:
        tail = t.tail.format(question=question)
    return t.head + examples + tail
