"""The Reasoning Gym suite: generation, answer extraction, judging, and the simulator's answers."""

from __future__ import annotations

import multiprocessing
import pickle
import re
import tomllib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest

from ttc.adapters.sim import answers_for
from ttc.adapters.suites._reasoning_gym import DEFAULT_TASKS, ReasoningGymSuite, extract_last_boxed
from ttc.engine.contract._errors import ConfigError
from ttc.engine.contract._types import Demo, Item, Suite, Verdict
from ttc.engine.journal import items_sha256


@pytest.fixture(scope="module")
def suite() -> ReasoningGymSuite:
    return ReasoningGymSuite()


@pytest.fixture(scope="module")
def items(suite: ReasoningGymSuite) -> list[Item]:
    return suite.items()


def test_four_hundred_items_balanced_and_interleaved(
    suite: ReasoningGymSuite, items: list[Item]
) -> None:
    assert isinstance(suite, Suite)
    assert len(items) == 400
    assert Counter(item.meta["task"] for item in items) == dict.fromkeys(DEFAULT_TASKS, 100)
    assert [item.id for item in items[:5]] == [
        "decimal_arithmetic/0",
        "advanced_geometry/0",
        "binary_alternation/0",
        "letter_counting/0",
        "decimal_arithmetic/1",
    ]
    assert items[-1].id == "letter_counting/99"
    assert len({item.id for item in items}) == 400
    for item in items:
        entry = suite.entry(item)  # regenerated from the task and the index the item keeps
        assert item.question == entry["question"]
        assert item.reference == str(entry["answer"])
        assert set(item.meta) == {"task", "index"}


def test_scoring_on_the_regenerated_entry_is_scoring_on_the_generated_one(
    suite: ReasoningGymSuite, items: list[Item]
) -> None:
    """Items keep no reasoning-gym entry (3 kB each): the scorer regenerates it. Every score
    must be what the entry generated with the item gives, for references and near misses."""
    import reasoning_gym

    from ttc.adapters.suites._reasoning_gym import _hard_config

    gen = {t: reasoning_gym.create_dataset(t, **_hard_config(t, 42, 100)) for t in DEFAULT_TASKS}
    answers = answers_for(suite)
    for n, item in enumerate(items[::5]):
        task, index = item.meta["task"], item.meta["index"]
        original = gen[task][index]
        wrong = answers.sim_response(item, False, seed=n)
        for answer in (item.reference, extract_last_boxed(wrong), "garbage"):
            assert suite.score(item, answer or "") == gen[task].score_answer(answer, original)
        # An item made elsewhere with its entry in its meta is scored on that entry.
        given = Item(item.id, item.question, item.reference, {"task": task, "entry": original})
        assert suite.score(given, item.reference) == 1.0
        assert suite.entry(given) == original


def test_generation_is_deterministic_across_instances(items: list[Item]) -> None:
    again = ReasoningGymSuite().items()
    assert [(i.id, i.question, i.reference) for i in again] == [
        (i.id, i.question, i.reference) for i in items
    ]


def _of(items: list[Item], task: str) -> list[Item]:
    return [item for item in items if item.meta["task"] == task]


def test_decimal_arithmetic_is_the_benchmarks_hard_setting(items: list[Item]) -> None:
    # arXiv 2505.24760, Appendix A.3: 5-8 decimal places, 5-8 terms, precision 10.
    places: set[int] = set()
    terms: set[int] = set()
    for item in _of(items, "decimal_arithmetic"):
        head, expression = item.question.split("\n")
        assert "maximum of 10 significant digits" in head
        operands = re.findall(r"\d+\.(\d+)", expression)
        terms.add(len(operands))
        places.update(len(decimals) for decimals in operands)
    assert places == {5, 6, 7, 8}
    assert terms == {5, 6, 7, 8}


def test_geometry_binary_and_letters_are_the_benchmarks_hard_setting(items: list[Item]) -> None:
    coordinates = [
        abs(int(c))
        for item in _of(items, "advanced_geometry")
        for c in re.findall(r"-?\d+", " ".join(re.findall(r"=\((-?\d+, -?\d+)\)", item.question)))
    ]
    assert len(coordinates) == 6 * 100
    assert 90 < max(coordinates) <= 100  # within +-100, and well beyond the default +-10
    lengths = [
        len(re.findall(r"[01]{10,}", item.question)[-1])
        for item in _of(items, "binary_alternation")
    ]
    assert 50 <= min(lengths) < 70
    assert 480 < max(lengths) <= 500
    words = [
        len(re.search(r'in the text: "(.*)"\?$', item.question).group(1).split())  # type: ignore[union-attr]
        for item in _of(items, "letter_counting")
    ]
    assert (min(words), max(words)) == (25, 50)


def test_the_same_seed_gives_the_same_problems_and_another_seed_others(items: list[Item]) -> None:
    # The 400 problems of seed 42, as pinned reasoning-gym generates them: a change of the
    # generator (an upgrade past the pin) or of the setting changes this hash.
    assert items_sha256(items) == (
        "7905b520d8aba71e7a62868f41c33209130a0b48948d2d2d9b7c44efc910fa8e"
    )
    other = ReasoningGymSuite(per_task=4, seed=7).items()
    assert {i.question for i in other}.isdisjoint(i.question for i in items)


def test_reasoning_gym_is_pinned_to_the_installed_version() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["dependencies"] if d.startswith("reasoning-gym")]
    assert pins == [f"reasoning-gym=={version('reasoning-gym')}"]


def test_small_suite_and_bad_settings() -> None:
    small = ReasoningGymSuite(per_task=2, tasks=["letter_counting", "decimal_arithmetic"])
    assert [i.id for i in small.items()] == [
        "letter_counting/0",
        "decimal_arithmetic/0",
        "letter_counting/1",
        "decimal_arithmetic/1",
    ]
    with pytest.raises(ConfigError, match="per_task"):
        ReasoningGymSuite(per_task=0)
    with pytest.raises(ConfigError, match="tasks"):
        ReasoningGymSuite(tasks=["no_such_task"])
    with pytest.raises(ConfigError, match="no hard setting"):
        ReasoningGymSuite(tasks=["chain_sum"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("first \\boxed{1}, then \\boxed{ {a}{b} } and finally \\boxed{3}", "3"),
        ("nested \\boxed{x^{2^{3}}} end", "x^{2^{3}}"),
        ("no box here", None),
        ("unclosed \\boxed{12", None),
        ("\\boxed{}", ""),
        ("\\boxed {(1.5, -2.25)}", "(1.5, -2.25)"),
        ("\\boxed{7} and a bare \\boxed 5 at the end", "7"),
    ],
)
def test_extract_last_boxed(text: str, expected: str | None) -> None:
    assert extract_last_boxed(text) == expected


def test_judge_reference_and_garbage(suite: ReasoningGymSuite, items: list[Item]) -> None:
    for item in items:
        verdict = suite.judge(item, f"Reasoning...\n\\boxed{{{item.reference}}}")
        assert verdict == Verdict(1.0, item.reference)
        assert suite.judge(item, "\\boxed{garbage}").score < 1.0
    assert suite.judge(items[0], "no answer") == Verdict(0.0, None, "no \\boxed{} answer")


def test_sim_responses_score_as_decided(suite: ReasoningGymSuite, items: list[Item]) -> None:
    for item in items:
        right = answers_for(suite).sim_response(item, True, 0)
        assert right.endswith(f"\\boxed{{{item.reference}}}")
        assert suite.judge(item, right).score == 1.0
        assert answers_for(suite).sim_is_correct(item, right)
        for seed in range(6):
            wrong = answers_for(suite).sim_response(item, False, seed)
            assert wrong == answers_for(suite).sim_response(item, False, seed)
            assert suite.judge(item, wrong).score < 1.0, (item.id, wrong)
            assert not answers_for(suite).sim_is_correct(item, wrong)


def test_wrong_answers_keep_the_reference_format(suite: ReasoningGymSuite) -> None:
    for item in suite.items()[:40]:
        wrong = extract_last_boxed(answers_for(suite).sim_response(item, False, 1))
        assert wrong is not None
        if item.reference.endswith("°"):
            assert wrong.endswith("°")
        if item.reference.startswith("("):
            assert wrong.startswith("(")
            assert wrong.count(",") == 1


def test_prompts_use_the_papers_templates(suite: ReasoningGymSuite, items: list[Item]) -> None:
    item = items[3]
    assert suite.warmup_prompt(item) == (
        f"Put the final answer within \\boxed{{}}.\nProblem:\n{item.question}\n\nSolution:"
    )
    demo = Demo(items[7].id, items[7].question, "so \\boxed{3}")
    prompt = suite.adaptive_prompt(item, [demo])
    assert prompt.startswith(
        f"Example 1\nProblem:\n{items[7].question}\n\nSolution:\nso \\boxed{{3}}"
    )
    assert prompt.endswith(f"Problem:\n{item.question}\n\nSolution:")


def test_pickle_round_trip_then_judge(suite: ReasoningGymSuite, items: list[Item]) -> None:
    clone = pickle.loads(pickle.dumps(suite))
    for item in items[:8]:
        assert clone.judge(item, f"\\boxed{{{item.reference}}}").score == 1.0
        assert clone.judge(item, answers_for(suite).sim_response(item, False, 3)).score < 1.0


def test_judge_in_a_spawned_worker(suite: ReasoningGymSuite, items: list[Item]) -> None:
    responses = [f"\\boxed{{{item.reference}}}" for item in items[:4]]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        verdicts = list(pool.map(suite.judge, items[:4], responses))
    assert [v.score for v in verdicts] == [1.0] * 4
