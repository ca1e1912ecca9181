"""How a round's requests become batches: split by the vendor's limits (`chunks`), checked
against `--max-cost` before each is submitted (`affordable`), and the files a killed session
uploaded that a resumed one may use again (`journaled_files`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ttc.engine.contract._batch import BatchAPI
from ttc.engine.contract._types import Usage
from ttc.engine.journal._batch_events import BatchCreated, BatchEvent, BatchFileUploaded
from ttc.engine.run._budget import StopReason
from ttc.engine.run._dispatch import Landing
from ttc.engine.send._sender import Job
from ttc.engine.send._tokens import text_tokens

__all__ = ["affordable", "chunks", "custom_id", "journaled_files"]


def custom_id(job: Job) -> str:
    """A sample's id within its round's batches: round, question row, sample index."""
    return f"t{job.round}-r{job.row}-k{job.k}"


def chunks(api: BatchAPI, jobs: list[Job]) -> Iterable[tuple[list[Job], list[bytes]]]:
    """`jobs` in batches of at most the vendor's requests and bytes, with their input lines."""
    size = 0
    chunk: list[Job] = []
    lines: list[bytes] = []
    for job in jobs:
        line = api.encode(custom_id(job), job.request)
        if chunk and (len(chunk) >= api.max_requests or size + len(line) > api.max_bytes):
            yield chunk, lines
            chunk, lines, size = [], [], 0
        chunk.append(job)
        lines.append(line)
        size += len(line)
    if chunk:
        yield chunk, lines


def affordable(landing: Landing, chunk: list[Job]) -> bool:
    """--max-cost: a batch whose estimated cost would pass the budget is not submitted (the
    run stops, saying why)."""
    budget, state = landing.ctx.budget, landing.state
    limit, price = landing.ctx.config.max_cost_usd, budget.pricing.price
    if limit is None or price is None:
        return True
    estimate = Usage()
    for job in chunk:
        prompt = text_tokens(sum(len(m.content) for m in job.request.messages))
        estimate = estimate + Usage(prompt, max(0, job.est_tokens - prompt))
    spent = price.cost(state.total_usage())
    spent += sum(c for c in budget.role_costs(state).values() if c is not None)
    cost = price.cost(estimate.bought_in_batch())
    if spent + cost <= limit:
        return True
    budget.stop(
        StopReason.budget(
            f"--max-cost ${limit:g} would be passed by the next batch ({len(chunk)} requests, "
            f"about ${cost:.4f} at the batch rate, ${spent:.4f} spent)"
        )
    )
    return False


def journaled_files(api: BatchAPI, journaled: Sequence[BatchEvent]) -> dict[str, str]:
    """The input files a session uploaded but made no batch of (killed between the two), by
    tag: a resumed run creates the batch from the file instead of uploading it again."""
    used = {e.file_id for e in journaled if isinstance(e, BatchCreated)}
    return {
        e.tag: e.file_id
        for e in journaled
        if isinstance(e, BatchFileUploaded) and e.file_id not in used and api.reusable(e.file_id)
    }
