"""The typed journal: every event kind reads back from the lines written before it was typed, and
writes the very same bytes; replay returns typed records; a bad line names its file and line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ttc.engine import (
    DataError,
    DifficultyRated,
    Judged,
    Rated,
    Retried,
    RoundEnded,
    RunStarted,
    SampleFailed,
    SampleLanded,
    StopKind,
    StopReason,
    Usage,
    Verdict,
)
from ttc.engine.cli import EXIT_BUDGET, EXIT_INTERRUPTED, EXIT_PROVIDER
from ttc.engine.journal import Replay, completed_samples, decode, encode, read_events
from ttc.engine.journal._journal import difficulty_ratings

# Lines exactly as the dict-literal journal wrote them (field names and order), one per kind.
LINES = [
    b'{"ev":"start","resumed":false,"t":1700000000.123}',
    b'{"ev":"sample","round":1,"item":"q0","k":0,"attempts":2,"demos":["q3","q4"],'
    b'"temperature":0.7,"ok":true,"text":"\\\\boxed{4}","usage":[12,30,5],"latency":0.0123}',
    b'{"ev":"sample","round":1,"item":"q1","k":0,"attempts":1,"demos":[],"ok":true,'
    b'"text":"x","usage":[1,2,0],"latency":0.5}',
    b'{"ev":"sample","round":1,"item":"q2","k":1,"attempts":6,"demos":[],"ok":false,'
    b'"error":"rate_limited","message":"HTTP 429"}',
    b'{"ev":"judge","round":1,"item":"q0","k":0,"ok":true,"reward":0.8,"text":"Score: 8",'
    b'"usage":[40,3,0]}',
    b'{"ev":"judge","round":1,"item":"q1","k":0,"ok":false,"error":"fatal: HTTP 401"}',
    b'{"ev":"verdict","round":1,"item":"q0","k":0,"score":1.0,"answer":"4","correct":true,'
    b'"passed":true,"reward":0.8}',
    b'{"ev":"verdict","round":1,"item":"q1","k":0,"score":0.0,"answer":null,"correct":false,'
    b'"passed":false,"flipped":true}',
    b'{"ev":"difficulty","item":"q0","ok":true,"rating":7.0,"text":"Difficulty: 7",'
    b'"usage":[50,4,0]}',
    b'{"ev":"difficulty","item":"q1","ok":true,"rating":null,"text":"hard","usage":[50,1,0]}',
    b'{"ev":"difficulty","item":"q2","ok":false,"error":"transient: HTTP 503"}',
    b'{"ev":"retry","round":1,"item":"q2","k":1,"attempt":1,"error":"rate_limited",'
    b'"message":"HTTP 429","delay":0.25}',
    b'{"ev":"round","round":1,"active":3,"requests":4,"solved":1,"coverage":0.3333333333333333,'
    b'"errors":1,"retries":5,"wall_s":1.234}',
]


@pytest.mark.parametrize("line", LINES)
def test_each_event_reads_back_and_writes_the_same_bytes(line: bytes) -> None:
    event = decode(orjson.loads(line), "journal.jsonl:1")
    assert orjson.dumps(encode(event)) == line


def test_lines_decode_to_their_typed_events() -> None:
    events = [decode(orjson.loads(line)) for line in LINES]
    assert events[0] == RunStarted(resumed=False, t=1700000000.123)
    assert events[1] == SampleLanded(
        1, "q0", 0, "\\boxed{4}", Usage(12, 30, 5), 2, ("q3", "q4"), 0.7, 0.0123
    )
    assert events[3] == SampleFailed(1, "q2", 1, "rate_limited", "HTTP 429", 6)
    assert events[4] == Rated(1, "q0", 0, 0.8, "Score: 8", Usage(40, 3, 0))
    assert events[5] == Rated(1, "q1", 0, error="fatal: HTTP 401")
    assert events[7] == Judged(1, "q1", 0, 0.0, None, False, False, None, True)
    assert events[9] == DifficultyRated("q1", None, "hard", Usage(50, 1, 0))
    assert events[10] == DifficultyRated("q2", error="transient: HTTP 503")
    assert events[11] == Retried(1, "q2", 1, 1, "rate_limited", "HTTP 429", 0.25)
    assert events[12] == RoundEnded(1, 3, 4, 1, 1 / 3, 1, 5, 1.234)


def _journal(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_replay_returns_typed_records_of_the_samples_with_a_response(tmp_path: Path) -> None:
    done = completed_samples(_journal(tmp_path, LINES))
    assert set(done) == {(1, "q0", 0), (1, "q1", 0)}  # q2 failed: sent again on resume
    q0, q1 = done[(1, "q0", 0)], done[(1, "q1", 0)]
    assert isinstance(q0, Replay)
    assert q0.sample.text == "\\boxed{4}"
    assert q0.verdict == Verdict(1.0, "4")
    assert q0.rating == Rated(1, "q0", 0, 0.8, "Score: 8", Usage(40, 3, 0))
    assert q1.verdict == Verdict(0.0, None)
    assert q1.rating is not None
    assert q1.rating.error == "fatal: HTTP 401"
    ratings = difficulty_ratings(tmp_path / "journal.jsonl")
    assert ratings["q0"].rating == 7.0
    assert not ratings["q2"].ok


def test_a_sample_not_yet_judged_replays_without_a_verdict(tmp_path: Path) -> None:
    done = completed_samples(_journal(tmp_path, LINES[1:2]))
    assert done[(1, "q0", 0)] == Replay(decode(orjson.loads(LINES[1])))  # type: ignore[arg-type]


def test_a_line_lacking_a_field_names_the_file_and_line(tmp_path: Path) -> None:
    bad = b'{"ev":"sample","round":1,"item":"q0","k":0,"ok":true,"usage":[1,2,3]}'
    path = _journal(tmp_path, [LINES[0], bad])
    with pytest.raises(DataError, match=r"journal.jsonl:2: sample event lacks a valid 'text'"):
        completed_samples(path)
    path = _journal(tmp_path, [LINES[0], b'{"ev":"verdict","round":1,"item":"q0","k":0}'])
    with pytest.raises(DataError, match=r"journal.jsonl:2: verdict event lacks a valid 'score'"):
        list(read_events(path))


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b"{garbage", "malformed JSON ("),
        (b'{"ev": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deep"),
        (b'{"ev":"sample","text":"caf\xe9"}', "not UTF-8 text"),
        (b'["ev"]', "expected a JSON object, got list"),
        (b'{"round": 1}', "journal line has no 'ev' field"),
        (
            b'{"ev":"sample","round":1,"item":"q0","k":0,"ok":true,"text":"x","usage":5}',
            "wrong kind",
        ),
    ],
)
def test_a_corrupt_line_is_one_error_naming_the_file_and_line(
    tmp_path: Path, line: bytes, what: str
) -> None:
    path = _journal(tmp_path, [LINES[0], LINES[1], line, LINES[2]])
    with pytest.raises(DataError) as caught:
        completed_samples(path)
    assert str(caught.value).startswith(f"{path}:3: ")
    assert what in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_torn_last_line_is_not_read(tmp_path: Path) -> None:
    path = _journal(tmp_path, LINES[:2])
    with path.open("ab") as fh:
        fh.write(LINES[2][:20])  # a write cut short by a kill: no newline
    assert list(completed_samples(path)) == [(1, "q0", 0)]


def test_a_stop_reason_carries_the_exit_code_of_ttc() -> None:
    assert StopReason.budget("--max-cost $1 reached").exit_code == EXIT_BUDGET
    assert StopReason.provider("HTTP 401").exit_code == EXIT_PROVIDER
    assert StopReason.interrupted().exit_code == EXIT_INTERRUPTED
    assert StopKind.PROVIDER.exit_code == EXIT_PROVIDER
    # summary.json's `stopped` is the message, as before the reason was typed.
    assert str(StopReason.provider("HTTP 401")) == "the provider refuses: HTTP 401"
