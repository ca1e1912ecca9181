"""One round of Algorithm 1: replay what the journal already has, send the rest, judge, account.

A sample is journaled the moment it lands (text and usage: paid work is never lost); then, as it
is judged, the reward model's rating (`judge`, only with a reward judge) and the verdict. A sample
the journal holds is replayed instead of sent; one that landed but was never judged (the run
stopped in between) is judged now, not bought again, and a rating the journal holds is not asked
again. Once a sample's verdict is journaled, a rating that failed stays failed (the response
scored 0, as it was then): what a finished round decided never changes on resume.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ttc.engine._errors import ProviderError
from ttc.engine._journal import Journal, SampleKey
from ttc.engine._scheduler import Job, Outcome, Sender, run_round
from ttc.engine._state import RoundStats, RunState, Scored
from ttc.engine._types import Completion, Demo, Item, Message, Request, Sampling, Usage, Verdict
from ttc.engine.strategy._judges import Noisy, RewardResult, bounded
from ttc.engine.strategy._strategy import Allotment, DemoPlan, DemoRef

if TYPE_CHECKING:
    from ttc.engine._engine import Engine

log = logging.getLogger("ttc")


def sample_seed(run_seed: int, item_id: str, round_no: int, k: int) -> int:
    """The sampling seed of one planned sample: stable across processes, fits in 31 bits."""
    digest = hashlib.blake2b(f"{run_seed}/{item_id}/{round_no}/{k}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") & 0x7FFFFFFF


def count_into(state: RunState, stats: RoundStats) -> None:
    """The barrier's counts: resolved, covered and accurate questions, as the state stands."""
    state.close_round(stats.round)
    n = state.n
    stats.solved = state.solved_count()
    stats.covered = state.covered_count()
    stats.accurate = state.accurate_count()
    stats.coverage = stats.covered / n if n else 0.0
    stats.accuracy = stats.accurate / n if n else 0.0
    i = next((i for i, s in enumerate(state.rounds) if s is stats), len(state.rounds))
    stats.newly_solved = stats.solved - (state.rounds[i - 1].solved if i > 0 else 0)


class RoundRun:
    """The jobs, callbacks and totals of round `stats.round`."""

    def __init__(
        self,
        engine: Engine,
        state: RunState,
        stats: RoundStats,
        journal: Journal | None,
        done: dict[SampleKey, dict[str, Any]],
    ) -> None:
        self.engine = engine
        self.state = state
        self.stats = stats
        self.t = stats.round
        self.journal = journal
        self.done = done
        self.judgement = engine.strategy.judgement
        self.gamma = engine.config.gamma
        # The demonstrations' texts as they stood when the round was planned: a question in the
        # pool may be sampled in this round too (noisy fallback), and its prompts must not
        # depend on the order in which samples land.
        self.texts: dict[int, str] = {}

    async def run(self, allotment: Allotment, plan: DemoPlan, sampling: Sampling) -> None:
        """Replays, then sends every remaining sample of `allotment`, judging each as it lands."""
        cfg = self.engine.config
        self.stats.active = len(allotment)
        self.stats.planned = sum(allotment.values())
        self._snapshot(plan)
        replayed = await self._replay(allotment)
        self.stats.replayed = len(replayed)
        self.stats.requests = self.stats.planned - len(replayed)
        if self.stats.requests:
            sender = Sender(
                self.engine.provider,
                self.engine.limiter,
                self.engine.retry,
                cfg.timeout_s,
                self.on_retry,
                seed=sample_seed(cfg.seed, "", self.t, 0),
            )
            workers = min(cfg.concurrency, self.stats.requests)
            # A few verify workers per verifier process keep every process busy.
            verifiers = min(workers, max(4, 4 * cfg.verifier_workers))
            jobs = (
                j for j in self._jobs(allotment, plan, sampling) if (j.row, j.k) not in replayed
            )
            await run_round(
                jobs,
                sender,
                self.on_landed,
                self.on_judged,
                workers=workers,
                verifiers=verifiers,
                stopped=lambda: self.engine.stopped is not None,
            )
        count_into(self.state, self.stats)

    def _snapshot(self, plan: DemoPlan) -> None:
        for refs in plan.values():
            for ref in refs:
                if not isinstance(ref, Demo) and ref[0] not in self.texts:
                    text = self.state.response(ref[0])
                    if text is not None:
                        self.texts[ref[0]] = text

    def _emit(self, event: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal.append(event)

    def _key(self, row: int, k: int) -> dict[str, Any]:
        return {"round": self.t, "item": self.state.items[row].id, "k": k}

    async def _replay(self, allotment: Allotment) -> set[tuple[int, int]]:
        """Accounts the journal's samples of this round; returns their (row, k)."""
        found = []
        for row, count in allotment.items():
            for k in range(count):
                event = self.done.pop((self.t, self.state.items[row].id, k), None)
                if event is not None:
                    found.append((row, k, event))
        # A verdict settles the sample, its reward model's rating included, even a failed one.
        settled = {(row, k) for row, k, ev in found if "score" in ev}
        unjudged = [(row, k, ev) for row, k, ev in found if "score" not in ev]
        if unjudged:
            pairs = [(self.state.items[row], str(ev["text"])) for row, _, ev in unjudged]
            verdicts = await self.engine.verifiers.judge_many(pairs)
            for (_, _, ev), verdict in zip(unjudged, verdicts, strict=True):
                ev.update(score=verdict.score, answer=verdict.answer, fresh=True)
        scorer = self.engine.scorer
        if self.judgement.reward_model and scorer is not None:

            def unrated(row: int, k: int, ev: dict[str, Any]) -> bool:
                judged = ev.get("judge")
                if judged is None:
                    return True
                return not judged.get("ok") and (row, k) not in settled

            todo = [(row, k, ev) for row, k, ev in found if unrated(row, k, ev)]

            async def rate(entry: tuple[int, int, dict[str, Any]]) -> None:
                row, k, ev = entry
                item = self.state.items[row]
                ev["rating"] = await scorer.score(item, self.t, k, str(ev["text"]))
                ev["fresh"] = True

            await bounded(todo, rate, self.engine.config.concurrency)
        for row, k, ev in found:
            reward = ev.get("rating") or (
                RewardResult.from_event(ev["judge"]) if "judge" in ev else None
            )
            if "rating" in ev:
                self._emit_rating(row, k, ev["rating"])
            verdict = Verdict(float(ev["score"]), ev.get("answer"))
            text, usage = str(ev["text"]), Usage(*ev["usage"])
            self._settle(row, k, text, usage, verdict, reward, emit=bool(ev.get("fresh")))
        return {(row, k) for row, k, _ in found}

    def _jobs(self, allotment: Allotment, plan: DemoPlan, sampling: Sampling) -> Iterator[Job]:
        cfg, suite, state = self.engine.config, self.engine.suite, self.state
        for row, count in allotment.items():
            if self.engine.stopped is not None:
                return  # stop dispatching; what is in flight finishes and is recorded
            item = state.items[row]
            demos = self._demos(plan.get(row, ()))
            # With no solved neighbour yet, an adaptive prompt has nothing to show: zero-shot.
            prompt = suite.adaptive_prompt(item, demos) if demos else suite.warmup_prompt(item)
            est = math.ceil(len(prompt) / 4) + self.engine.expected_output_tokens()
            messages = (Message("user", prompt),)
            for k in range(count):
                seeded = replace(sampling, seed=sample_seed(cfg.seed, item.id, self.t, k))
                yield Job(row, self.t, k, Request(messages, seeded, 1, item.id, demos), est)

    def _demos(self, refs: Sequence[DemoRef]) -> tuple[Demo, ...]:
        items, demos = self.state.items, []
        for ref in refs:
            if isinstance(ref, Demo):
                demos.append(ref)
            elif (text := self.texts.get(ref[0])) is not None:
                demos.append(Demo(items[ref[0]].id, items[ref[0]].question, text, ref[1]))
        return tuple(demos)

    def on_retry(self, job: Job, attempt: int, error: ProviderError, delay: float) -> None:
        self.stats.retries += 1
        self.stats.rate_limited += error.kind == "rate_limited"
        self._emit(
            {
                "ev": "retry",
                **self._key(job.row, job.k),
                "attempt": attempt,
                "error": error.kind,
                "message": str(error)[:500],
                "delay": round(delay, 3),
            }
        )

    def on_landed(self, job: Job, outcome: Outcome) -> None:
        event = {
            "ev": "sample",
            **self._key(job.row, job.k),
            "attempts": outcome.attempts,
            "demos": [d.item_id for d in job.request.demos],
        }
        if job.request.sampling.temperature is not None:
            event["temperature"] = job.request.sampling.temperature
        self.engine.progress.request_done()
        comp = outcome.completion
        if comp is None:
            assert outcome.error is not None
            err = outcome.error
            self.stats.rate_limited += err.kind == "rate_limited"
            self._emit({**event, "ok": False, "error": err.kind, "message": str(err)[:500]})
            self._settle(job.row, job.k, None, Usage(), None, None, emit=False)
            self.engine.sample_failed(err)
            return
        self.engine.sample_answered()
        u = comp.usage
        self.engine.observe_output(u)
        self._emit(
            {
                **event,
                "ok": True,
                "text": comp.texts[0],
                "usage": [u.input_tokens, u.output_tokens, u.thinking_tokens],
                "latency": round(comp.latency_s, 4),
            }
        )

    async def on_judged(self, group: list[tuple[Job, Completion]]) -> None:
        items = [self.state.items[job.row] for job, _ in group]
        pairs = [(item, comp.texts[0]) for item, (_, comp) in zip(items, group, strict=True)]
        rewards: list[RewardResult | None] = [None] * len(group)
        scorer = self.engine.scorer
        if self.judgement.reward_model and scorer is not None:
            ratings = asyncio.gather(
                *(
                    scorer.score(item, self.t, job.k, comp.texts[0])
                    for item, (job, comp) in zip(items, group, strict=True)
                )
            )
            verdicts, rated = await asyncio.gather(self.engine.verifiers.judge_many(pairs), ratings)
            rewards = list(rated)
        else:
            verdicts = await self.engine.verifiers.judge_many(pairs)
        for (job, comp), verdict, reward in zip(group, verdicts, rewards, strict=True):
            if reward is not None:
                self._emit_rating(job.row, job.k, reward)
            self._settle(job.row, job.k, comp.texts[0], comp.usage, verdict, reward, emit=True)

    def _emit_rating(self, row: int, k: int, reward: RewardResult) -> None:
        self._emit({"ev": "judge", **self._key(row, k), **reward.event()})

    def _settle(
        self,
        row: int,
        k: int,
        text: str | None,
        usage: Usage,
        verdict: Verdict | None,
        reward: RewardResult | None,
        *,
        emit: bool,
    ) -> None:
        """Judges one finished sample by the strategy's judgement and accounts it."""
        stats, state = self.stats, self.state
        stats.samples += 1
        stats.usage = stats.usage + usage
        if reward is not None:
            stats.judge_calls += reward.error is None
            stats.judge_usage = stats.judge_usage + reward.usage
            stats.judge_unparsed += reward.unparsed
            stats.judge_errors += reward.error is not None
        if text is None or verdict is None:
            stats.errors += 1
            state.record_error(row, usage)
            self.engine.check_budget(state)
            return
        item: Item = state.items[row]
        scored = Scored(item.id, self.t, k, verdict.score, verdict.answer, _share(reward))
        accepted = self.judgement.accepts(scored)
        correct = verdict.score >= self.gamma
        if emit:
            self._emit(self._verdict_event(row, k, scored, correct, accepted))
        stats.passed += accepted
        state.record_sample(row, self.t, k, text, usage, scored, correct, accepted)
        self.engine.check_budget(state)

    def _verdict_event(
        self, row: int, k: int, scored: Scored, correct: bool, accepted: bool
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "ev": "verdict",
            **self._key(row, k),
            "score": scored.score,
            "answer": scored.answer,
            "correct": correct,
            "passed": accepted,
        }
        if scored.reward is not None:
            event["reward"] = scored.reward
        if isinstance(self.judgement, Noisy):
            event["flipped"] = self.judgement.flipped(scored)
        return event


def _share(reward: RewardResult | None) -> float | None:
    """The share of the scale the reward model gave; an unreadable or failed rating is 0."""
    if reward is None:
        return None
    return 0.0 if reward.reward is None else reward.reward
