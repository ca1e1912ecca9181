"""The paired ablation's numbers (`ttc ablate`): which questions a run's warm-up left unsolved,
and the effect of their demonstrations, read from the two arms' journals.

A pair is one planned sample (round, question, k) drawn in both arms with the same sampling seed,
one prompt with the question's demonstrations and one without. Each side is judged by ground
truth (the suite's verifier at γ, whatever the run's judgement): the effect is the solve rate with
demonstrations minus without, its interval a paired bootstrap over questions (a question's pairs
resampled together), its p-value McNemar's exact test on the pairs whose two sides differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttc.engine.contract._errors import DataError
from ttc.engine.contract._state import RunState, Scored
from ttc.engine.contract._types import Item, Usage
from ttc.engine.journal._events import Judged, RoundEnded
from ttc.engine.journal._journal import read_events
from ttc.engine.report._stats import Interval, mcnemar_exact, paired_difference
from ttc.engine.strategy._judges import Judgement

_VERDICTS = frozenset({Judged.KIND, RoundEnded.KIND})


def unsolved_after_warmup(
    journal: Path,
    items: Sequence[Item],
    judgement: Judgement,
    warmup: int,
    answer_key: Callable[[str], str] | None = None,
) -> list[int]:
    """The rows of `items` the run's judgement had not resolved when its warm-up ended, replayed
    from its journal's verdicts; DataError when the warm-up never reached its barrier."""
    state = RunState(items, judgement, answer_key)
    by_round: dict[int, list[Judged]] = {}
    ended: set[int] = set()
    for event in read_events(journal, _VERDICTS):
        if isinstance(event, RoundEnded):
            ended.add(event.round)
        elif isinstance(event, Judged) and event.round <= warmup and event.item in state.rows:
            by_round.setdefault(event.round, []).append(event)
    missing = [t for t in range(1, warmup + 1) if t not in ended]
    if missing:
        raise DataError(
            f"{journal}: the warm-up did not finish (no barrier of round {missing[0]}): go on "
            "with the run first (ttc resume)"
        )
    for t in range(1, warmup + 1):
        for v in by_round.get(t, []):
            scored = Scored(v.item, v.round, v.k, v.score, v.answer, v.reward)
            state.record_sample(
                state.rows[v.item], v.round, v.k, "", Usage(), scored, v.correct, v.passed
            )
        state.close_round(t)
    return state.unsolved_rows()


def verdicts_after(journal: Path, warmup: int) -> dict[tuple[int, str, int], bool]:
    """Each judged sample of a journal after its warm-up: (round, item, k) -> correct."""
    out: dict[tuple[int, str, int], bool] = {}
    for event in read_events(journal, frozenset({Judged.KIND})):
        if isinstance(event, Judged) and event.round > warmup:
            out[event.key] = event.correct
    return out


@dataclass(frozen=True, slots=True)
class Ablation:
    """The paired effect of demonstrations: solve rates with and without, and the difference."""

    pairs: int
    questions: int
    with_rate: float
    without_rate: float
    effect: Interval
    p_value: float
    # Pairs solved only with demonstrations, and only without (McNemar's b and c).
    only_with: int
    only_without: int
    simulated: bool

    def json(self) -> dict[str, Any]:
        """What ablation.json holds."""
        return {
            "pairs": self.pairs,
            "questions": self.questions,
            "with": self.with_rate,
            "without": self.without_rate,
            "effect": self.effect.estimate,
            "ci95": self.effect.json(),
            "ci_method": "paired bootstrap over questions (2000 resamples, seed 0)",
            "p_value": self.p_value,
            "test": "exact McNemar (two-sided) over pairs",
            "only_with": self.only_with,
            "only_without": self.only_without,
            "judged_by": "ground truth (the suite's verifier at gamma)",
            "simulated": self.simulated,
        }

    def line(self) -> str:
        """The terminal's one line."""
        sim = "simulated (sim provider): " if self.simulated else ""
        return (
            f"ablation: {sim}{self.pairs} pairs over {self.questions} questions: solved "
            f"{100 * self.with_rate:.1f}% with demonstrations, {100 * self.without_rate:.1f}% "
            f"without; effect {self.effect.points(signed=True)} points (95% CI), McNemar p = "
            f"{self.p_value:.3g}"
        )


def paired_effect(
    with_demos: dict[tuple[int, str, int], bool],
    without: dict[tuple[int, str, int], bool],
    simulated: bool,
) -> Ablation:
    """The effect over the samples judged in both arms (a sample one arm lacks is no pair)."""
    keys = sorted(with_demos.keys() & without.keys())
    a = [float(with_demos[key]) for key in keys]
    b = [float(without[key]) for key in keys]
    n = len(keys)
    only_with = sum(1 for x, y in zip(a, b, strict=True) if x > y)
    only_without = sum(1 for x, y in zip(a, b, strict=True) if y > x)
    return Ablation(
        pairs=n,
        questions=len({key[1] for key in keys}),
        with_rate=sum(a) / n if n else 0.0,
        without_rate=sum(b) / n if n else 0.0,
        effect=paired_difference(a, b, [key[1] for key in keys]),
        p_value=mcnemar_exact(only_with, only_without),
        only_with=only_with,
        only_without=only_without,
        simulated=simulated,
    )
