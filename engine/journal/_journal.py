"""The append-only journal of a run: one orjson line per typed event, written through at once
(in zlib frames, `_frames`: a run's journal is compact; any journal is read back either way).

The events are the frozen dataclasses of `_events`, written and read by the one codec (`_codec`);
the replay readers (`completed_samples`, `difficulty_ratings`) return typed records (a resumed
run reads its samples as `Replays`, kept as their lines until each is replayed). Event kinds (`ev`):
- `start`: a run (or a resumed run) began.
- `sample`: one planned sample landed, written as it lands (in that turn of the loop): its text,
  usage, attempts and the demonstrations it was shown, or its final error. Keyed by (round, item,
  k).
- `verdict`: the verifier's judgement of a landed sample (score, extracted answer), whether it is
  correct (score >= γ) and whether the run's judgement accepted it (`passed`).
- `judge`: the reward model's rating of a landed sample (the share of the scale it gave, its reply
  and usage), before its `verdict`; only with `--judge reward`.
- `difficulty`: the difficulty model's rating of a question (da), asked once per question.
  A failed call is journaled too, and settles the question at the neutral rating for good.
- `retry`: one failed attempt that will be retried (kind, message, delay).
- `round`: a round's totals, written at its barrier.
- `limiter`: the send path's state (in flight, the adaptive cap, the limits in force), sampled
  every second while rounds run: the run's timeline (`ttc report --timeline`).
- `batch_file`, `batch`, `batch_state` (batch mode): every input file and batch id the moment it
  exists, and each batch's states (`_batch_events`); a resumed run polls those batches
  (`Replays.batches`) and never creates a second one for the same samples.

On resume, a sample with a response is never sent again (a landed sample with no verdict yet is
judged again, not bought again); a sample that ended in an error was never paid for, and is sent
again. Role calls are not asked again either: a sample's `judge` event, once its `verdict` is
written, and a question's `difficulty` event stand as they are, failed calls included, so the
rounds that acted on them replay the same.

Every line also carries `at`, the wall-clock time it was written (`_walltime` sums a run's
sessions from it); a sample answered by the offline simulator carries `sim: true`, so the label
follows the answer into a resumed run.

Lines are written by the journal's own writer thread (`_appender`), so that `append` never
waits for the disk: it encodes the event, hands the line over and returns (the line's byte
offset is known then). What that keeps of the crash guarantees:
- the lines reach the file in the order they were appended, and none after one that failed;
- a line reaches the OS within about 25 ms of its `append` (the writer takes everything
  appended meanwhile in one write; `flush` and `sync` do not wait that long): a process killed,
  SIGKILL included, loses the lines of its last few tens of milliseconds at most, and a resumed
  run sends those samples again;
- `sync` (at each round barrier, called in a thread) returns once every line appended before it
  is written and fsynced, so a round's barrier survives a machine crash; `close` writes every
  line, fsyncs and closes;
- a write that fails (a full disk) cuts the file back to its last whole line and writes nothing
  more; the next `append`, `flush`, `sync` or `close` raises it as a WriteError, and the lines
  appended in between are lost like those of a kill;
- a torn last line (a kill in the middle of a write) is cut off when the journal is reopened.
A compact journal keeps each of these frame for line: the writer thread compresses what it
writes, one frame a write, so `append` costs what it did and a torn last frame is cut as a torn
line is. A plain journal (every journal from before) is resumed plain.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import orjson

from ttc.engine._util._records import json_object
from ttc.engine.contract._errors import DataError
from ttc.engine.contract._types import Verdict
from ttc.engine.journal._appender import Appender
from ttc.engine.journal._batch_events import (
    BatchCreated,
    BatchEvent,
    BatchFileUploaded,
    BatchUpdated,
)
from ttc.engine.journal._codec import Eventlike, Fields, encode
from ttc.engine.journal._events import (
    EVENTS,
    DifficultyRated,
    Event,
    Judged,
    LimitsSteered,
    Rated,
    SampleKey,
    SampleLanded,
)
from ttc.engine.journal._frames import lines

__all__ = [
    "Journal",
    "Replay",
    "Replays",
    "SampleKey",
    "completed_samples",
    "decode",
    "journal_text",
    "read_events",
    "steered_in",
]


def journal_lines(path: Path) -> Iterator[tuple[int, Fields]]:
    """(line number, object) of each line; a torn final line is skipped, a bad one is not (a
    DataError naming the file and the line; of a compact journal, a torn last frame is skipped,
    and the line is its number in the text). A journal that does not exist has no lines."""
    for lineno, _, fields in _raw_lines(path):
        yield lineno, fields


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes, Fields]]:
    """`journal_lines`, each with the bytes of its line."""
    for lineno, raw in lines(path):
        fields = json_object(raw, f"{path}:{lineno}", strict=True)
        if "ev" not in fields:
            raise DataError(f"{path}:{lineno}: journal line has no 'ev' field")
        yield lineno, raw, fields


def journal_text(path: Path) -> Iterator[bytes]:
    """The lines of a journal, plain or compact, as plain JSON lines (each with its newline):
    what `python -m ttc.engine.journal` prints; a torn last line or frame is left out."""
    for _, raw in lines(path):
        yield raw + b"\n"


def read_journal(path: Path) -> Iterator[Fields]:
    """The lines of a journal in order, as JSON objects (`read_events` gives them typed)."""
    for _, fields in journal_lines(path):
        yield fields


def decode(fields: Fields, where: str = "journal") -> Event:
    """The typed event of one line of a run's journal; a DataError naming `where` (file:line)
    if not."""
    event: Event = EVENTS.read(fields, where)
    return event


def read_events(path: Path, kinds: frozenset[str] | None = None) -> Iterator[Event]:
    """The typed events of a journal in order (only those of `kinds`, when given)."""
    for lineno, fields in journal_lines(path):
        if kinds is None or fields["ev"] in kinds:
            yield decode(fields, f"{path}:{lineno}")


def steered_in(path: Path) -> list[LimitsSteered]:
    """`ttc ctl`'s changes journaled in `path`, in order."""
    kinds = frozenset({LimitsSteered.KIND})
    return [e for e in read_events(path, kinds) if isinstance(e, LimitsSteered)]


@dataclass(frozen=True, slots=True)
class Replay:
    """A sample a resumed run replays instead of sending: its journaled response, with what the
    journal says of it since: its verdict (when it was judged) and its reward model's last
    rating (answered or failed)."""

    sample: SampleLanded
    verdict: Verdict | None = None
    rating: Rated | None = None


_REPLAYED = frozenset({SampleLanded.KIND, Judged.KIND, Rated.KIND})
_BATCHES = frozenset({BatchFileUploaded.KIND, BatchCreated.KIND, BatchUpdated.KIND})


def completed_samples(path: Path) -> dict[SampleKey, Replay]:
    """The samples of a journal that have a response, keyed by (round, item id, k)."""
    return dict(Replays.read(path))


# A landed sample as the journal holds it: its line, and those of its verdict and its rating.
_Lines = tuple[bytes, bytes | None, bytes | None]
E = TypeVar("E", bound=Event)


class Replays(MutableMapping[SampleKey, Replay]):
    """`completed_samples` as a resumed run replays them: each sample is kept as its journal
    lines until it is taken, then decoded. Bytes hold no references, so however many samples a
    journal holds (tens of thousands), the garbage collector has none of them to walk, and its
    pauses (which stop the host's loop too) stay short."""

    def __init__(self) -> None:
        self._lines: dict[SampleKey, _Lines] = {}
        self._decoded: dict[SampleKey, Replay] = {}  # what was set, not read
        # Batch mode: each round's batch events, in order (a resume polls those batches).
        self.batches: dict[int, list[BatchEvent]] = {}

    @classmethod
    def read(cls, path: Path) -> Replays:
        """Every line is read and decoded now: a bad one is a DataError naming its line."""
        replays = cls()
        lines = replays._lines
        for lineno, raw, fields in _raw_lines(path):
            if fields["ev"] in _BATCHES:
                found = decode(fields, f"{path}:{lineno}")
                assert isinstance(found, BatchFileUploaded | BatchCreated | BatchUpdated)
                replays.batches.setdefault(found.round, []).append(found)
            if fields["ev"] not in _REPLAYED:
                continue
            event = decode(fields, f"{path}:{lineno}")
            if isinstance(event, SampleLanded):
                lines[event.key] = (raw, None, None)
                continue
            if not isinstance(event, Judged | Rated):
                continue  # a sample that failed: sent again
            before = lines.get(event.key)
            if before is None:
                continue  # a verdict or rating of a sample that failed, or that is not kept
            if isinstance(event, Judged):
                lines[event.key] = (before[0], raw, before[2])
            else:
                lines[event.key] = (before[0], before[1], raw)
        return replays

    def __getitem__(self, key: SampleKey) -> Replay:
        if key in self._decoded:
            return self._decoded[key]
        sample, verdict, rating = self._lines[key]
        judged = None if verdict is None else _decoded(verdict, Judged)
        return Replay(
            _decoded(sample, SampleLanded),
            None if judged is None else Verdict(judged.score, judged.answer),
            None if rating is None else _decoded(rating, Rated),
        )

    def __setitem__(self, key: SampleKey, value: Replay) -> None:
        self._lines.pop(key, None)
        self._decoded[key] = value

    def __delitem__(self, key: SampleKey) -> None:
        if self._decoded.pop(key, None) is None:
            del self._lines[key]

    def __contains__(self, key: object) -> bool:
        return key in self._lines or key in self._decoded

    def __iter__(self) -> Iterator[SampleKey]:
        yield from self._lines
        yield from self._decoded

    def __len__(self) -> int:
        return len(self._lines) + len(self._decoded)


def _decoded(raw: bytes, kind: type[E]) -> E:
    """A line `Replays.read` has decoded once already."""
    event = decode(orjson.loads(raw))
    assert isinstance(event, kind)
    return event


def difficulty_ratings(path: Path) -> dict[str, DifficultyRated]:
    """The `difficulty` events of a journal, answered or failed, by item id (the last of each)."""
    found: dict[str, DifficultyRated] = {}
    for event in read_events(path, frozenset({DifficultyRated.KIND})):
        assert isinstance(event, DifficultyRated)
        found[event.item] = event
    return found


class Journal:
    """Appends events to `path` through a writer thread; reopening an existing journal first
    cuts a torn last line (or frame). `compact`: a new journal is written in frames (a run's;
    `ttc batch` reads its own back by offset, so it stays plain). `flush`, `sync` and `close`
    block: async code calls them in a thread."""

    def __init__(self, path: Path, *, compact: bool = False) -> None:
        self.path = path
        self._out = Appender(path, compact=compact)

    def open(self) -> Journal:
        """Opens the file, cutting a torn tail (reopening a compact journal reads every frame's
        header: async code calls it in a thread)."""
        self._out.open()
        return self

    def append(self, event: Eventlike) -> int:
        """Hands one event (of any registered kind: `_codec`), as one line, to the writer and
        returns at once (never waiting for the disk); returns the line's byte offset (in a
        compact journal, in the text this session appends).
        WriteError: an earlier line failed."""
        if not self._out.is_open:
            raise RuntimeError("journal is not open")
        line = encode(event)
        # The wall clock to the millisecond: a run's times over its sessions (round() to a number
        # of digits goes through the float's decimal digits: a fifth of this call's time).
        line["at"] = round(time.time() * 1000) / 1000
        return self._out.append(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))

    def extend(self, events: Iterable[Eventlike]) -> None:
        """`append` for several events at once, each its own line, in order, under one time
        stamp: what lands or is judged in one turn of the loop (one hand-over to the writer
        instead of one per line, some 1.5 us a line less). An event that cannot be encoded (a
        bug) leaves the others written: its error is raised once they are handed over.
        WriteError: an earlier line failed."""
        if not self._out.is_open:
            raise RuntimeError("journal is not open")
        at = round(time.time() * 1000) / 1000
        dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        lines: list[bytes] = []
        error: Exception | None = None
        for event in events:
            try:
                line = encode(event)
                line["at"] = at
                lines.append(dumps(line, option=newline))
            except Exception as exc:
                error = error or exc
        if lines:
            self._out.extend(lines)
        if error is not None:
            raise error

    def flush(self) -> None:
        """Waits until every line appended so far has reached the OS (to read it back)."""
        self._out.flush()

    def sync(self) -> None:
        """Waits until every line appended so far is written and fsynced: it then survives a
        machine crash (called at round barriers)."""
        self._out.sync()

    def close(self) -> None:
        """Writes every line appended, fsyncs and closes."""
        self._out.close()

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
