"""`ttc batch IN --out OUT --via-batch-api`: an OpenAI Batch input file submitted to a real Batch
API (OpenAI's, or any compatible server's: `ttc serve`), journaled and resumable.

    validate every line ─► split (by url; 50,000 requests or 200 MB a file) ─► per part:
      upload ─► create (tagged by the input's sha256 and the part) ─► poll ... ─► read output
      and error files ─► OUT in input order, one line per input line

`OUT.jsonl.batchapi` journals the input's sha256 and each part's file and batch id the moment
it exists; the same command again polls those batches (and, for a part whose batch id was not
journaled, asks the server for a batch with its tag) and never creates a second batch for a
part. The output is the Batch output format of `ttc batch` (the vendor's own lines); a request a
batch did not answer (it expired, or was cancelled) gets an `error` line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import orjson

from ttc.engine import ConfigError, DataError, ProviderError
from ttc.engine._util import Unreadable
from ttc.engine._util._nofollow import open_file, temp_file
from ttc.engine._util._records import json_object, read_lines
from ttc.engine.cli._batchio import BatchJob, InputScan, iter_jobs, scan_input
from ttc.engine.journal import encode
from ttc.engine.journal._codec import Codec, event, spec

if TYPE_CHECKING:
    from ttc.adapters import OpenAIProvider
    from ttc.adapters.providers import OpenAIBatchAPI

__all__ = ["via_batch_api"]

EXIT_DEADLINE = 3  # as `ttc run` stopped by a limit: resumable
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
# OpenAI's Batch API: an embeddings batch holds at most this many inputs across its requests,
# and a batch's requests all name one model (a file of several fails validation as a whole).
MAX_EMBEDDING_INPUTS = 50_000
CHAT = "/v1/chat/completions"
_UNDONE = {"expired": "batch_expired", "cancelled": "batch_cancelled", "failed": "batch_failed"}


@dataclass(slots=True)
class _Part:
    number: int
    url: str
    ids: list[str]
    data: bytes
    file_id: str | None = None
    batch_id: str | None = None


@event()
@dataclass(frozen=True, slots=True)
class ApiStarted:
    """The `.batchapi` journal of the input named by its sha256 began."""

    KIND: ClassVar[str] = "start"
    sha256: str = field(metadata=spec(missing=""))
    requests: int = field(metadata=spec(missing=0))


@event()
@dataclass(frozen=True, slots=True)
class PartUploaded:
    """Part `part`'s input file was uploaded: its file id."""

    KIND: ClassVar[str] = "file"
    part: int
    id: str


@event()
@dataclass(frozen=True, slots=True)
class PartCreated:
    """Part `part`'s batch exists: its id; `found`: by its tag on the server, not created now."""

    KIND: ClassVar[str] = "batch"
    part: int
    id: str
    found: bool = field(default=False, metadata=spec(omit="empty"))


_FACTS = Codec(ApiStarted, PartUploaded, PartCreated)
Fact = ApiStarted | PartUploaded | PartCreated


class _Journal:
    """`OUT.batchapi`: one JSON line per fact, each written and fsynced at once (a few lines)."""

    def __init__(self, path: Path, scan: InputScan) -> None:
        self.path = path
        self.facts: list[Fact] = []
        if path.exists():
            for lineno, raw in read_lines(path, torn_tail=True):
                where = f"{path}:{lineno}"
                fact: Fact = _FACTS.read(json_object(raw, where, strict=True), where)
                if isinstance(fact, ApiStarted) and fact.sha256 != scan.sha256:
                    raise ConfigError(
                        f"{where}: this journal is of another input (sha256 "
                        f"{fact.sha256[:12]}…); remove it or choose another --out"
                    )
                self.facts.append(fact)
        if not self.facts:
            self.write(ApiStarted(scan.sha256, scan.count))

    def write(self, fact: Fact) -> None:
        line = encode(fact)
        line["at"] = round(time.time(), 3)
        with open_file(self.path, "ab") as out:
            out.write(orjson.dumps(line) + b"\n")
            out.flush()
            os.fsync(out.fileno())
        self.facts.append(fact)

    def known(self, kind: type[PartUploaded | PartCreated], part: int) -> str | None:
        """The id (of a file, or a batch) last journaled for `part`, if any."""
        found = [f.id for f in self.facts if isinstance(f, kind) and f.part == part]
        return found[-1] if found else None


def refused(jobs: list[BatchJob], model: str | None) -> str | None:
    """What OpenAI's Batch API will not take of the input, in a line (None: nothing): a url
    whose requests name more than one model, or an embeddings url of over 50,000 inputs. Said
    before anything is uploaded."""
    models: dict[str, dict[str, int]] = {}
    inputs: dict[str, int] = {}
    for job in jobs:
        first = models.setdefault(job.url, {})
        first.setdefault(str(model or job.body.get("model")), job.index + 1)
        if job.url == "/v1/embeddings":
            given = job.body.get("input")
            inputs[job.url] = inputs.get(job.url, 0) + (
                len(given) if isinstance(given, list) else 1
            )
    for url, named in models.items():
        if len(named) > 1:
            (a, line_a), (b, line_b) = list(named.items())[:2]
            return (
                f"the Batch API takes one model per batch, and the {url} requests name "
                f"several ({a!r} on line {line_a}, {b!r} on line {line_b}); give --model, or "
                "split the input"
            )
    for url, count in inputs.items():
        if count > MAX_EMBEDDING_INPUTS:
            return (
                f"the Batch API takes at most {MAX_EMBEDDING_INPUTS:,} embedding inputs a batch, "
                f"and the {url} requests have {count:,}; split the input"
            )
    return None


def _parts(jobs: list[BatchJob], model: str | None) -> list[_Part]:
    parts: list[_Part] = []
    current: dict[str, _Part] = {}
    for job in jobs:
        body = job.body if model is None else {**job.body, "model": model}
        line = (
            orjson.dumps(
                {"custom_id": job.custom_id, "method": "POST", "url": job.url, "body": body}
            )
            + b"\n"
        )
        part = current.get(job.url)
        if part is None or len(part.ids) >= MAX_REQUESTS or len(part.data) + len(line) > MAX_BYTES:
            part = current[job.url] = _Part(len(parts), job.url, [], b"")
            parts.append(part)
        part.ids.append(job.custom_id)
        part.data += line
    return parts


async def _submit(api: OpenAIBatchAPI, journal: _Journal, part: _Part, tag: str) -> None:
    part.batch_id = journal.known(PartCreated, part.number)
    if part.batch_id is not None:
        return
    found = await api.find(tag) if len(journal.facts) > 1 else None
    if found is not None:
        part.batch_id = found.id
        journal.write(PartCreated(part.number, found.id, found=True))
        return
    part.file_id = journal.known(PartUploaded, part.number)
    if part.file_id is None:
        part.file_id = await api.upload(part.data, f"{tag}.jsonl")
        journal.write(PartUploaded(part.number, part.file_id))
    status = await api.create(part.file_id, tag, part.url)
    part.batch_id = status.id
    journal.write(PartCreated(part.number, status.id))


async def _submit_all(
    api: OpenAIBatchAPI,
    journal: _Journal,
    parts: list[_Part],
    sha256: str,
    source: str,
    say: Callable[[str], None],
) -> None:
    """Submits every part (or finds its batch). Chat batches last: a server that refuses
    another endpoint (`ttc serve` serves chat only) refuses it before any batch is bought, and
    that is said in a line (DataError); the parts keep their numbers."""
    for part in sorted(parts, key=lambda p: (p.url == CHAT, p.number)):
        try:
            await _submit(api, journal, part, f"ttc-batch-{sha256[:16]}-p{part.number}")
        except ProviderError as exc:
            if exc.retryable or any(p.batch_id for p in parts):
                raise
            raise DataError(
                f"{source}: --via-batch-api: the server's Batch API refuses the {part.url} "
                f"requests ({exc}); nothing was bought: send them without --via-batch-api, or "
                "leave them out"
            ) from None
        count = f"{len(part.ids):,} requests"
        say(f"part {part.number + 1}/{len(parts)}: batch {part.batch_id} ({count})")


class _Overdue(Exception):
    """--batch-deadline passed with a batch not ended (its message says which)."""


async def _wait(
    api: OpenAIBatchAPI, parts: list[_Part], first_s: float, say: Callable[[str], None]
) -> dict[int, Any]:
    """Polls every part's batch until each has ended; the final statuses by part. _Overdue once
    `api.deadline_s` has passed (a server may keep a batch in progress forever)."""
    done: dict[int, Any] = {}
    delay, started, errors = first_s, time.monotonic(), 0
    seen: dict[int, str] = {}
    while len(done) < len(parts):
        if time.monotonic() - started > api.deadline_s:
            late = next(p for p in parts if p.number not in done)
            raise _Overdue(
                f"batch {late.batch_id} is still {seen.get(late.number, 'not ended')} after "
                f"{(time.monotonic() - started) / 3600:.1f} h (--batch-deadline "
                f"{api.deadline_s:g} s)"
            )
        await asyncio.sleep(delay)
        delay = min(60.0, delay * 1.5)
        for part in parts:
            if part.number in done or part.batch_id is None:
                continue
            try:
                status = await api.poll(part.batch_id)
            except ProviderError as exc:
                errors += 1
                if not exc.retryable or errors > 30:
                    raise
                say(f"polling batch {part.batch_id} failed ({exc}); polling again later")
                continue
            errors = 0
            if seen.get(part.number) != status.status:
                seen[part.number] = status.status
                say(
                    f"batch {status.id}: {status.status.replace('_', ' ')}, {status.completed}/"
                    f"{status.total} done, {status.failed} failed, waited "
                    f"{time.monotonic() - started:.0f} s"
                )
            if status.final:
                done[part.number] = status
    return done


def _keep(
    lines: dict[str, dict[str, Any]],
    held: set[str],
    output: list[dict[str, Any] | Unreadable],
    left_out: Counter[str],
) -> None:
    """Adds a part's output lines to `lines` by custom id. What the server sent is input: a
    line that is no JSON object, one for an id the part never sent, and a second one for an
    id are counted in `left_out` and left out."""
    for line in output:
        cid = None if isinstance(line, Unreadable) else str(line.get("custom_id"))
        if cid is None:
            left_out["unreadable lines"] += 1
        elif cid not in held:
            left_out["for ids never sent"] += 1
        elif cid in lines:
            left_out["repeated ids"] += 1
        else:
            lines[cid] = cast(dict[str, Any], line)


async def via_batch_api(args: argparse.Namespace, provider: OpenAIProvider) -> int:
    """Submits the input through the Batch API; writes OUT. 0 written; 130 interrupted."""
    from ttc.adapters.providers import OpenAIBatchAPI

    out = Path(args.out)
    scan = scan_input(Path(args.input), need_model=args.model is None)
    jobs = list(iter_jobs(scan.path, bytearray()))
    why = refused(jobs, args.model)
    if why is not None:  # before anything is written or bought
        raise DataError(f"{args.input}: --via-batch-api: {why}")
    journal = _Journal(out.with_name(out.name + ".batchapi"), scan)

    def say(text: str) -> None:
        if not args.quiet:
            print(f"ttc batch: {text}", file=sys.stderr, flush=True)

    api = OpenAIBatchAPI(provider, poll_s=(args.batch_poll, 60.0))
    api.deadline_s = args.batch_deadline
    started = time.monotonic()
    try:
        parts = _parts(jobs, args.model)
        await _submit_all(api, journal, parts, scan.sha256, args.input, say)
        try:
            statuses = await _wait(api, parts, args.batch_poll, say)
        except _Overdue as late:
            print(f"ttc batch: stopped: {late}; the same command polls it again", file=sys.stderr)
            return EXIT_DEADLINE
        lines: dict[str, dict[str, Any]] = {}
        left_out: Counter[str] = Counter()
        for part in parts:
            status = statuses[part.number]
            _keep(lines, set(part.ids), await api.output_lines(status), left_out)
            for cid in part.ids:
                if cid not in lines:
                    code = _UNDONE.get(status.status, "batch_incomplete")
                    lines[cid] = {
                        "id": None,
                        "custom_id": cid,
                        "response": None,
                        "error": {
                            "code": code,
                            "message": f"its batch {status.id} ended {status.status} before it ran",
                        },
                    }
    finally:
        await api.aclose()
    if left_out:
        print(
            f"ttc batch: {sum(left_out.values()):,} results refused "
            f"({', '.join(f'{n:,} {what}' for what, n in left_out.items())}); the others are kept",
            file=sys.stderr,
        )
    tmp = out.with_name(out.name + ".tmp")
    with temp_file(tmp) as sink:
        sink.write(b"".join(orjson.dumps(lines[job.custom_id]) + b"\n" for job in jobs))
    tmp.replace(out)
    answered = sum(1 for x in lines.values() if (x.get("response") or {}).get("status_code") == 200)
    print(
        f"batch: {len(jobs):,} requests through the Batch API in {len(parts)} batch(es): "
        f"{answered:,} answered, {len(jobs) - answered:,} with an error or a 4xx; "
        f"{time.monotonic() - started:.1f} s"
    )
    print(f"output: {out}")
    return 0
