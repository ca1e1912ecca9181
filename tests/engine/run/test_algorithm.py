"""Algorithm 1 against a scripted fake provider: allocation, ỹ, demonstrations, presets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from fakes import FakeSuite, ScriptedProvider, Step, TableEmbedder, items

from ttc.adapters.suites._templates import adaptive_prompt, warmup_prompt
from ttc.engine import Engine, RunConfig, RunResult
from ttc.engine.journal._journal import read_journal

RIGHT = "right:{} worked solution"


def right(item_id: str) -> str:
    return RIGHT.format(item_id)


async def run(
    provider: ScriptedProvider,
    n: int,
    embedder: TableEmbedder | None = None,
    out: Path | None = None,
    **cfg: object,
) -> RunResult:
    cfg.setdefault("verifier_workers", 0)
    suite = FakeSuite(pool=items(n))
    async with Engine(provider, suite, RunConfig(**cfg), embedder=embedder, out_dir=out) as eng:  # type: ignore[arg-type]
        return await eng.run()


async def test_elimination_drops_solved_questions_each_round() -> None:
    provider = ScriptedProvider(
        {
            "q0": [right("q0")],
            "q1": ["wrong", right("q1")],
            "q2": ["wrong", "wrong", "wrong", "wrong"],
            "q3": ["wrong", "wrong", right("q3")],
        }
    )
    result = await run(provider, 4, method="elim", rounds=4)
    assert [s.active for s in result.rounds] == [4, 3, 2, 1]
    assert [s.solved for s in result.rounds] == [1, 2, 3, 3]
    assert [s.coverage for s in result.rounds] == [0.25, 0.5, 0.75, 0.75]
    assert dict(provider.calls) == {"q0": 1, "q1": 2, "q2": 4, "q3": 3}
    assert result.response("q3") == right("q3")
    assert result.response("q2") is None
    # elim never shows demonstrations
    assert all(not r.demos for r in provider.history)


async def test_first_passing_response_is_kept_whatever_order_samples_land() -> None:
    # K=2: sample k=0 passes but lands late, sample k=1 passes and lands first; round 2 passes too.
    provider = ScriptedProvider(
        {"q0": [(0.05, right("q0") + " A"), (0.0, right("q0") + " B"), right("q0") + " C"]}
    )
    result = await run(provider, 1, method="unif", rounds=2, k=2)
    assert result.response("q0") == right("q0") + " A"
    assert result.records[0].first_pass is not None
    assert result.records[0].first_pass[:2] == (1, 0)
    assert result.records[0].samples == 4


async def test_unif_never_eliminates() -> None:
    provider = ScriptedProvider({"q0": [right("q0")], "q1": ["wrong", right("q1")]})
    result = await run(provider, 3, method="unif", rounds=3)
    assert [s.active for s in result.rounds] == [3, 3, 3]
    assert dict(provider.calls) == {"q0": 3, "q1": 3, "q2": 3}
    # unif is zero-shot every round
    for req in provider.history:
        assert not req.demos
        item_no = req.item_id[1:]
        assert req.messages[0].content == warmup_prompt(
            "reasoning_gym", f"question number {item_no}"
        )
    assert result.solved == 2


# Hand-set geometry: q0's solved neighbours are q1 then q4; q3's are q2 then q4.
# q6 is q0's nearest question overall but is never solved.
VECTORS = {
    "q0": [1.0, 0.0, 0.0],
    "q1": [0.9, 0.1, 0.0],
    "q2": [0.0, 1.0, 0.0],
    "q3": [0.1, 0.9, 0.0],
    "q4": [0.7, 0.7, 0.0],
    "q5": [0.0, 0.0, 1.0],
    "q6": [0.95, 0.0, 0.05],
}
SOLVED_IN_WARMUP = ["q1", "q2", "q4", "q5"]


def geometry_script() -> ScriptedProvider:
    return ScriptedProvider({i: [right(i)] for i in SOLVED_IN_WARMUP})


def expected_prompt(target: str, demo_ids: list[str]) -> str:
    demos = [(f"question number {d[1:]}", right(d)) for d in demo_ids]
    return adaptive_prompt("reasoning_gym", f"question number {target[1:]}", demos)


async def test_adpt_demonstrations_are_top_p_solved_neighbours_in_the_template() -> None:
    provider = geometry_script()
    await run(provider, 7, TableEmbedder(VECTORS), method="adpt", rounds=2, p=2)
    round2 = {r.item_id: r for r in provider.history[7:]}
    assert sorted(round2) == ["q0", "q3", "q6"]
    assert [d.item_id for d in round2["q0"].demos] == ["q1", "q4"]
    assert [d.item_id for d in round2["q3"].demos] == ["q2", "q4"]
    assert [d.item_id for d in round2["q6"].demos] == ["q1", "q4"]
    assert round2["q0"].messages[0].content == expected_prompt("q0", ["q1", "q4"])
    assert round2["q3"].messages[0].content == expected_prompt("q3", ["q2", "q4"])
    sims = [d.similarity for d in round2["q0"].demos]
    assert sims[0] is not None
    assert sims[1] is not None
    assert sims[0] > sims[1]


async def test_fixed_neighbours_show_only_the_solved_ones() -> None:
    provider = geometry_script()
    await run(provider, 7, TableEmbedder(VECTORS), method="adpt", rounds=2, p=2, neighbours="fixed")
    round2 = {r.item_id: r for r in provider.history[7:]}
    # q0's two nearest overall are q6 (unsolved) and q1: only q1 is shown.
    assert [d.item_id for d in round2["q0"].demos] == ["q1"]
    assert round2["q0"].messages[0].content == expected_prompt("q0", ["q1"])


async def test_demonstrations_grow_as_neighbours_get_solved() -> None:
    # q0 unsolved throughout; q1 solved only in round 2, so it appears from round 3 on.
    provider = ScriptedProvider({"q1": ["wrong", right("q1")], "q4": [right("q4")]})
    await run(provider, 7, TableEmbedder(VECTORS), method="adpt", rounds=3, p=2)
    q0 = provider.requests_for("q0")
    assert [d.item_id for d in q0[1].demos] == ["q4"]
    assert [d.item_id for d in q0[2].demos] == ["q1", "q4"]


async def test_rand_differs_from_adpt_only_in_selection() -> None:
    n = 40
    vectors = {f"q{i}": list(np.random.default_rng(i).normal(size=8)) for i in range(n)}
    solved = [f"q{i}" for i in range(0, n, 2)]
    results = {}
    for method in ("adpt", "rand"):
        provider = ScriptedProvider({i: [right(i)] for i in solved})
        await run(provider, n, TableEmbedder(vectors), method=method, rounds=2, p=3, seed=7)
        results[method] = provider
    adpt, rand = results["adpt"], results["rand"]
    # Same warm-up: identical requests, prompts and sampling seeds.
    warm = {r.item_id: r for r in adpt.history[:n]}
    for r in rand.history[:n]:
        assert r == warm[r.item_id]
    # Same allocation in round 2; both show P solved demonstrations in the same template.
    a2 = {r.item_id: r for r in adpt.history[n:]}
    r2 = {r.item_id: r for r in rand.history[n:]}
    assert sorted(a2) == sorted(r2) == sorted(f"q{i}" for i in range(1, n, 2))
    differing = 0
    for item_id in a2:
        for req in (a2[item_id], r2[item_id]):
            ids = [d.item_id for d in req.demos]
            assert len(ids) == 3
            assert len(set(ids)) == 3
            assert set(ids) <= set(solved)
            assert req.messages[0].content == expected_prompt(item_id, ids)
            assert req.sampling == a2[item_id].sampling
        differing += [d.item_id for d in a2[item_id].demos] != [
            d.item_id for d in r2[item_id].demos
        ]
    assert differing > len(a2) // 2


async def test_same_seed_same_warmup_across_methods() -> None:
    seen = []
    for method in ("elim", "rand", "adpt"):
        provider = ScriptedProvider()
        await run(provider, 5, method=method, rounds=1, seed=3)
        seen.append(sorted(provider.history, key=lambda r: r.item_id))
    assert seen[0] == seen[1] == seen[2]


async def test_gamma_threshold_decides_elimination() -> None:
    provider = ScriptedProvider({"q0": [right("q0")]})
    result = await run(provider, 2, method="elim", rounds=2, gamma=1.0)
    assert [s.active for s in result.rounds] == [2, 1]


async def test_verifier_pool_processes_judge_the_same() -> None:
    provider = ScriptedProvider({"q0": [right("q0")], "q2": ["wrong", right("q2")]})
    result = await run(provider, 3, method="elim", rounds=2, verifier_workers=1)
    assert [s.solved for s in result.rounds] == [1, 2]


@pytest.mark.parametrize("bad", [{"rounds": 0}, {"warmup_rounds": 5}, {"method": "best"}])
def test_bad_config_names_the_flag(bad: dict[str, object]) -> None:
    from ttc.engine import ConfigError

    with pytest.raises(ConfigError, match="--"):
        RunConfig(**bad)  # type: ignore[arg-type]


async def test_warmup_rounds_sample_every_question() -> None:
    # Algorithm 1, stage 1: "for each x in S" in every warm-up round; elimination after.
    provider = ScriptedProvider({"q0": [right("q0")]})
    result = await run(provider, 3, method="elim", rounds=3, warmup_rounds=2)
    assert [s.active for s in result.rounds] == [3, 3, 2]
    assert dict(provider.calls) == {"q0": 2, "q1": 3, "q2": 3}
    assert result.response("q0") == right("q0")


# -- the noisy judge's demonstration pool (section 5.3) ---------------------------------------

NOISY_N, NOISY_ROUNDS = 12, 4


def noisy_script() -> ScriptedProvider:
    """Half the questions always right, half always wrong; every response's text is unique and
    says which question and which call (= round, K=1 under elimination) it answers."""
    script: dict[str, list[Step]] = {}
    for i in range(NOISY_N):
        qid = f"q{i}"
        head = right(qid) if i < NOISY_N // 2 else "wrong"
        script[qid] = [f"{head} {qid} call{c}" for c in range(NOISY_ROUNDS)]
    return ScriptedProvider(script)


def shown_sources(provider: ScriptedProvider) -> list[tuple[int, str, int]]:
    """Every demonstration shown: (round it was shown in, its question, the round it answered)."""
    calls: dict[str, int] = {}
    shown = []
    for request in provider.history:
        calls[request.item_id] = calls.get(request.item_id, 0) + 1
        for demo in request.demos:
            source, call = demo.response.split()[-2:]
            shown.append((calls[request.item_id], source, int(call.removeprefix("call")) + 1))
    return shown


async def noisy_run(
    tmp_path: Path, method: str, pool: str = "accepted"
) -> tuple[ScriptedProvider, set[tuple[str, int]], list[dict[str, object]]]:
    provider = noisy_script()
    await run(provider, NOISY_N, out=tmp_path, method=method, rounds=NOISY_ROUNDS, p=3,
              noise=0.3, seed=3, pool=pool)  # fmt: skip
    verdicts = [e for e in read_journal(tmp_path / "journal.jsonl") if e["ev"] == "verdict"]
    # The noise flips verdicts both ways at this seed: a right response refused, a wrong one
    # accepted (so the pool is not simply the right responses).
    assert any(e["flipped"] and e["correct"] for e in verdicts)
    assert any(e["flipped"] and not e["correct"] for e in verdicts)
    accepted = {(str(e["item"]), int(e["round"])) for e in verdicts if e["passed"]}
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines()
    results = [orjson.loads(line) for line in lines]
    return provider, accepted, results


@pytest.mark.parametrize("method", ["adpt", "rand"])
async def test_a_noisy_judge_shows_only_responses_it_accepted(tmp_path: Path, method: str) -> None:
    # The paper: "the reward model determines whether a response is considered solved and
    # whether it is added to the demonstration pool". The default pool: accepted only.
    provider, accepted, results = await noisy_run(tmp_path, method)
    shown = shown_sources(provider)
    assert shown
    for round_shown, source, round_answered in shown:
        assert (source, round_answered) in accepted
        assert round_answered < round_shown
    # "If no response is marked correct for a query, we fall back to selecting the most recent
    # response": its final answer, not a demonstration.
    unaccepted = [r for r in results if not r["solved"]]
    assert unaccepted
    for r in unaccepted:
        assert r["response"] is None
        assert r["answer_round"] == NOISY_ROUNDS
        assert str(r["answer"]).endswith(f"{r['id']} call{NOISY_ROUNDS - 1}")


@pytest.mark.parametrize("method", ["adpt", "rand"])
async def test_pool_latest_shows_unaccepted_questions_most_recent_response(
    tmp_path: Path, method: str
) -> None:
    provider, accepted, results = await noisy_run(tmp_path, method, pool="latest")
    shown = shown_sources(provider)
    never = [(s, r) for _, s, r in shown if not any(q == s for q, _ in accepted)]
    assert never  # a question the judge never accepted, shown as a demonstration
    for round_shown, source, round_answered in shown:
        if (source, round_answered) not in accepted:
            # Its most recent response as the round was planned.
            assert round_answered == round_shown - 1
    for r in results:
        if not r["solved"]:
            assert str(r["response"]).endswith(f"{r['id']} call{NOISY_ROUNDS - 1}")
            assert r["answer"] == r["response"]


@pytest.mark.parametrize(
    "bad", [{"pool": "all", "noise": 0.1}, {"pool": "latest"}, {"pool": "latest", "noise": 0.0}]
)
def test_pool_needs_a_known_name_and_a_noisy_judge(bad: dict[str, object]) -> None:
    from ttc.engine import ConfigError

    with pytest.raises(ConfigError, match=r"^--pool: "):
        RunConfig(**bad)  # type: ignore[arg-type]
