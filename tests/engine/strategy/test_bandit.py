"""The bandit allocation: a round's budget over the unsolved questions by entropy or UCB."""

from __future__ import annotations

import math

import pytest

from ttc.engine import ConfigError, Item, RunConfig, Usage
from ttc.engine.contract._state import RunState, Scored
from ttc.engine.strategy import GroundTruth, preset
from ttc.engine.strategy._bandit import Bandit, answer_entropy


def _state(answers: dict[int, list[str]]) -> RunState:
    items = [Item(f"q{i}", "?", "right") for i in range(len(answers) + 1)]
    state = RunState(items, GroundTruth(tallies=True))
    for row, given in answers.items():
        for k, answer in enumerate(given):
            scored = Scored(f"q{row}", 1, k, 0.0, answer)
            state.record_sample(row, 1, k, answer, Usage(), scored, False, False)
    scored = Scored(f"q{len(answers)}", 1, 0, 1.0, "right")  # the last one is solved
    state.record_sample(len(answers), 1, 0, "right", Usage(), scored, True, True)
    state.close_round(1)
    return state


def test_entropy_gives_scattered_answers_more_than_one_wrong_answer_repeated() -> None:
    assert answer_entropy([2, 2]) == pytest.approx(math.log(2))
    assert answer_entropy([4]) == 0.0
    state = _state({0: ["a", "a", "a", "a"], 1: ["a", "b", "c", "d"], 2: ["a", "a", "b", "b"]})
    plan = Bandit("entropy", floor=0.1).allocate(2, state, 4)
    assert sum(plan.values()) == 12  # K x the three unsolved questions, the solved one none
    assert 3 not in plan
    assert plan[1] > plan[2] > plan.get(0, 0)
    assert plan.get(0, 0) >= 1  # its floor


def test_ucb_favours_the_questions_sampled_least() -> None:
    state = _state({0: ["a"] * 8, 1: ["a", "b"]})
    plan = Bandit("ucb", per_question=3, floor=0.0).allocate(2, state, 1)
    assert sum(plan.values()) == 6
    assert plan[1] > plan[0]


def test_the_preset_tallies_answers_and_records_its_flags() -> None:
    config = RunConfig(method="bandit", bandit_rule="ucb", bandit_c=2.0, k=2)
    strategy = preset(config)
    assert strategy.judgement.tallies
    assert strategy.allocation.describe() == {
        "name": "bandit",
        "rule": "ucb",
        "per_question": None,
        "c": 2.0,
        "floor": 0.1,
    }
    with pytest.raises(ConfigError, match="--bandit-rule"):
        RunConfig(method="bandit", bandit_rule="thompson")
