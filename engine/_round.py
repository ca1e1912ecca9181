"""One round of Algorithm 1: replay what the journal already has, send the rest, judge, account.

A sample is journaled the moment it lands (text and usage: paid work is never lost), and its
verdict when the verifier returns. A sample the journal holds is replayed instead of sent; one
that landed but was never judged (the run stopped in between) is judged now, not bought again.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ttc.engine._errors import ProviderError
from ttc.engine._journal import Journal, SampleKey
from ttc.engine._scheduler import Job, Outcome, Sender, run_round
from ttc.engine._state import RoundStats, RunState
from ttc.engine._strategy import DemoPlan
from ttc.engine._types import Completion, Demo, Message, Request, Usage, Verdict

if TYPE_CHECKING:
    from ttc.engine._engine import Engine

log = logging.getLogger("ttc")


def sample_seed(run_seed: int, item_id: str, round_no: int, k: int) -> int:
    """The sampling seed of one planned sample: stable across processes, fits in 31 bits."""
    digest = hashlib.blake2b(f"{run_seed}/{item_id}/{round_no}/{k}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") & 0x7FFFFFFF


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

    async def run(self, rows: Sequence[int], plan: DemoPlan) -> None:
        """Replays, then sends every remaining sample of `rows`, judging each as it lands."""
        cfg = self.engine.config
        self.stats.active = len(rows)
        self.stats.planned = len(rows) * cfg.k
        replayed = await self._replay(rows)
        self.stats.replayed = len(replayed)
        self.stats.requests = len(rows) * cfg.k - len(replayed)
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
            jobs = (j for j in self._jobs(rows, plan) if (j.row, j.k) not in replayed)
            await run_round(
                jobs, sender, self.on_landed, self.on_judged, workers=workers, verifiers=verifiers
            )
        self.stats.solved = self.state.solved_count()
        self.stats.coverage = self.stats.solved / self.state.n

    def _emit(self, event: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal.append(event)

    def _key(self, row: int, k: int) -> dict[str, Any]:
        return {"round": self.t, "item": self.state.items[row].id, "k": k}

    async def _replay(self, rows: Sequence[int]) -> set[tuple[int, int]]:
        """Accounts the journal's samples of this round; returns their (row, k)."""
        found = []
        for row in rows:
            for k in range(self.engine.config.k):
                event = self.done.pop((self.t, self.state.items[row].id, k), None)
                if event is not None:
                    found.append((row, k, event))
        unjudged = [(row, k, ev) for row, k, ev in found if "score" not in ev]
        if unjudged:
            pairs = [(self.state.items[row], str(ev["text"])) for row, _, ev in unjudged]
            verdicts = await self.engine.verifiers.judge_many(pairs)
            for (row, k, ev), verdict in zip(unjudged, verdicts, strict=True):
                ev.update(score=verdict.score, answer=verdict.answer)
                self._emit_verdict(row, k, verdict)
        for row, k, ev in found:
            verdict = Verdict(float(ev["score"]), ev.get("answer"))
            passed = self.engine.strategy.judgement.passed(verdict)
            self._finish(row, k, str(ev["text"]), Usage(*ev["usage"]), passed)
        return {(row, k) for row, k, _ in found}

    def _jobs(self, rows: Sequence[int], plan: DemoPlan) -> Iterator[Job]:
        cfg, suite, state = self.engine.config, self.engine.suite, self.state
        for row in rows:
            if self.engine.stopped is not None:
                return  # stop dispatching; what is in flight finishes and is recorded
            item = state.items[row]
            demos = tuple(
                Demo(state.items[r].id, state.items[r].question, resp, sim)
                for r, sim in plan.get(row, ())
                if (resp := state.response(r)) is not None
            )
            # With no solved neighbour yet, an adaptive prompt has nothing to show: zero-shot.
            prompt = suite.adaptive_prompt(item, demos) if demos else suite.warmup_prompt(item)
            est = math.ceil(len(prompt) / 4) + self.engine.expected_output_tokens()
            messages = (Message("user", prompt),)
            for k in range(cfg.k):
                sampling = replace(cfg.sampling, seed=sample_seed(cfg.seed, item.id, self.t, k))
                yield Job(row, self.t, k, Request(messages, sampling, 1, item.id, demos), est)

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
        self.engine.progress.request_done()
        comp = outcome.completion
        if comp is None:
            assert outcome.error is not None
            err = outcome.error
            self.stats.rate_limited += err.kind == "rate_limited"
            self._emit({**event, "ok": False, "error": err.kind, "message": str(err)[:500]})
            self._finish(job.row, job.k, None, Usage(), False)
            return
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
        pairs = [(self.state.items[job.row], comp.texts[0]) for job, comp in group]
        verdicts = await self.engine.verifiers.judge_many(pairs)
        for (job, comp), verdict in zip(group, verdicts, strict=True):
            passed = self._emit_verdict(job.row, job.k, verdict)
            self._finish(job.row, job.k, comp.texts[0], comp.usage, passed)

    def _emit_verdict(self, row: int, k: int, verdict: Verdict) -> bool:
        passed = self.engine.strategy.judgement.passed(verdict)
        self._emit(
            {
                "ev": "verdict",
                **self._key(row, k),
                "score": verdict.score,
                "answer": verdict.answer,
                "passed": passed,
            }
        )
        return passed

    def _finish(self, row: int, k: int, text: str | None, usage: Usage, passed: bool) -> None:
        stats = self.stats
        stats.samples += 1
        stats.usage = stats.usage + usage
        stats.passed += passed
        stats.errors += text is None
        if self.state.record_sample(row, self.t, k, text, usage, passed):
            stats.newly_solved += 1
        self.engine.check_budget(self.state)
