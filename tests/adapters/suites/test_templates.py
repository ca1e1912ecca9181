"""The Appendix A prompt templates, checked against the paper's text."""

from __future__ import annotations

import pytest

from ttc.adapters.suites._templates import SUITES, adaptive_prompt, warmup_prompt
from ttc.engine.contract._errors import ConfigError

DEMOS = [("Q one?", "A one \\boxed{1}"), ("Q two?", "A two \\boxed{2}"), ("Q three?", "A three")]


def test_suites_are_the_papers_five() -> None:
    assert set(SUITES) == {"math500", "minerva", "gpqa", "livecodebench", "reasoning_gym"}


def test_reasoning_gym_warmup_exact() -> None:
    expected = "Put the final answer within \\boxed{}.\nProblem:\nWhat is 2+2?\n\nSolution:"
    assert warmup_prompt("reasoning_gym", "What is 2+2?") == expected


def test_reasoning_gym_adaptive_exact_three_demos() -> None:
    expected = """Example 1
Problem:
Q one?

Solution:
A one \\boxed{1}

Example 2
Problem:
Q two?

Solution:
A two \\boxed{2}

Example 3
Problem:
Q three?

Solution:
A three

---

Now solve the following. Put the final answer within \\boxed{}.
Problem:
Target?

Solution:"""
    assert adaptive_prompt("reasoning_gym", "Target?", DEMOS) == expected


def test_reasoning_gym_adaptive_exact_one_demo() -> None:
    expected = """Example 1
Problem:
Q one?

Solution:
A one \\boxed{1}

---

Now solve the following. Put the final answer within \\boxed{}.
Problem:
Target?

Solution:"""
    assert adaptive_prompt("reasoning_gym", "Target?", DEMOS[:1]) == expected


def test_math500_warmup_exact() -> None:
    expected = (
        "Reason step by step and put the final answer in \\boxed{}.\n"
        "Problem:\nFind $x$ if $x^{2} = 4$.\n\nSolution:"
    )
    assert warmup_prompt("math500", "Find $x$ if $x^{2} = 4$.") == expected


def test_math500_adaptive_exact() -> None:
    expected = """Example 1
Problem:
Q one?

Solution:
A one \\boxed{1}

Example 2
Problem:
Q two?

Solution:
A two \\boxed{2}

Example 3
Problem:
Q three?

Solution:
A three

---

Now solve the following. Put the final answer in \\boxed{}.
Problem:
Target {braces}?

Solution:"""
    assert adaptive_prompt("math500", "Target {braces}?", DEMOS) == expected


def test_demos_rendered_in_order() -> None:
    demos = [(f"question {i}", f"response {i}") for i in range(1, 8)]
    for suite in SUITES:
        text = adaptive_prompt(suite, "target", demos)
        positions = [text.index(f"Example {i}\n") for i in range(1, 8)]
        assert positions == sorted(positions)
        answers = [text.index(f"response {i}") for i in range(1, 8)]
        assert answers == sorted(answers)
        assert "Example 8" not in text
        assert text.rstrip().endswith(("Solution:", "Question: target", "source code."))


def test_minerva_and_gpqa_shapes() -> None:
    minerva = adaptive_prompt("minerva", "T?", DEMOS[:1])
    assert minerva.endswith(
        "---\n\nLet's solve this step by step and put the final answer in \\boxed{} with just "
        "the numeric value.\nProblem:\nT?\n\nSolution:"
    )
    gpqa = adaptive_prompt("gpqa", "T?", DEMOS[:2])
    assert gpqa.startswith("You will see up to 3 previously answered multiple-choice questions.\n")
    assert "---\n\nExample 1\nQ one?\nAnswer: A one \\boxed{1}\n\n---\n\nExample 2\n" in gpqa
    assert gpqa.endswith(
        "---\n\nSolve the problem step by step.\n"
        "Select one selection and answer A, B, C or D in \\boxed{}.\n\nQuestion: T?"
    )
    assert warmup_prompt("gpqa", "T?") == (
        "Solve the problem step by step.\n"
        "Select one selection and answer A, B, C or D in \\boxed{}.\n\nQuestion: T?"
    )


def test_livecodebench_starter_and_base_prompt_appended() -> None:
    base = warmup_prompt("livecodebench", "Sum two ints.")
    assert "Starter (optional):\nN/A\n\nI/O requirements:\n- Read from STDIN" in base
    assert base.endswith(
        "- If multiple test cases exist, handle them all.\n\nReturn ONLY the Python source code."
    )
    with_starter = warmup_prompt("livecodebench", "Sum.", starter_code="def f():\n    pass")
    assert "Starter (optional):\ndef f():\n    pass\n\n" in with_starter
    adaptive = adaptive_prompt("livecodebench", "Sum two ints.", DEMOS[:1])
    assert adaptive.endswith("---\n\nBase prompt (appended verbatim):\n" + base)
    assert "Solution (Python 3 code only):\nA one \\boxed{1}\n\n---\n\n" in adaptive


def test_no_demos_is_an_error() -> None:
    for suite in SUITES:
        with pytest.raises(ValueError, match="at least one"):
            adaptive_prompt(suite, "q", [])


def test_unknown_suite_is_an_error() -> None:
    with pytest.raises(ConfigError, match="suite"):
        warmup_prompt("nope", "q")
    with pytest.raises(ConfigError, match="suite"):
        adaptive_prompt("nope", "q", DEMOS)
