"""The one journal codec against the hand-written codecs it replaced (commit c798ef4): every event
kind, in each shape its line takes, writes the very lines they wrote and reads back as itself;
the odd lines of older journals read as they did; `ttc batch`'s journals use the same codec."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from ttc.engine import DataError
from ttc.engine.cli._batchapi import _FACTS, ApiStarted, PartCreated, PartUploaded
from ttc.engine.cli._batchio import BATCH_JOURNAL, BatchStarted, RequestResult
from ttc.engine.contract import Usage
from ttc.engine.journal import (
    BatchCreated,
    BatchFileUploaded,
    BatchUpdated,
    DifficultyRated,
    Judged,
    LimiterSampled,
    Rated,
    Retried,
    RoundEnded,
    RunStarted,
    SampleFailed,
    SampleLanded,
    decode,
    encode,
)
from ttc.engine.journal._codec import _PLANS, Codec, event, spec
from ttc.engine.journal._events import EVENTS, LimitsSteered

DATA = Path(__file__).resolve().parents[2] / "data"

RUN_EVENTS: list[Any] = [
    RunStarted(False, 1700000000.123),
    RunStarted(True, 1700000001.5),
    SampleLanded(1, "q0", 0, "\\boxed{4}", Usage(12, 30, 5), 2, ("q3", "q4"), 0.7, 0.0123),
    SampleLanded(1, "q1", 0, "x", Usage(1, 2, 0), latency=0.5),
    SampleLanded(2, "q1", 3, "y", Usage(100, 20, 5, 64).bought_in_batch(), 1, (), None, 1.0, True),
    SampleLanded(0, "q9", 1, "", Usage(1, 2, 3, 4), 3, ("a",), 0.0, 0.0, False),
    SampleFailed(1, "q2", 1, "rate_limited", "HTTP 429", 6),
    SampleFailed(1, "q3", 0, "fatal", "", 1, ("q1",), 1.2),
    Judged(1, "q0", 0, 1.0, "4", True, True, 0.8),
    Judged(1, "q1", 0, 0.0, None, False, False, None, True),
    Judged(1, "q2", 0, 0.5, "x", True, False, 0.25, False),
    Judged(2, "q3", 1, 0.0, ""),
    Rated(1, "q0", 0, 0.8, "Score: 8", Usage(40, 3, 0)),
    Rated(1, "q1", 0, error="fatal: HTTP 401"),
    Rated(1, "q2", 0, None, None, Usage(4, 0, 0, 2)),
    DifficultyRated("q0", 7.0, "Difficulty: 7", Usage(50, 4, 0)),
    DifficultyRated("q1", None, "hard", Usage(50, 1, 0)),
    DifficultyRated("q2", error="transient: HTTP 503"),
    Retried(1, "q2", 1, 1, "rate_limited", "HTTP 429", 0.25),
    Retried(3, "q4", 0, 2, "transient"),
    RoundEnded(1, 3, 4, 1, 1 / 3, 1, 5, 1.234),
    LimiterSampled(3, 8, 600.0, None),
    LimiterSampled(0, 1),
    LimiterSampled(5, 16, None, 90000.0),
    BatchFileUploaded(1, "ttc-abc-r1-p0", "file-1", 40, 12345),
    BatchCreated(1, "ttc-abc-r1-p0", "batch_1", "file-1", ("1:q0:0", "1:q1:0")),
    BatchCreated(2, "t", "batch_2", "file-2", (), 3),
    BatchUpdated(1, "batch_1", "in_progress", 40, 10, 0, 12.5),
    BatchUpdated(1, "batch_1", "expired", 40, 30, 2, 3600.0, {"expired": 8, "failed": 2}),
    BatchUpdated(1, "batch_2", "validating"),
]
BATCH_EVENTS: list[Any] = [
    BatchStarted("in.jsonl", "ab" * 32, 3, False),
    BatchStarted("/x/in.jsonl", "cd" * 32, 10, True),
    RequestResult(
        0,
        True,
        1,
        {
            "id": "r0",
            "custom_id": "a",
            "response": {"status_code": 200, "body": {"x": [1, 2]}},
            "error": None,
        },
    ),
    RequestResult(
        2,
        False,
        4,
        {
            "id": "r2",
            "custom_id": "c",
            "response": None,
            "error": {"code": "rate_limited", "message": "m"},
        },
    ),
]
# The lines c798ef4's hand-written `encode()` methods wrote for the events above, in order.
WRITTEN = (DATA / "journal_c798ef4_writes.jsonl").read_bytes().splitlines()


@pytest.mark.parametrize(
    ("event", "line"),
    list(zip([*RUN_EVENTS, *BATCH_EVENTS], WRITTEN, strict=True)),
    ids=lambda x: type(x).__name__ if not isinstance(x, bytes) else "",
)
def test_every_kind_writes_the_line_the_hand_codec_wrote_and_reads_back(
    event: Any, line: bytes
) -> None:
    assert orjson.dumps(encode(event)) == line  # field by field, in the same order
    codec = BATCH_JOURNAL if isinstance(event, BatchStarted | RequestResult) else EVENTS
    assert codec.decode(orjson.loads(line)) == event


# `ttc batch --via-batch-api`'s facts, as c798ef4's `_batchapi` wrote them (dict literals).
API_FACTS: list[tuple[Any, dict[str, Any]]] = [
    (ApiStarted("ab" * 32, 7), {"ev": "start", "sha256": "ab" * 32, "requests": 7}),
    (PartUploaded(0, "file-1"), {"ev": "file", "part": 0, "id": "file-1"}),
    (PartCreated(0, "batch_1"), {"ev": "batch", "part": 0, "id": "batch_1"}),
    (
        PartCreated(1, "batch_2", found=True),
        {"ev": "batch", "part": 1, "id": "batch_2", "found": True},
    ),
]


@pytest.mark.parametrize(("fact", "line"), API_FACTS)
def test_the_batch_api_journal_writes_and_reads_its_facts_as_before(
    fact: Any, line: dict[str, Any]
) -> None:
    assert orjson.dumps(encode(fact)) == orjson.dumps(line)
    assert _FACTS.decode(line) == fact


# Kinds added since c798ef4, as they write: `ttc ctl`'s changes (a run's journal and a batch's).
STEERED: list[tuple[Any, dict[str, Any]]] = [
    (
        LimitsSteered("set", 600.0, None, 8),
        {"ev": "control", "action": "set", "rpm": 600.0, "concurrency": 8},
    ),
    (LimitsSteered("set", tpm=90000.0), {"ev": "control", "action": "set", "tpm": 90000.0}),
    (LimitsSteered("pause"), {"ev": "control", "action": "pause"}),
]


@pytest.mark.parametrize(("event", "line"), STEERED)
def test_a_steered_change_writes_its_line_and_reads_back(event: Any, line: dict[str, Any]) -> None:
    assert orjson.dumps(encode(event)) == orjson.dumps(line)
    assert EVENTS.decode(line) == event
    assert BATCH_JOURNAL.decode(line) == event


# Lines of fields born after c798ef4 (a stalled stream's retry), with what they write.
NEWER: list[tuple[Any, dict[str, Any]]] = [
    (
        Retried(2, "q5", 0, 3, "transient", "stalled", 0.5, ("The answer so f",), Usage(40, 4)),
        {
            "ev": "retry",
            "round": 2,
            "item": "q5",
            "k": 0,
            "attempt": 3,
            "error": "transient",
            "message": "stalled",
            "delay": 0.5,
            "partial": ["The answer so f"],
            "est": [40, 4, 0],
        },
    ),
]


@pytest.mark.parametrize(("event", "line"), NEWER)
def test_newer_fields_write_their_lines_and_read_back(event: Any, line: dict[str, Any]) -> None:
    assert orjson.dumps(encode(event)) == orjson.dumps(line)
    assert EVENTS.decode(line) == event


def test_every_registered_kind_is_covered() -> None:
    facts = [*(f for f, _ in API_FACTS), *(e for e, _ in STEERED), *(e for e, _ in NEWER)]
    covered = {type(e) for e in [*RUN_EVENTS, *BATCH_EVENTS, *facts]}
    assert covered == set(_PLANS) - {_Probe}


@pytest.mark.parametrize(
    "case",
    [orjson.loads(raw) for raw in (DATA / "journal_c798ef4_reads.jsonl").read_bytes().splitlines()],
    ids=lambda case: str(case["line"])[:60],
)
def test_lines_of_older_journals_read_as_the_hand_codec_read_them(case: dict[str, Any]) -> None:
    """Absent keys, nulls, numbers as strings, a `difficulty` line with no `ok`: each reads as
    c798ef4 read it (its repr), or fails with the same DataError."""
    try:
        found = repr(decode(case["line"]))
    except DataError as exc:
        found = f"DataError: {exc}"
    assert found == case["reads"]


def test_batch_lines_of_older_journals_read_as_before() -> None:
    start = BATCH_JOURNAL.decode({"ev": "start", "input": "in.jsonl", "input_sha256": None})
    assert start == BatchStarted("in.jsonl", "", 0, False)
    line = {"ev": "start", "input": "i", "input_sha256": "ab", "requests": "3", "resumed": 1}
    assert BATCH_JOURNAL.decode(line) == BatchStarted("i", "ab", 3, True)
    result = {"ev": "result", "i": "2", "final": 1, "out": {"a": 1}}
    assert BATCH_JOURNAL.decode(result) == RequestResult(2, True, 1, {"a": 1})
    with pytest.raises(TypeError, match="'out' is not an object"):
        BATCH_JOURNAL.decode({"ev": "result", "i": 2, "final": True, "out": [1]})


def test_an_unknown_kind_and_a_kind_of_another_journal_are_refused() -> None:
    with pytest.raises(DataError, match=r"here:3: unknown journal event 'result'"):
        decode({"ev": "result", "i": 0}, "here:3")
    with pytest.raises(DataError, match=r"unknown journal event None"):
        decode({"round": 1})
    with pytest.raises(DataError, match=r"b.journal:1: unknown journal event 'sample'"):
        BATCH_JOURNAL.read(orjson.loads(WRITTEN[2]), "b.journal:1")


@event(order=("b", "a"))
@dataclass(frozen=True, slots=True)
class _Probe:
    """A kind of the tests' own: a renamed key, a conversion, omitted defaults, a fresh default."""

    KIND: ClassVar[str] = "probe"
    a: int
    b: tuple[int, ...] = field(
        default=(), metadata=spec(key="bs", enc=list, dec=tuple, omit="empty")
    )
    c: dict[str, int] = field(default_factory=dict, metadata=spec(dec=dict))


def test_a_field_declares_its_key_conversion_and_omission_once() -> None:
    codec = Codec(_Probe)
    assert encode(_Probe(1)) == {"ev": "probe", "a": 1, "c": {}}
    assert list(encode(_Probe(1, (2, 3)))) == ["ev", "bs", "a", "c"]
    assert codec.decode({"ev": "probe", "a": 1, "bs": [2, 3]}) == _Probe(1, (2, 3))
    first, second = codec.decode({"ev": "probe", "a": 1}), codec.decode({"ev": "probe", "a": 1})
    assert first.c == {}
    assert first.c is not second.c  # a default made afresh for each
    with pytest.raises(KeyError, match="'a'"):
        codec.decode({"ev": "probe"})


def test_a_field_of_a_type_the_codec_cannot_read_needs_a_dec() -> None:
    @dataclasses.dataclass(frozen=True)
    class Bad:
        KIND: ClassVar[str] = "bad"
        u: Usage

    with pytest.raises(TypeError, match=r"Bad.u: .* field needs a `dec`"):
        event()(Bad)
