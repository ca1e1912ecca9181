"""Every preset of the one Strategy against scripted fakes: allocation, prompts, verdicts, answers.

da (difficulty-aware allocation), unif with a matched budget, temp, fixed-icl, sc
(self-consistency), the reward-model judge, the noisy judge, accuracy next to coverage, and the
sim stand-ins of the judge and difficulty models.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, TableEmbedder, items

from ttc.adapters.sim._sim import SimDifficulty, SimJudge, SimProvider
from ttc.adapters.suites._math import answer_key as math_answer_key
from ttc.adapters.suites._reasoning_gym import extract_last_boxed
from ttc.adapters.suites._templates import adaptive_prompt, warmup_prompt
from ttc.engine import (
    BadRequest,
    Completion,
    ConfigError,
    Engine,
    EngineOptions,
    Fatal,
    Item,
    Provider,
    RunConfig,
    RunResult,
    StopKind,
    StopReason,
    Usage,
    Verdict,
)
from ttc.engine.cli import RunSpec, build_parser, run_config, share_warmup
from ttc.engine.cli._commands import role_totals
from ttc.engine.cli._wiring import matched_budget
from ttc.engine.contract._types import Message, Request
from ttc.engine.journal._journal import journal_text, read_journal
from ttc.engine.journal._rundir import matched_output_tokens
from ttc.engine.run import PROVIDER_STOP
from ttc.engine.send._prices import Price
from ttc.engine.strategy._demos import default_path, load_fewshot
from ttc.engine.strategy._difficulty import NEUTRAL, apportion, parse_rating
from ttc.engine.strategy._difficulty import prompt as difficulty_prompt
from ttc.engine.strategy._judges import unit_draw
from ttc.engine.strategy._rubric import parse_score, rubric, split_rubric

RIGHT = "right:{} worked solution"


def right(item_id: str) -> str:
    return RIGHT.format(item_id)


async def run(
    provider: ScriptedProvider,
    n: int,
    *,
    embedder: TableEmbedder | None = None,
    out: Path | None = None,
    roles: dict[str, Provider] | None = None,
    suite: FakeSuite | None = None,
    resume: bool = False,
    price: Price | None = None,
    **cfg: Any,
) -> RunResult:
    cfg.setdefault("verifier_workers", 0)
    suite = suite or FakeSuite(pool=items(n))
    config = RunConfig(**cfg)
    async with Engine(
        provider,
        suite,
        config,
        embedder=embedder,
        out_dir=out,
        roles=roles,
        resume=resume,
        options=EngineOptions(price=price),
    ) as engine:
        return await engine.run()


def events(out: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_journal(out / "journal.jsonl") if e["ev"] == kind]


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def by_round(provider: ScriptedProvider, n: int) -> list[list[Request]]:
    """The provider's requests, cut into rounds (every question samples once per round)."""
    return [provider.history[i : i + n] for i in range(0, len(provider.history), n)]


# -- difficulty-aware allocation (Appendix B) ----------------------------------------------------


def test_apportion_preserves_the_total_and_breaks_ties_by_row() -> None:
    # quotas 0.52, 1.55, 3.10, 2.84: floors 0, 1, 3, 2; the two largest remainders get one more
    assert apportion(8, {2: 1.0, 3: 3.0, 4: 6.0, 5: 5.5}) == {2: 0, 3: 2, 4: 3, 5: 3}
    assert apportion(3, dict.fromkeys(range(4), 1.0)) == {0: 1, 1: 1, 2: 1, 3: 0}
    assert apportion(0, {0: 1.0}) == {0: 0}
    assert apportion(4, {0: 0.0, 1: 0.0}) == {0: 2, 1: 2}
    rng = np.random.default_rng(0)
    for _ in range(200):
        weights = {
            i: float(w) for i, w in enumerate(rng.uniform(1, 10, size=int(rng.integers(1, 9))))
        }
        total = int(rng.integers(0, 50))
        counts = apportion(total, weights)
        assert sum(counts.values()) == total
        assert all(c >= 0 for c in counts.values())
        # Each count is its exact quota rounded down or up.
        mass = sum(weights.values())
        for key, c in counts.items():
            assert abs(c - total * weights[key] / mass) < 1


@pytest.mark.parametrize(
    ("text", "rating"),
    [
        ("Difficulty: 7", 7.0),
        ("It needs care.\nDifficulty: **8**", 8.0),
        ("I would rate it 6/10.", 6.0),
        ("4", 4.0),
        ("Difficulty: 12", None),
        ("hard to say", None),
        ("Steps 1, 2 and 3 are easy", None),
    ],
)
def test_parse_rating(text: str, rating: float | None) -> None:
    assert parse_rating(text) == rating


def difficulty_script() -> ScriptedProvider:
    return ScriptedProvider(
        {"q2": ["Difficulty: 1"], "q3": ["Difficulty: 3"], "q4": ["I'd say 6/10"], "q5": ["hmm"]},
        name="scripted-rater",
    )


async def test_da_spends_the_budget_in_proportion_to_difficulty(tmp_path: Path) -> None:
    # q0 and q1 are solved in the warm-up; q2..q5 never. Budget: (R - R_warm) x K x 4 = 16
    # samples, 8 a round; ratings 1, 3, 6 and the neutral 5.5 for the reply without one.
    policy = ScriptedProvider({"q0": [right("q0")], "q1": [right("q1")]})
    rater = difficulty_script()
    result = await run(
        policy, 6, out=tmp_path, roles={"difficulty": rater}, method="da", rounds=3, k=2
    )
    assert [s.planned for s in result.rounds] == [12, 8, 8]
    assert [s.active for s in result.rounds] == [6, 3, 3]
    assert dict(policy.calls) == {"q0": 2, "q1": 2, "q2": 2, "q3": 6, "q4": 8, "q5": 8}
    # Rated once each, only the questions the warm-up left unresolved.
    assert sorted(r.item_id for r in rater.history) == ["q2", "q3", "q4", "q5"]
    [asked] = rater.requests_for("q4")
    assert asked.messages[0].content == difficulty_prompt("question number 4")
    # The per-round share of a question may exceed K; every sample has its own seed.
    q4 = [r for r in policy.requests_for("q4")][2:5]
    assert len({r.sampling.seed for r in q4}) == 3
    summary = load(tmp_path / "summary.json")
    assert summary["roles"]["difficulty"]["calls"] == 4
    assert summary["roles"]["difficulty"]["unparsed"] == 1
    ratings = {e["item"]: e["rating"] for e in events(tmp_path, "difficulty")}
    assert ratings == {"q2": 1.0, "q3": 3.0, "q4": 6.0, "q5": None}
    assert NEUTRAL == 5.5
    # A resumed run asks neither model again.
    again, rater2 = ScriptedProvider(), difficulty_script()
    resumed = await run(
        again,
        6,
        out=tmp_path,
        roles={"difficulty": rater2},
        resume=True,
        method="da",
        rounds=3,
        k=2,
    )
    assert again.history == []
    assert rater2.history == []
    assert [s.planned for s in resumed.rounds] == [12, 8, 8]


async def test_da_and_unif_match_another_runs_output_tokens(tmp_path: Path) -> None:
    from ttc.engine.journal._rundir import output_tokens_of

    # Every response is 10 output tokens. elim: 6 + 4 + 4 samples = 140 tokens.
    script: dict[str, list[Step]] = {"q0": [right("q0")], "q1": [right("q1")]}
    await run(ScriptedProvider(dict(script)), 6, out=tmp_path / "elim", method="elim", rounds=3)
    target = output_tokens_of(tmp_path / "elim")
    assert target == 140
    # da: (140 - 60) / 10 tokens per sample = 8 samples, 4 a round.
    da = await run(
        ScriptedProvider(dict(script)),
        6,
        roles={"difficulty": difficulty_script()},
        method="da",
        rounds=3,
        match_tokens=target,
    )
    assert [s.planned for s in da.rounds] == [6, 4, 4]
    assert da.usage.output_tokens == 140
    # unif: 60 tokens a round, so N = round(140 / 60) = 2 rounds; rounds 3 and 4 sample nothing
    # and carry the coverage of round 2 forward.
    policy = ScriptedProvider({"q0": [right("q0")], "q1": ["wrong", right("q1")]})
    unif = await run(policy, 6, method="unif", rounds=4, match_tokens=target)
    assert [s.active for s in unif.rounds] == [6, 6, 0, 0]
    assert dict(policy.calls) == {f"q{i}": 2 for i in range(6)}
    assert [s.coverage for s in unif.rounds] == [1 / 6, 2 / 6, 2 / 6, 2 / 6]
    assert all(s.complete for s in unif.rounds)


# -- temperature schedule, fixed few-shot ----------------------------------------------------------


async def test_temp_raises_the_temperature_each_round_with_zero_shot_prompts() -> None:
    provider = ScriptedProvider()
    await run(provider, 2, method="temp", rounds=3)
    rounds = by_round(provider, 2)
    assert [[r.sampling.temperature for r in rs] for rs in rounds] == [
        [0.3] * 2,
        [0.7] * 2,
        [1.1] * 2,
    ]
    for req in provider.history:
        assert not req.demos
        assert req.messages[0].content == warmup_prompt(
            "reasoning_gym", f"question number {req.item_id[1:]}"
        )
    # The schedule starts at --temperature when given; each round's seeds stay as elim's.
    started = ScriptedProvider()
    await run(started, 2, method="temp", rounds=2, sampling=_sampling(0.5))
    assert [r.sampling.temperature for r in started.history] == [0.5, 0.5, 0.9, 0.9]
    elim = ScriptedProvider()
    await run(elim, 2, method="elim", rounds=2)
    assert [r.sampling.seed for r in started.history] == [r.sampling.seed for r in elim.history]


def _sampling(temperature: float) -> Any:
    from ttc.engine import Sampling

    return Sampling(temperature=temperature)


def test_the_shipped_4shot_prompt_has_boxed_answers() -> None:
    shots = load_fewshot(None, "math500")
    assert len(shots.demos) == 4
    assert shots.demos[0].question.startswith("Find the domain of the expression")
    answers = [extract_last_boxed(d.response) for d in shots.demos]
    assert answers == ["[2,5)", "24", "16", "-\\frac{2}{3}"]
    assert default_path().is_file()
    assert load_fewshot(None, "minerva").sha256 == shots.sha256
    with pytest.raises(ConfigError, match="--fewshot"):
        load_fewshot(None, "gpqa")


async def test_fixed_icl_shows_the_same_few_shot_prompt_every_adaptive_round(
    tmp_path: Path,
) -> None:
    shots = load_fewshot(None, "math500")
    provider = ScriptedProvider({"q0": [right("q0")]})
    suite = FakeSuite(name="math500", pool=items(3))
    await run(provider, 3, suite=suite, method="fixed-icl", rounds=3)
    rounds = by_round(provider, 3)
    # The warm-up is zero-shot; q0 is solved and eliminated; q1 and q2 see the 4 shots.
    assert all(not r.demos for r in rounds[0])
    adaptive = provider.history[3:]
    assert sorted(r.item_id for r in adaptive) == ["q1", "q1", "q2", "q2"]
    for req in adaptive:
        assert [d.item_id for d in req.demos] == [f"fewshot/{i}" for i in range(1, 5)]
        pairs = [(d.question, d.response) for d in shots.demos]
        expected = adaptive_prompt("reasoning_gym", f"question number {req.item_id[1:]}", pairs)
        assert req.messages[0].content == expected
    # A file of one's own; a suite with no default and no file is refused, naming the flag.
    own = tmp_path / "shots.jsonl"
    own.write_text(json.dumps({"question": "1+1?", "response": "\\boxed{2}"}) + "\n")
    mine = ScriptedProvider()
    await run(mine, 2, method="fixed-icl", rounds=2, fewshot=str(own))
    assert [(d.question, d.response) for d in mine.history[-1].demos] == [("1+1?", "\\boxed{2}")]
    with pytest.raises(ConfigError, match="--fewshot"):
        await run(ScriptedProvider(), 2, method="fixed-icl", rounds=2)
    own.write_text('{"question": "no response"}\n')
    with pytest.raises(ConfigError, match=r"--fewshot.*response"):
        await run(ScriptedProvider(), 2, method="fixed-icl", rounds=2, fewshot=str(own))


# -- self-consistency ----------------------------------------------------------------------------


@pytest.mark.parametrize("neighbours", ["solved", "fixed"])
async def test_sc_resolves_by_consensus_and_shows_majority_answers(
    tmp_path: Path, neighbours: str
) -> None:
    vectors = {"q0": [1.0, 0.0, 0.0], "q1": [0.9, 0.1, 0.0], "q2": [0.0, 1.0, 0.0]}
    provider = ScriptedProvider(
        {
            # After round 3: the right answer 2 of 3 (>= 0.6): resolved, majority right.
            "q0": ["wrong A", right("q0"), right("q0")],
            # Never two alike: never resolved; its answer is the first given (a tie).
            "q1": ["a1", "a2", "a3", "a4"],
            # Right in round 1 but no oracle: sampled on; after round 3 "w" 2 of 3 wins.
            "q2": [right("q2"), "w", "w"],
        }
    )
    result = await run(
        provider,
        3,
        embedder=TableEmbedder(vectors),
        out=tmp_path,
        method="sc",
        neighbours=neighbours,
        rounds=4,
        p=1,
        consensus=0.6,
    )
    assert dict(provider.calls) == {"q0": 3, "q1": 4, "q2": 3}
    assert [s.active for s in result.rounds] == [3, 3, 3, 1]
    assert [s.solved for s in result.rounds] == [0, 0, 2, 2]
    # Coverage by ground truth (some response right); accuracy of the majority answer.
    assert [s.covered for s in result.rounds] == [1, 2, 2, 2]
    assert [s.accurate for s in result.rounds] == [1, 1, 1, 1]
    assert (result.coverage, result.accuracy) == (2 / 3, 1 / 3)
    # Round 4: q1's neighbour q0 is resolved; its demonstration carries the majority answer
    # (the first response that gave it, round 2's), not its first response.
    [last] = provider.history[9:]
    assert last.item_id == "q1"
    assert [(d.item_id, d.response) for d in last.demos] == [("q0", right("q0"))]
    expected = adaptive_prompt(
        "reasoning_gym", "question number 1", [("question number 0", right("q0"))]
    )
    assert last.messages[0].content == expected
    results = {
        r["id"]: r
        for r in map(orjson.loads, (tmp_path / "results.jsonl").read_bytes().splitlines())
    }
    assert results["q0"]["answer"] == right("q0")
    assert results["q0"]["answer_round"] == 2
    assert results["q0"]["accurate"]
    assert results["q0"]["solved"]
    assert results["q2"]["answer"] == "w"
    assert results["q2"]["covered"]
    assert not results["q2"]["accurate"]
    assert results["q1"]["answer"] == "a1"
    assert not results["q1"]["solved"]
    # No response is "accepted" under self-consistency.
    assert not any(e["passed"] for e in events(tmp_path, "verdict"))
    summary = load(tmp_path / "summary.json")
    assert (summary["coverage"], summary["accuracy"], summary["solved"]) == (2 / 3, 1 / 3, 2)
    assert summary["judgement"] == "consensus"


# -- reward model, noise -------------------------------------------------------------------------


def test_parse_score() -> None:
    assert parse_score("The answer is right.\nScore: 8") == 0.8
    assert parse_score("Score: **10**") == 1.0
    assert parse_score("**Score:** 9") == 0.9
    assert parse_score("Score (0-10): 7") == 0.7
    assert parse_score("score = 7/10") == 0.7
    assert parse_score("Score: 6\nScore: 9") == 0.9
    assert parse_score("I give it 9 out of 10") == 0.9
    assert parse_score("Rating: 8/10") == 0.8
    assert parse_score("6") == 0.6
    assert parse_score(" 6 \n") == 0.6
    assert parse_score("Score: 11") is None
    assert parse_score("looks fine, steps 1 and 2 check out") is None
    assert parse_score("") is None


@pytest.mark.parametrize(
    "text",
    [
        "The answer 1/2 is wrong",
        "The answer 1/2 is wrong; the correct answer is 5/6.",
        "The response finds x = 3/4, which matches. Correct.",
        "I would give this a score of 9.",
        "Step 3 is fine",
        "Score: 4/5",
        "Score: N",
        "it is 10/100 wrong",
    ],
)
def test_parse_score_takes_no_number_that_is_not_an_explicit_score(text: str) -> None:
    assert parse_score(text) is None


def judge_script() -> ScriptedProvider:
    return ScriptedProvider(
        {"q0": ["Score: 3", "Score: 8"], "q1": ["looks fine to me", "Score: 7/10"]},
        name="scripted-judge",
    )


async def test_the_reward_model_decides_and_ground_truth_only_evaluates(tmp_path: Path) -> None:
    # q0: right but rated 3 (kept going), then wrong but rated 8 (accepted: eliminated).
    # q1: wrong with an unreadable rating (0, counted), then right rated 7/10 (accepted).
    policy = ScriptedProvider({"q0": [right("q0"), "wrong"], "q1": ["wrong", right("q1")]})
    judge = judge_script()
    result = await run(
        policy, 2, out=tmp_path, roles={"judge": judge}, method="elim", judge="reward", rounds=3
    )
    assert [s.active for s in result.rounds] == [2, 2, 0]
    assert [s.solved for s in result.rounds] == [0, 2, 2]
    assert [s.coverage for s in result.rounds] == [0.5, 1.0, 1.0]
    # The final answer is the highest-rewarded response: q0's wrong one.
    assert [s.accuracy for s in result.rounds] == [0.5, 0.5, 0.5]
    assert result.response("q0") == "wrong"
    # The judge saw the rubric with the question and the response.
    first = judge.requests_for("q0")[0]
    assert first.messages[0].content == rubric("question number 0", right("q0"))
    assert "rate the correctness" in first.messages[0].content.lower()
    verdicts = {(e["item"], e["round"]): e for e in events(tmp_path, "verdict")}
    assert verdicts["q0", 1]["correct"]
    assert not verdicts["q0", 1]["passed"]
    assert verdicts["q0", 2]["passed"]
    assert not verdicts["q0", 2]["correct"]
    assert verdicts["q1", 1]["reward"] == 0.0
    assert len(events(tmp_path, "judge")) == 4
    summary = load(tmp_path / "summary.json")
    roles = summary["roles"]["judge"]
    assert (roles["calls"], roles["unparsed"], roles["output_tokens"]) == (4, 1, 40)
    assert roles["provider"] == "scripted-judge"
    assert summary["rounds"][0]["judge_output_tokens"] == 20
    # The judge's tokens are not the policy's.
    assert summary["output_tokens"] == 40
    # Resume asks neither model again; with the ratings cut from the journal, only the judge.
    policy2, judge2 = ScriptedProvider(), judge_script()
    kwargs: dict[str, Any] = {"method": "elim", "judge": "reward", "rounds": 3}
    await run(policy2, 2, out=tmp_path, roles={"judge": judge2}, resume=True, **kwargs)
    assert policy2.history == []
    assert judge2.history == []
    path = tmp_path / "journal.jsonl"
    kept = [ln for ln in journal_text(path) if b'"ev":"judge"' not in ln]
    path.write_bytes(b"".join(kept))
    policy3, judge3 = ScriptedProvider(), judge_script()
    again = await run(policy3, 2, out=tmp_path, roles={"judge": judge3}, resume=True, **kwargs)
    assert policy3.history == []
    assert len(judge3.history) == 4
    assert [s.solved for s in again.rounds] == [0, 2, 2]


async def test_noise_flips_verdicts_by_a_seeded_draw_and_resume_reproduces_them(
    tmp_path: Path,
) -> None:
    script: dict[str, list[Step]] = {f"q{i}": [right(f"q{i}")] * 3 for i in range(0, 20, 2)}
    result = await run(
        ScriptedProvider(dict(script)), 20, out=tmp_path, method="elim", rounds=3, noise=0.3, seed=5
    )
    verdicts = events(tmp_path, "verdict")
    flips = 0
    for e in verdicts:
        flipped = unit_draw(5, "noise", e["item"], e["round"], e["k"]) < 0.3
        assert e["flipped"] == flipped
        assert e["passed"] == (e["correct"] != flipped)
        flips += flipped
    assert 0 < flips < len(verdicts)
    # Elimination follows the noisy verdicts; coverage and accuracy the ground truth.
    assert result.rounds[0].solved == sum(e["passed"] for e in verdicts if e["round"] == 1)
    assert result.coverage == 0.5
    before = (tmp_path / "results.jsonl").read_bytes()
    again = ScriptedProvider()
    await run(again, 20, out=tmp_path, resume=True, method="elim", rounds=3, noise=0.3, seed=5)
    assert again.history == []
    assert (tmp_path / "results.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("method", "neighbours"), [("adpt", "solved"), ("adpt", "fixed"), ("rand", "solved")]
)
async def test_noisy_judge_falls_back_to_the_most_recent_response(
    method: str, neighbours: str
) -> None:
    # No flip happens at this p (checked); neither question is ever right. Each is the other's
    # only neighbour (similar, fixed or random) and, with no accepted response, shows its most
    # recent one as it stood when the round was planned (--pool latest).
    p = 1e-9
    assert all(unit_draw(0, "noise", f"q{i}", t, 0) >= p for i in range(2) for t in range(1, 4))
    provider = ScriptedProvider({"q0": ["w0a", "w0b", "w0c"], "q1": ["w1a", "w1b", "w1c"]})
    vectors = {"q0": [1.0, 0.0], "q1": [0.9, 0.1]}
    result = await run(
        provider,
        2,
        embedder=TableEmbedder(vectors),
        method=method,
        neighbours=neighbours,
        rounds=3,
        p=1,
        noise=p,
        pool="latest",
    )
    shown = [(r.item_id, [(d.item_id, d.response) for d in r.demos]) for r in provider.history]
    assert sorted(shown[2:4]) == [("q0", [("q1", "w1a")]), ("q1", [("q0", "w0a")])]
    assert sorted(shown[4:6]) == [("q0", [("q1", "w1b")]), ("q1", [("q0", "w0b")])]
    assert result.solved == 0
    # Ground truth: a question with no accepted response shows nothing.
    plain = ScriptedProvider({"q0": ["w0a", "w0b"], "q1": ["w1a", "w1b"]})
    await run(plain, 2, embedder=TableEmbedder(vectors), method="adpt", rounds=2, p=1)
    assert all(not r.demos for r in plain.history)


async def test_accuracy_equals_coverage_under_ground_truth() -> None:
    provider = ScriptedProvider({"q0": [right("q0")], "q1": ["wrong", right("q1")]})
    result = await run(provider, 3, method="elim", rounds=3)
    assert [s.accuracy for s in result.rounds] == [s.coverage for s in result.rounds]
    assert (result.covered, result.accurate, result.solved) == (2, 2, 2)


# -- configuration and resume ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "flag"),
    [
        ({"method": "sc", "judge": "reward"}, "--judge"),
        ({"judge": "oracle"}, "--judge"),
        ({"method": "elim", "match_tokens": 100}, "--match-tokens"),
        ({"method": "unif", "match_tokens": 100, "warmup_rounds": 0}, "--match-tokens"),
        ({"method": "sc", "noise": 0.05}, "--noise"),
        ({"noise": 1.0}, "--noise"),
        ({"method": "adpt", "fewshot": "x.jsonl"}, "--fewshot"),
        ({"judge_threshold": 0.0}, "--judge-threshold"),
        ({"consensus": 1.5}, "--consensus"),
        ({"consensus": 1.0}, "--consensus"),
        ({"judge_temperature": -0.1}, "--judge-temperature"),
        ({"method": "best"}, "--method"),
    ],
)
def test_bad_method_flags_name_the_flag(bad: dict[str, Any], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        RunConfig(**bad)


async def test_a_role_model_must_be_given_and_a_resume_must_match_the_strategy(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="--judge-model"):
        await run(ScriptedProvider(), 2, judge="reward")
    with pytest.raises(ConfigError, match="--difficulty-model"):
        await run(ScriptedProvider(), 2, method="da")
    await run(ScriptedProvider(), 2, out=tmp_path, method="elim", rounds=2)
    config = load(tmp_path / "config.json")
    assert config["strategy"] == {
        "allocation": {"name": "elimination"},
        "intervention": {"name": "zero-shot"},
        "judgement": {"name": "ground-truth", "gamma": 1.0},
    }
    with pytest.raises(ConfigError, match="--noise"):
        await run(
            ScriptedProvider(), 2, out=tmp_path, resume=True, method="elim", rounds=2, noise=0.05
        )
    # A config written before a setting existed resumes as that setting's default.
    del config["config"]["noise"]
    (tmp_path / "config.json").write_bytes(orjson.dumps(config))
    again = ScriptedProvider()
    await run(again, 2, out=tmp_path, resume=True, method="elim", rounds=2)
    assert again.history == []


# -- the sim stand-ins ---------------------------------------------------------------------------


async def test_sim_judge_and_rater_answer_the_real_prompts_meaningfully() -> None:
    suite = FakeSuite(pool=items(300))
    pool = suite.items()
    judge, rater = SimJudge(suite, pool), SimDifficulty(suite, pool)
    scores: dict[bool, list[float]] = {True: [], False: []}
    unparsed = 0
    for item in pool:
        for ok in (True, False):
            text = suite.sim_response(item, ok, 0)
            req = Request((Message("user", rubric(item.question, text)),), item_id=item.id)
            reply = (await judge.generate(req)).texts[0]
            score = parse_score(reply)
            unparsed += score is None
            if score is not None:
                scores[ok].append(score)
    assert np.mean(scores[True]) - np.mean(scores[False]) > 0.4
    assert 0 < unparsed < 40
    policy = SimProvider(suite, pool)
    latent, rated = [], []
    for item in pool:
        req = Request((Message("user", difficulty_prompt(item.question)),), item_id=item.id)
        rating = parse_rating((await rater.generate(req)).texts[0])
        if rating is not None:
            latent.append(policy.difficulty(item.id))
            rated.append(rating)
    assert np.corrcoef(latent, rated)[0, 1] > 0.6
    assert judge.model != rater.model
    assert judge.model.startswith("sim-judge-1@")
    with pytest.raises(Exception, match="rubric"):
        await judge.generate(Request((Message("user", "hi"),), item_id=pool[0].id))


async def test_sim_temperature_pulls_towards_even_odds() -> None:
    from ttc.engine import Sampling

    suite = FakeSuite(pool=items(50))
    sim = SimProvider(suite, suite.items())
    for item in suite.items():
        req = Request((Message("user", "x"),), item_id=item.id)
        p_default = sim.success_probability(req)
        p_ref = sim.success_probability(
            Request((Message("user", "x"),), Sampling(temperature=0.3), item_id=item.id)
        )
        p_hot = sim.success_probability(
            Request((Message("user", "x"),), Sampling(temperature=1.5), item_id=item.id)
        )
        assert p_default == pytest.approx(p_ref)
        assert abs(p_hot - 0.5) <= abs(p_ref - 0.5) + 1e-12


# -- the command line, end to end ------------------------------------------------------------------

TTC = str(Path(sys.executable).with_name("ttc"))


def ttc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TTC_CACHE_DIR": str(cwd / ".ttc-cache")}
    return subprocess.run(
        [TTC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.slow
def test_ttc_run_da_then_unif_matched_to_it_then_a_reward_judge(tmp_path: Path) -> None:
    common = ["--per-task", "4", "--embedder", "lexical", "--workers", "0", "-q"]
    da = ttc("run", "--method", "da", *common, "--out", "da", cwd=tmp_path)
    assert da.returncode == 0, da.stderr
    assert "accuracy %" in da.stdout
    summary = load(tmp_path / "da" / "summary.json")
    assert summary["roles"]["difficulty"]["calls"] > 0
    unif = ttc(
        "run", "--method", "unif", "--match-tokens", "da", *common, "--out", "u", cwd=tmp_path
    )
    assert unif.returncode == 0, unif.stderr
    config = load(tmp_path / "u" / "config.json")
    assert config["config"]["match_tokens"] == summary["output_tokens"]
    reward = ttc("run", "--method", "adpt", "--judge", "reward", "--noise", "0.05", *common,
                 "--out", "r", cwd=tmp_path)  # fmt: skip
    assert reward.returncode == 0, reward.stderr
    s = load(tmp_path / "r" / "summary.json")
    assert s["judgement"] == "noisy-reward-model"
    assert s["roles"]["judge"]["calls"] == sum(r["samples"] for r in s["rounds"])
    judged = Counter(e["ev"] for e in read_journal(tmp_path / "r" / "journal.jsonl"))
    assert judged["judge"] == judged["verdict"]
    bad = ttc("run", "--method", "sc", "--judge", "reward", *common, "--out", "x", cwd=tmp_path)
    assert bad.returncode == 2
    [line] = bad.stderr.strip().splitlines()
    assert "--judge" in line


# -- review fixes: budgets, resume, role models, consensus -----------------------------------------


class LongWhenUnsolved(ScriptedProvider):
    """q0 and q1 answer in 10 output tokens, the others in 30: the questions left after the
    warm-up are the harder ones, and answer at greater length (as real models do)."""

    async def generate(self, request: Request) -> Completion:
        comp = await super().generate(request)
        tokens = 10 if request.item_id in ("q0", "q1") else 30
        return replace(comp, usage=Usage(comp.usage.input_tokens, tokens, 0))


async def test_da_matched_budget_is_in_tokens_and_lands_on_the_target() -> None:
    # Warm-up: 2 x 10 + 4 x 30 = 140 tokens, 23.3 a sample. Target 380: 240 for the adaptive
    # rounds, about 10 samples at the warm-up's length, 5 in round 2 (150 tokens at 30 each);
    # round 3 re-estimates at the 30 its samples took: 90 tokens left, 3 samples.
    script: dict[str, list[Step]] = {"q0": [right("q0")], "q1": [right("q1")]}
    da = await run(
        LongWhenUnsolved(dict(script)),
        6,
        roles={"difficulty": difficulty_script()},
        method="da",
        rounds=3,
        match_tokens=380,
    )
    assert [s.planned for s in da.rounds] == [6, 5, 3]
    assert da.usage.output_tokens == 380


async def test_da_matched_to_no_more_than_its_warmup_warns_and_asks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ttc")
    rater, policy = difficulty_script(), ScriptedProvider({"q0": [right("q0")]})
    da = await run(policy, 6, roles={"difficulty": rater}, method="da", rounds=3, match_tokens=60)
    assert [s.planned for s in da.rounds] == [6, 0, 0]
    assert rater.history == []
    assert len(policy.history) == 6
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "at or below this run's warm-up" in warning.getMessage()
    assert "no difficulty ratings" in warning.getMessage()


async def test_match_tokens_refuses_another_test_set_and_logs_another_seed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ref = tmp_path / "elim"
    await run(ScriptedProvider(), 6, out=ref, method="elim", rounds=2, seed=1)
    assert matched_output_tokens(ref, "fake", items(6), 1) == 120
    with pytest.raises(ConfigError, match=r"--match-tokens: .*suite"):
        matched_output_tokens(ref, "math500", items(6), 1)
    with pytest.raises(ConfigError, match=r"--match-tokens: .*test set"):
        matched_output_tokens(ref, "fake", items(5), 1)
    # Through the command line's config: the flag's run is checked against this run's items.
    args = build_parser().parse_args(["run", "--method", "da", "--match-tokens", str(ref)])
    five = FakeSuite(pool=items(5))
    with pytest.raises(ConfigError, match="--match-tokens"):
        run_config(RunSpec.from_args(args), "da", suite=five, items=five.items())
    caplog.set_level(logging.INFO, logger="ttc")
    six = FakeSuite(pool=items(6))
    assert (
        run_config(RunSpec.from_args(args), "da", suite=six, items=six.items()).match_tokens == 120
    )
    assert any("used seed 1, this run seed 0" in r.getMessage() for r in caplog.records)


async def test_a_resumed_matched_run_keeps_the_budget_it_started_with(tmp_path: Path) -> None:
    ref, out = tmp_path / "elim", tmp_path / "unif"
    await run(ScriptedProvider(), 6, out=ref, method="elim", rounds=2)
    argv = ["run", "--method", "unif", "--match-tokens", str(ref), "--out", str(out)]
    suite = FakeSuite(pool=items(6))
    spec = RunSpec.from_args(build_parser().parse_args(argv))
    assert matched_budget(spec, suite, suite.items(), None) == 120
    await run(ScriptedProvider(), 6, out=out, method="unif", rounds=2, match_tokens=120)
    # The matched run moves away (or grows): a resumed run keeps the stored budget.
    ref.rename(tmp_path / "moved")
    resumed = build_parser().parse_args([*argv, "--resume"])
    assert matched_budget(RunSpec.from_args(resumed), suite, suite.items(), out) == 120


@dataclass
class RubricJudge(Provider):
    """Scores a right response 9 and a wrong one 1; the first call for each question in `fail`
    fails (an outage)."""

    fail: set[str]
    name: str = "rubric-judge"
    model: str = "rubric-judge-1"

    def __post_init__(self) -> None:
        self.history: list[Request] = []

    async def generate(self, request: Request) -> Completion:
        self.history.append(request)
        parts = split_rubric(request.messages[0].content)
        assert parts is not None
        if request.item_id in self.fail:
            self.fail.discard(request.item_id)
            raise BadRequest("judge outage")
        score = 9 if parts[1].startswith("right:") else 1
        return Completion((f"Score: {score}",), Usage(50, 5), ("stop",))

    async def aclose(self) -> None:
        return None


def cut_before_round(src: Path, dst: Path, round_no: int) -> None:
    """A copy of the run in `src` as if killed when round `round_no` sent its first sample."""
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    lines = list(journal_text(src / "journal.jsonl"))  # the copy is plain: as from before
    marker = b'"ev":"sample","round":%d' % round_no
    cut = next(i for i, line in enumerate(lines) if marker in line)
    (dst / "journal.jsonl").write_bytes(b"".join(lines[:cut]))


def per_round(result: RunResult) -> list[tuple[int, ...]]:
    return [
        (s.planned, s.active, s.solved, s.covered, s.accurate, s.judge_calls, s.judge_errors)
        for s in result.rounds
    ]


async def test_failed_judge_calls_are_settled_as_they_were_on_resume(tmp_path: Path) -> None:
    # Round 1: q0 and q1 are right, but the judge fails on them (score 0), so they are sampled
    # again in round 2. Killed as round 3 starts and resumed with the judge back, round 1 must
    # not be judged again: the rounds that acted on its failures would no longer add up.
    script: dict[str, list[Step]] = {
        "q0": [right("q0")] * 3,
        "q1": [right("q1"), "wrong", right("q1")],
        "q2": ["wrong", right("q2")],
    }
    kwargs: dict[str, Any] = {"method": "elim", "judge": "reward", "rounds": 3}
    ref = tmp_path / "ref"
    whole = await run(
        ScriptedProvider(dict(script)), 4, out=ref, roles={"judge": RubricJudge({"q0", "q1"})},
        **kwargs,
    )  # fmt: skip
    assert [s.solved for s in whole.rounds] == [0, 2, 3]
    cut = tmp_path / "cut"
    cut_before_round(ref, cut, 3)
    judge = RubricJudge(set())
    policy = ScriptedProvider({"q1": [right("q1")]})
    resumed = await run(policy, 4, out=cut, roles={"judge": judge}, resume=True, **kwargs)
    assert per_round(resumed) == per_round(whole)
    # Only round 3's two samples were sent and judged.
    assert sorted(r.item_id for r in policy.history) == ["q1", "q3"]
    assert sorted(r.item_id for r in judge.history) == ["q1", "q3"]
    assert (cut / "results.jsonl").read_bytes() == (ref / "results.jsonl").read_bytes()


async def test_failed_difficulty_ratings_are_settled_as_they_were_on_resume(
    tmp_path: Path,
) -> None:
    # q2's rating fails in the first session: neutral. Resumed (killed as round 3 starts) with
    # a rater that would now answer 1, q2 keeps its neutral rating, and round 3 its allotment.
    def flaky_rater() -> ScriptedProvider:
        rater = difficulty_script()
        rater.script["q2"] = [BadRequest("rater outage")]
        return rater

    kwargs: dict[str, Any] = {"method": "da", "rounds": 3, "k": 2}
    ref = tmp_path / "ref"
    policy = ScriptedProvider({"q0": [right("q0")], "q1": [right("q1")]})
    whole = await run(policy, 6, out=ref, roles={"difficulty": flaky_rater()}, **kwargs)
    cut = tmp_path / "cut"
    cut_before_round(ref, cut, 3)
    rater, again = difficulty_script(), ScriptedProvider()
    resumed = await run(again, 6, out=cut, roles={"difficulty": rater}, resume=True, **kwargs)
    assert rater.history == []
    assert per_round(resumed) == per_round(whole)
    round3 = Counter(r.item_id for r in policy.history[-whole.rounds[2].planned :])
    assert Counter(r.item_id for r in again.history) == round3
    summary = load(cut / "summary.json")
    assert (summary["roles"]["difficulty"]["errors"], summary["roles"]["difficulty"]["calls"]) == (
        1,
        3,
    )


async def test_role_calls_leave_the_temperature_to_the_api_unless_given() -> None:
    policy = ScriptedProvider({"q0": [right("q0")]})
    judge = RubricJudge(set())
    await run(policy, 2, roles={"judge": judge}, method="elim", judge="reward", rounds=2)
    assert {r.sampling.temperature for r in judge.history} == {None}
    hot = RubricJudge(set())
    await run(
        ScriptedProvider(), 2, roles={"judge": hot}, method="elim", judge="reward", rounds=2,
        judge_temperature=0.2,
    )  # fmt: skip
    assert {r.sampling.temperature for r in hot.history} == {0.2}
    args = build_parser().parse_args(["run", "--judge", "reward", "--judge-temperature", "0.2"])
    assert run_config(RunSpec.from_args(args), "adpt").judge_temperature == 0.2


class Refusing(Provider):
    """A role model that refuses every call (as api.openai.com refuses a temperature a
    reasoning model does not take)."""

    name, model = "refusing", "refusing-1"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        raise self.error

    async def aclose(self) -> None:
        return None


async def test_a_judge_that_keeps_failing_stops_the_run(tmp_path: Path) -> None:
    judge = Refusing(BadRequest("400: 'temperature' is not supported with this model"))
    result = await run(
        ScriptedProvider(), 40, out=tmp_path, roles={"judge": judge}, method="elim",
        judge="reward", rounds=3,
    )  # fmt: skip
    summary = load(tmp_path / "summary.json")
    assert summary["stopped"].startswith(PROVIDER_STOP)
    assert "32 judge model calls in a row failed" in summary["stopped"]
    assert not summary["complete"]
    assert len(result.rounds) == 1


async def test_a_rater_refused_for_the_account_stops_the_run(tmp_path: Path) -> None:
    rater = Refusing(Fatal("401: invalid api key", stops_run=True))
    await run(
        ScriptedProvider(), 4, out=tmp_path, roles={"difficulty": rater}, method="da", rounds=3,
        concurrency=1,
    )  # fmt: skip
    summary = load(tmp_path / "summary.json")
    assert summary["stopped"].startswith(f"{PROVIDER_STOP}: the difficulty model")
    assert rater.calls == 1
    assert summary["rounds"][1]["samples"] == 0


async def test_role_calls_are_priced_reported_and_count_towards_max_cost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # $1 an output token. The judge is the policy's own model, so it has the run's price: 4
    # samples of 10 tokens ($40) and 4 ratings of 5 ($20) in round 1.
    price = Price(0.0, 1e6, 0.0)
    policy = ScriptedProvider(model="m")
    judge = RubricJudge(set(), model="m")
    config = RunConfig(method="elim", judge="reward", rounds=2, verifier_workers=0, max_cost_usd=55)
    suite = FakeSuite(pool=items(4))
    async with Engine(
        policy,
        suite,
        config,
        out_dir=tmp_path / "a",
        roles={"judge": judge},
        options=EngineOptions(price=price),
    ) as engine:
        result = await engine.run()
    assert engine.stopped == StopReason(StopKind.BUDGET, "--max-cost $55 reached")
    assert result.stopped is not None
    assert result.stopped.exit_code == 3
    assert len(result.rounds) == 1
    summary = load(tmp_path / "a" / "summary.json")
    assert summary["cost_usd"] == pytest.approx(40.0)
    assert summary["roles"]["judge"]["cost_usd"] == pytest.approx(20.0)
    assert summary["role_cost_usd"] == pytest.approx(20.0)
    assert summary["total_cost_usd"] == pytest.approx(60.0)
    assert result.state is not None
    text = role_totals(engine, result.state, engine.cost(result.usage))
    assert "judge model m: tokens 200 input, 20 output, 0 thinking; cost $20.0000" in text
    assert "total cost, policy and role models: $60.0000" in text
    from ttc.engine.report._runreport import report

    assert "judge model m: 4 calls, tokens 200 input, 20 output, cost $20.0000" in report(
        [tmp_path / "a"], None
    )
    # --max-output-tokens counts the policy's tokens only: 40 after round 1 is under 45.
    capped = await run(
        ScriptedProvider(model="m"), 4, out=tmp_path / "b", roles={"judge": RubricJudge(set())},
        method="elim", judge="reward", rounds=2, max_output_tokens=45,
    )  # fmt: skip
    assert len(capped.rounds) == 2
    # A role model with no known price is said to be left out of --max-cost.
    caplog.set_level(logging.WARNING, logger="ttc")
    await run(
        ScriptedProvider(model="m"), 4, roles={"judge": RubricJudge(set())}, price=price,
        method="elim", judge="reward", rounds=1, max_cost_usd=1000,
    )  # fmt: skip
    assert any("rubric-judge-1" in r.getMessage() for r in caplog.records)


async def test_share_warmup_copies_the_judges_ratings_too(tmp_path: Path) -> None:
    script: dict[str, list[Step]] = {"q0": [right("q0")], "q1": [right("q1")]}
    kwargs: dict[str, Any] = {"judge": "reward", "rounds": 2}
    await run(
        ScriptedProvider(dict(script)), 4, out=tmp_path / "elim",
        roles={"judge": RubricJudge(set())}, method="elim", **kwargs,
    )  # fmt: skip
    share_warmup(tmp_path / "elim" / "journal.jsonl", tmp_path / "adpt" / "journal.jsonl", 1)
    judge, policy = RubricJudge(set()), ScriptedProvider()
    result = await run(
        policy, 4, out=tmp_path / "adpt", roles={"judge": judge}, resume=True, method="adpt",
        **kwargs,
    )  # fmt: skip
    # The warm-up is replayed, ratings included: only round 2 (q2, q3) is sent and judged.
    assert sorted(r.item_id for r in policy.history) == ["q2", "q3"]
    assert sorted(r.item_id for r in judge.history) == ["q2", "q3"]
    assert result.rounds[0].judge_calls == 4


@dataclass
class BoxedSuite(FakeSuite):
    """Answers in `\\boxed{}`, judged and grouped the way the math suites group them."""

    def judge(self, item: Item, response: str) -> Verdict:
        answer = extract_last_boxed(response)
        ok = answer is not None and math_answer_key(answer) == math_answer_key(item.reference)
        return Verdict(1.0 if ok else 0.0, answer)

    @staticmethod
    def answer_key(answer: str) -> str:
        return math_answer_key(answer)


def test_the_math_suites_group_equivalent_answers(tmp_path: Path) -> None:
    from ttc.adapters.suites._math import MathSuite

    data = tmp_path / "math.jsonl"
    record = {"problem": "?", "answer": "1/2", "subject": "a", "level": 1, "unique_id": "x"}
    data.write_text(json.dumps(record) + "\n")
    key = MathSuite("math500", data).answer_key
    assert len({key(a) for a in ("\\frac{1}{2}", "\\dfrac{1}{2}", "0.5", "1/2", " 1/2.")}) == 1
    assert key("\\left( 1, 2 \\right)") == key("(1,2)")
    assert key("0.3333333333") == key("\\frac{1}{3}")
    assert key("0.3334") != key("\\frac{1}{3}")
    assert key("x") != key("y")


async def test_sc_groups_equivalent_answers_and_counts_every_response() -> None:
    pool = [Item("q0", "question number 0", "1/2"), Item("q1", "question number 1", "7")]
    provider = ScriptedProvider(
        {
            # Two notations of one answer: 2 of 2, a consensus at round 2.
            "q0": ["so \\boxed{\\frac{1}{2}}", "so \\boxed{0.5}"],
            # A response with no answer counts against: 2 of 3, then 3 of 4 (not over 75%),
            # then 4 of 5.
            "q1": ["cut off mid-way", *["so \\boxed{7}"] * 4],
        }
    )
    result = await run(provider, 2, suite=BoxedSuite(pool=pool), method="sc", rounds=5)
    assert [s.solved for s in result.rounds] == [0, 1, 1, 1, 2]
    assert dict(provider.calls) == {"q0": 2, "q1": 5}
    assert result.accuracy == 1.0


async def test_consensus_under_unif_stays_solved_from_the_round_it_was_reached(
    tmp_path: Path,
) -> None:
    # Uniform allocation keeps sampling a question with a consensus; a later split vote does
    # not unsolve it.
    provider = ScriptedProvider({"q0": ["a", "a", "b", "b"]})
    result = await run(provider, 1, out=tmp_path, method="unif", judge="consensus", rounds=4)
    assert [s.solved for s in result.rounds] == [0, 1, 1, 1]
    [line] = (tmp_path / "results.jsonl").read_bytes().splitlines()
    record = orjson.loads(line)
    assert (record["solved"], record["solved_round"], record["answer"]) == (True, 2, "a")


async def test_temp_shares_the_warmup_only_at_the_same_temperature() -> None:
    # temp's round one samples at --temperature (default 0.3); elim at --temperature 0.3 sends
    # the very same warm-up requests, elim at the provider's default temperature does not.
    temp, elim, plain = ScriptedProvider(), ScriptedProvider(), ScriptedProvider()
    await run(temp, 2, method="temp", rounds=2)
    await run(elim, 2, method="elim", rounds=2, sampling=_sampling(0.3))
    await run(plain, 2, method="elim", rounds=2)
    assert temp.history[:2] == elim.history[:2]
    assert temp.history[:2] != plain.history[:2]


@pytest.mark.slow
def test_ttc_resume_of_a_matched_run_keeps_the_budget_in_its_config(tmp_path: Path) -> None:
    common = ["--per-task", "4", "--embedder", "lexical", "--workers", "0", "-q"]
    elim = ttc("run", "--method", "elim", *common, "--out", "elim", cwd=tmp_path)
    assert elim.returncode == 0, elim.stderr
    budget = load(tmp_path / "elim" / "summary.json")["output_tokens"]
    unif = ttc("run", "--method", "unif", "--match-tokens", "elim", "--max-output-tokens", "1",
               *common, "--out", "u", cwd=tmp_path)  # fmt: skip
    assert unif.returncode == 3, unif.stderr
    # The matched run moves away; the resumed run goes on with the budget it started with.
    (tmp_path / "elim").rename(tmp_path / "elsewhere")
    resumed = ttc("resume", "u", "--max-output-tokens", "100000000", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert load(tmp_path / "u" / "config.json")["config"]["match_tokens"] == budget
    assert load(tmp_path / "u" / "summary.json")["complete"]
