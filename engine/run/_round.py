"""One round of Algorithm 1: replay what the journal already has, send the rest, judge, account.

A sample is journaled as it lands, at the end of that turn of the loop (text and usage: paid work
is never lost; `_scheduler`); then, once its batch is judged and accounted, the reward model's
rating (`judge`, only with a reward judge) and the verdict. Each turn's samples, and each
batch's ratings and verdicts, go to the journal's writer together (`Journal.extend`).

A sample the journal holds is replayed instead of sent; one that landed but was never judged
(the run stopped in between) is judged now, not bought again, and a rating the journal holds is
not asked again. Once a sample's verdict is journaled, a rating that failed stays failed (the
response scored 0, as it was then): what a finished round decided never changes on resume.

A round sees its run through a `RoundContext`: the parts it needs, not the engine. It sends its
samples itself, or hands them to a Batch API's dispatcher (`run/batch`) with a `Landing`: where
they land, and nothing else of the round (`_dispatch`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, fields, replace

from ttc.engine._util._offloop import TURN_S, pause
from ttc.engine._util._pool import bounded
from ttc.engine.contract._errors import ProviderError, Stalled
from ttc.engine.contract._policy import Allotment, DemoPlan, DemoRef
from ttc.engine.contract._state import Pick, RoundStats, RunState, Scored, count_into, sample_seed
from ttc.engine.contract._types import (
    Completion,
    Demo,
    Item,
    Message,
    Request,
    Sampling,
    Usage,
    Verdict,
)
from ttc.engine.journal._events import (
    Event,
    Judged,
    Retried,
    SampleFailed,
    SampleLanded,
)
from ttc.engine.journal._journal import Replay, Replays, SampleKey
from ttc.engine.run._dispatch import Landing, RoundContext
from ttc.engine.run.batch._batch_round import BatchRound
from ttc.engine.send._sender import Job, Outcome
from ttc.engine.strategy._judges import Noisy, RewardResult

log = logging.getLogger("ttc")

# Jobs are made in runs of this many, back to back, then handed out one at a time: made between
# two requests' work, a job cost twice what it costs made beside the last (its code and data out
# of the caches), some 4 us of a sample's CPU at full speed. A run's prompts are a few hundred
# kilobytes at most.
_JOB_RUN = 32


@dataclass(frozen=True, slots=True)
class _Replayed:
    """A journaled sample as this round replays it: what it settles, and what is new."""

    row: int
    k: int
    landed: Replay
    # Judged (or rated) in this session, not read back: journaled anew.
    fresh_verdict: bool = False
    fresh_rating: RewardResult | None = None


class RoundRun:
    """The jobs, callbacks and totals of round `stats.round`."""

    def __init__(
        self,
        ctx: RoundContext,
        state: RunState,
        stats: RoundStats,
        done: MutableMapping[SampleKey, Replay],
    ) -> None:
        self.ctx = ctx
        self.state = state
        self.stats = stats
        self.t = stats.round
        self.done = done
        self.judgement = ctx.judgement
        self.gamma = ctx.config.gamma
        # The demonstrations as they stood when the round was planned: a question in the pool
        # may be sampled in this round too (noisy fallback), and its prompts must not depend on
        # the order in which samples land. The state's own (immutable) picks, their texts
        # unpacked only as a prompt is rendered: a round may show a million of them.
        self.demos: dict[int, Pick] = {}
        # While the journal's samples are replayed the budget is not checked: it stops new
        # work, and a replay costs nothing.
        self._replaying = False
        # What the dispatcher that sends the round's samples is given of it.
        self.landing = Landing(
            ctx, state, self.t, self._sent, self.on_retry, self.on_landed, self.on_judged
        )

    async def run(self, allotment: Allotment, plan: DemoPlan, sampling: Sampling) -> None:
        """Replays, then sends every remaining sample of `allotment`, judging each as it lands."""
        self.stats.active = len(allotment)
        self.stats.planned = sum(allotment.values())
        self.ctx.budget.expect(self.stats.planned)
        self._snapshot(plan)
        replayed = await self._replay(allotment)
        self.stats.replayed = len(replayed)
        to_send = self.stats.planned - len(replayed)
        if to_send:
            self.ctx.budget.check(self.state)  # before anything new is bought
        if to_send and not self.ctx.stopped:
            jobs = self._jobs(allotment, plan, sampling, replayed)
            batch = self.ctx.provider.batch
            if batch is None:
                await self._send(jobs, to_send)
            else:  # through the vendor's Batch API; a resume polls the batches journaled
                known = self.done.batches.get(self.t, []) if isinstance(self.done, Replays) else []
                await BatchRound(self.landing, batch, known).send(jobs, to_send)
        count_into(self.state, self.stats)
        if self.ctx.watch is not None:  # resolved at the barrier (self-consistency's consensus)
            self.ctx.watch.sweep(self.t, replayed=not self.stats.sent)

    async def _send(self, jobs: Iterator[Job], to_send: int) -> None:
        sender = self.landing.sender(0)
        # Fed through the limiter: once all are taken, stragglers are hedged.
        fed = self.ctx.limiter.fed(jobs)
        if self.ctx.budget.reserves:  # each sent once the budget has room for its worst case
            await self.landing.land(self.landing.admitted(fed), sender.send_with_retry, to_send)
        else:
            await self.landing.land(fed, sender.send_with_retry, to_send)

    def _sent(self) -> None:
        self.stats.sent += 1

    def _snapshot(self, plan: DemoPlan) -> None:
        for refs in plan.values():
            for ref in refs:
                if not isinstance(ref, Demo) and ref[0] not in self.demos:
                    pick = self.state.demo(ref[0])
                    if pick is not None and pick.packed is not None:
                        self.demos[ref[0]] = pick

    def _key(self, row: int, k: int) -> tuple[int, str, int]:
        return (self.t, self.state.items[row].id, k)

    async def _replay(self, allotment: Allotment) -> set[tuple[int, int]]:
        """Accounts the journal's samples of this round; returns their (row, k). A sample the
        journal has judged (and rated) is settled as it is taken, in short turns of the loop, so
        a large journal is never held decoded at once (the garbage collector's pauses stop the
        host's loop too); the others are judged (and rated) first, together."""
        if not self.done:  # a fresh run (or every sample replayed): no key to look up
            return set()
        keys, found = set(), []
        rated = not self.judgement.reward_model or self.ctx.scorer is None
        for row, count in allotment.items():
            await pause()
            for k in range(count):
                landed = self.done.pop(self._key(row, k), None)
                if landed is None:
                    continue
                keys.add((row, k))
                if landed.verdict is not None and (rated or landed.rating is not None):
                    self._settle_replayed(_Replayed(row, k, landed))
                else:
                    found.append(_Replayed(row, k, landed))
        found = await self._judge_unjudged(found)
        found = await self._rate_unrated(found)
        for r in found:
            await pause()
            self._settle_replayed(r)
        return keys

    async def _judge_unjudged(self, found: list[_Replayed]) -> list[_Replayed]:
        """Samples that landed but were never judged (the run stopped in between): judged now."""
        unjudged = [r for r in found if r.landed.verdict is None]
        if not unjudged:
            return found
        pairs = [(self.state.items[r.row], r.landed.sample.text) for r in unjudged]
        verdicts = await self.ctx.verifiers.judge_many(pairs)
        judged = {
            (r.row, r.k): replace(r, landed=replace(r.landed, verdict=v), fresh_verdict=True)
            for r, v in zip(unjudged, verdicts, strict=True)
        }
        return [judged.get((r.row, r.k), r) for r in found]

    async def _rate_unrated(self, found: list[_Replayed]) -> list[_Replayed]:
        """The reward model's ratings the journal lacks: asked now. A verdict settles the sample,
        its rating included, even a failed one; a failed rating with no verdict is asked again."""
        scorer = self.ctx.scorer
        if not self.judgement.reward_model or scorer is None:
            return found

        def unrated(r: _Replayed) -> bool:
            rating = r.landed.rating
            if rating is None:
                return True
            return rating.error is not None and r.fresh_verdict

        todo = [r for r in found if unrated(r)]
        rated: dict[tuple[int, int], _Replayed] = {}

        async def rate(r: _Replayed) -> None:
            item = self.state.items[r.row]
            reward = await scorer.score(item, self.t, r.k, r.landed.sample.text)
            rated[(r.row, r.k)] = replace(r, fresh_rating=reward)

        await bounded(todo, rate, self.ctx.config.concurrency)
        return [rated.get((r.row, r.k), r) for r in found]

    def _settle_replayed(self, r: _Replayed) -> None:
        # Judged or rated in this session: its rating and verdict are journaled anew.
        events: list[Event] = []
        reward = r.fresh_rating
        if reward is not None:
            self._rated(r.row, r.k, reward, events)
        elif r.landed.rating is not None:
            reward = RewardResult.from_event(r.landed.rating)
        sample, verdict = r.landed.sample, r.landed.verdict
        assert verdict is not None  # _judge_unjudged gave every sample one
        self.stats.retries += max(0, sample.attempts - 1)  # as the session that bought it counted
        self.state.simulated |= sample.simulated
        journaled = events if r.fresh_verdict or r.fresh_rating is not None else None
        self._replaying = True
        try:
            text, usage = sample.text, sample.usage
            self._settle(r.row, r.k, text, usage, verdict, reward, journaled)
        finally:
            self._replaying = False
            if events:
                self.ctx.journal_all(events)

    def _jobs(
        self, allotment: Allotment, plan: DemoPlan, sampling: Sampling, skip: set[tuple[int, int]]
    ) -> Iterator[Job]:
        """The samples to send: the allotment's, less those replayed (`skip`), whose prompts
        are never rendered. Made in runs of up to `_JOB_RUN` (or of TURN_S), then handed out one
        at a time (those a stop leaves made are dropped unsent by the round's senders)."""
        made: list[Job] = []
        began = time.perf_counter()
        for job in self._make_jobs(allotment, plan, sampling, skip):
            made.append(job)
            # A suite whose prompts are slow to render holds the loop no longer than TURN_S.
            if len(made) == _JOB_RUN or time.perf_counter() - began > TURN_S:
                yield from made
                made.clear()
                began = time.perf_counter()
        yield from made

    def _make_jobs(
        self, allotment: Allotment, plan: DemoPlan, sampling: Sampling, skip: set[tuple[int, int]]
    ) -> Iterator[Job]:
        cfg, suite, state = self.ctx.config, self.ctx.suite, self.state
        # A job's sampling is the round's with the job's seed: the other fields are read once
        # here (`dataclasses.replace` per job was a fifth of the cost of making a job).
        unseeded = {f.name: getattr(sampling, f.name) for f in fields(sampling) if f.name != "seed"}
        for row, count in allotment.items():
            if self.ctx.stopped:
                return  # stop dispatching; what is in flight finishes and is recorded
            todo = [k for k in range(count) if (row, k) not in skip]
            if not todo:
                continue
            item = state.items[row]
            demos = self._demos(plan.get(row, ()))
            # With no solved neighbour yet, an adaptive prompt has nothing to show: zero-shot.
            prompt = suite.adaptive_prompt(item, demos) if demos else suite.warmup_prompt(item)
            est = self.ctx.outputs.estimate(len(prompt))
            messages = (Message("user", prompt),)
            for k in todo:
                seeded = Sampling(**unseeded, seed=sample_seed(cfg.seed, item.id, self.t, k))
                yield Job(row, self.t, k, Request(messages, seeded, 1, item.id, demos), est)

    def _demos(self, refs: Sequence[DemoRef]) -> tuple[Demo, ...]:
        items, demos = self.state.items, []
        for ref in refs:
            if isinstance(ref, Demo):
                demos.append(ref)
            elif (pick := self.demos.get(ref[0])) is not None and (text := pick.text) is not None:
                demos.append(Demo(items[ref[0]].id, items[ref[0]].question, text, ref[1]))
        return tuple(demos)

    def on_retry(self, job: Job, attempt: int, error: ProviderError, delay: float) -> None:
        """One failed attempt that will be retried: counted and journaled."""
        self.stats.retries += 1
        self.stats.rate_limited += error.kind == "rate_limited"
        key = self._key(job.row, job.k)
        self.ctx.budget.attempt_failed(error)
        said, delay = str(error)[:500], round(delay, 3)
        if isinstance(error, Stalled):  # its partial answer is kept for the record
            partial, usage = error.partial, error.usage or Usage()
            self.ctx.emit(Retried(*key, attempt, error.kind, said, delay, partial, usage))
        else:
            self.ctx.emit(Retried(*key, attempt, error.kind, said, delay))

    def on_landed(self, landed: list[tuple[Job, Outcome]]) -> None:
        """Samples' final outcomes, as many as landed in one turn of the loop (`run_round`),
        journaled together; a last error once journaled with the outcomes before it is accounted
        at once (it may stop the run). An outcome that cannot be landed (a bug) leaves the
        others landed, and its error is raised after them."""
        events: list[Event] = []
        error: Exception | None = None
        for job, outcome in landed:
            try:
                if outcome.completion is not None:
                    events.append(self._answered(job, outcome.completion, outcome.attempts))
                    continue
                events.append(self._failed_event(job, outcome))
                told, events = events, []
                self.ctx.emit_all(told)
                self._settle(job.row, job.k, None, Usage(), None, None)
                assert outcome.error is not None
                self.ctx.budget.sample_failed(outcome.error)
            except Exception as exc:
                error = error or exc
        if events:
            self.ctx.emit_all(events)
        if error is not None:
            raise error

    def _answered(self, job: Job, comp: Completion, attempts: int) -> SampleLanded:
        """A sample's response, accounted as it lands: its journal event."""
        ctx = self.ctx
        ctx.budget.sample_answered()
        ctx.outputs.observe_usage(comp.usage)
        self.state.simulated |= comp.simulated
        return SampleLanded(
            *self._key(job.row, job.k),
            comp.texts[0],
            comp.usage,
            attempts,
            _shown(job),
            job.request.sampling.temperature,
            round(comp.latency_s, 4),
            comp.simulated,
            self.landing.from_cache(comp),
        )

    def _failed_event(self, job: Job, outcome: Outcome) -> SampleFailed:
        """A sample's last error, counted: its journal event."""
        err = outcome.error
        assert err is not None
        self.stats.rate_limited += err.kind == "rate_limited"
        return SampleFailed(
            *self._key(job.row, job.k),
            err.kind,
            str(err)[:500],
            outcome.attempts,
            _shown(job),
            job.request.sampling.temperature,
        )

    async def on_judged(self, group: list[tuple[Job, Completion]]) -> None:
        """Judges landed samples (and has them rated, with a reward judge), then accounts them."""
        items = [self.state.items[job.row] for job, _ in group]
        pairs = [(item, comp.texts[0]) for item, (_, comp) in zip(items, group, strict=True)]
        rewards: list[RewardResult | None] = [None] * len(group)
        scorer, verifiers = self.ctx.scorer, self.ctx.verifiers
        if self.judgement.reward_model and scorer is not None:
            ratings = asyncio.gather(
                *(
                    scorer.score(item, self.t, job.k, comp.texts[0])
                    for item, (job, comp) in zip(items, group, strict=True)
                )
            )
            verdicts, rated = await asyncio.gather(verifiers.judge_many(pairs), ratings)
            rewards = list(rated)
        else:
            verdicts = await verifiers.judge_many(pairs)
        events: list[Event] = []
        try:
            for (job, comp), verdict, reward in zip(group, verdicts, rewards, strict=True):
                # A batch of verdicts is accounted in short turns of the loop, each verdict ahead
                # of the send workers waiting at the gate: behind them, a pause per verdict
                # waited for hundreds of sends, the judges fell behind, and the queue of answers
                # to judge filled, which made every send worker wait on it too.
                await pause(ahead=True)
                if reward is not None:
                    self._rated(job.row, job.k, reward, events)
                text, usage = comp.texts[0], comp.usage
                self._settle(job.row, job.k, text, usage, verdict, reward, events)
        finally:
            # The batch's lines go to the journal's writer together (those accounted so far, if
            # the round is cancelled at a pause); the observer and the stream were told of each
            # as it was accounted.
            if events:
                self.ctx.journal_all(events)

    def _rated(self, row: int, k: int, reward: RewardResult, journal: list[Event]) -> None:
        """A rating's event: told now, journaled with the others of its batch (`journal`)."""
        event = reward.to_event(*self._key(row, k))
        self.ctx.tell(event)
        journal.append(event)

    def _settle(
        self,
        row: int,
        k: int,
        text: str | None,
        usage: Usage,
        verdict: Verdict | None,
        reward: RewardResult | None,
        journal: list[Event] | None = None,
    ) -> None:
        """Judges one finished sample by the strategy's judgement and accounts it; its verdict's
        event is told at once and goes into `journal`, to be journaled with the others of its
        batch (None: it is neither)."""
        stats, state = self.stats, self.state
        stats.samples += 1
        stats.usage = stats.usage + usage
        if not self._replaying:  # counted now: its reservation ends
            self.ctx.budget.settle((self.t, row, k))
        if reward is not None:
            stats.judge_calls += reward.error is None
            stats.judge_usage = stats.judge_usage + reward.usage
            stats.judge_unparsed += reward.unparsed
            stats.judge_errors += reward.error is not None
        if text is None or verdict is None:
            stats.errors += 1
            state.record_error(row, usage)
            if not self._replaying:
                self.ctx.budget.check(state)
            return
        item: Item = state.items[row]
        scored = Scored(item.id, self.t, k, verdict.score, verdict.answer, _share(reward))
        accepted = self.judgement.accepts(scored)
        correct = verdict.score >= self.gamma
        if journal is not None:
            event = self._verdict_event(row, k, scored, correct, accepted)
            self.ctx.tell(event)
            journal.append(event)
        stats.passed += accepted
        state.record_sample(row, self.t, k, text, usage, scored, correct, accepted)
        if accepted and self.ctx.watch is not None:
            self.ctx.watch.check(row, self.t, replayed=self._replaying)
        if not self._replaying:
            self.ctx.budget.check(state)

    def _verdict_event(
        self, row: int, k: int, scored: Scored, correct: bool, accepted: bool
    ) -> Judged:
        flipped = self.judgement.flipped(scored) if isinstance(self.judgement, Noisy) else None
        key = self._key(row, k)
        return Judged(*key, scored.score, scored.answer, correct, accepted, scored.reward, flipped)


def _shown(job: Job) -> tuple[str, ...]:
    """The questions whose solutions a sample's prompt showed."""
    shown = job.request.demos
    return tuple([d.item_id for d in shown]) if shown else ()


def _share(reward: RewardResult | None) -> float | None:
    """The share of the scale the reward model gave; an unreadable or failed rating is 0."""
    if reward is None:
        return None
    return 0.0 if reward.reward is None else reward.reward
