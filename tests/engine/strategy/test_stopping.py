"""ESC and ASC: per-question stopping by agreement, at the round barrier, with no oracle."""

from __future__ import annotations

import pytest

from ttc.engine import ConfigError, Item, RunConfig, Usage
from ttc.engine.contract._state import RunState, Scored
from ttc.engine.strategy import preset
from ttc.engine.strategy._stopping import BetaStop, WindowAgreement, beta_lead


def _state(rule: WindowAgreement | BetaStop) -> RunState:
    return RunState([Item("q", "?", "1")], rule)


def _round(state: RunState, t: int, answers: list[str | None]) -> None:
    for k, answer in enumerate(answers):
        scored = Scored("q", t, k, float(answer == "1"), answer)
        state.record_sample(0, t, k, f"x {answer}", Usage(), scored, answer == "1", False)
    state.close_round(t)


def test_beta_lead_known_values() -> None:
    # Beta(2, 1) > 1/2: 1 - 0.5**2; Beta(5, 1): 1 - 0.5**5; equal counts: one half
    assert beta_lead(1, 0) == pytest.approx(0.75)
    assert beta_lead(4, 0) == pytest.approx(1 - 1 / 32)
    assert beta_lead(3, 3) == pytest.approx(0.5)
    # Beta(7, 3) > 1/2 = P(Binomial(9, 1/2) <= 6) = 466 / 512
    assert beta_lead(6, 2) == pytest.approx(466 / 512)


def test_esc_stops_at_the_first_window_that_agrees() -> None:
    state = _state(WindowAgreement())
    _round(state, 1, ["1", "2", "1"])  # disagrees
    assert state.unsolved_rows() == [0]
    _round(state, 2, ["2", "2", None])  # one response without an answer: no agreement
    assert state.unsolved_rows() == [0]
    _round(state, 3, ["2", "2", "2"])  # agrees: stopped, though "2" is not the majority...
    assert state.solved_rows() == [0]
    assert state.records[0].consensus_round == 3
    pick = state.selected(0)  # ...the final answer is the majority over every response: 2 (5x)
    assert pick is not None
    assert pick.answer == "2"
    _round(state, 4, ["1", "3", "1"])  # stopped for good
    assert state.records[0].consensus_round == 3


def test_esc_with_one_sample_a_round_makes_windows_of_two_rounds() -> None:
    state = _state(WindowAgreement())
    _round(state, 1, ["1"])  # a window of one: not yet checked
    assert state.unsolved_rows() == [0]
    _round(state, 2, ["2"])  # the window 1, 2 disagrees; the next starts after it
    assert state.unsolved_rows() == [0]
    _round(state, 3, ["2"])
    assert state.unsolved_rows() == [0]
    _round(state, 4, ["2"])  # the window 2, 2 agrees
    assert state.records[0].consensus_round == 4


def test_asc_stops_once_the_leader_is_likely_to_stay_ahead() -> None:
    state = _state(BetaStop(threshold=0.95))
    _round(state, 1, ["1", "1", "2"])  # 2 vs 1: 0.6875
    assert state.unsolved_rows() == [0]
    _round(state, 2, ["1", "1", None])  # 4 vs 1: P(Bin(6) <= 4) = 57/64 = 0.89
    assert state.unsolved_rows() == [0]
    _round(state, 3, ["1", "1", "1"])  # 7 vs 1: 0.98
    assert state.records[0].consensus_round == 3
    assert state.accurate_count() == 1


def test_the_presets_and_their_checks() -> None:
    esc = preset(RunConfig(method="esc", k=4))
    assert esc.judgement.describe()["name"] == "esc"
    assert esc.intervention.name == "zero-shot"
    assert preset(RunConfig(method="asc", asc_threshold=0.9)).judgement.describe() == {
        "name": "asc",
        "criterion": "beta",
        "threshold": 0.9,
    }
    with pytest.raises(ConfigError, match="--judge: asc is judged by its own"):
        RunConfig(method="asc", judge="truth")
