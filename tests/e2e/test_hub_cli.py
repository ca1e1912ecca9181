"""The Hugging Face Hub as a user meets it, through `ttc` and `benchmarks/paper.py`, offline: with
the Hub off and an empty cache, a suite given no --data is one line naming the dataset and what
to give instead; a gated dataset (a fake Hub answering as huggingface.co does) is one line naming
HF_TOKEN and the page where its terms are accepted; LiveCodeBench's release files come from a
fake Hub, the run records the dataset and commit it read, and resumes from the cache, offline.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from ttc.adapters.suites import LCB_REPO, LiveCodeBenchSuite
from ttc.engine.journal import items_sha256

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "lcb_fixture.jsonl"
SHA = "0123456789abcdef0123456789abcdef01234567"
RUN = ["--embedder", "lexical", "--workers", "1", "--rounds", "1", "--no-live"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a command with its own empty Hugging Face cache and response cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env |= {"HF_HOME": str(tmp_path / "hf"), "TTC_CACHE_DIR": str(tmp_path / "ttc-cache")}
    # An empty data directory: the suites' questions are nowhere on this machine.
    env |= {"TTC_DATA_DIR": str(tmp_path / "no-data")}
    return env | extra


def _ttc(
    tmp_path: Path, *args: str, hub: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    # --hub: these commands mean the Hub (nothing is downloaded without it).
    command = [sys.executable, "-m", "ttc.engine.cli", *args, *(["--hub"] if hub else [])]
    return subprocess.run(command, cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def _one_line(proc: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(prefix), line
    return line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "suite", "repo"),
    [
        ("run", "math500", "HuggingFaceH4/MATH-500"),
        ("run", "minerva", "svc-huggingface/minerva-math"),
        ("run", "livecodebench", LCB_REPO),
        ("verify", "math500", "HuggingFaceH4/MATH-500"),
    ],
)
def test_offline_with_no_data_is_one_line_naming_the_dataset(
    tmp_path: Path, command: str, suite: str, repo: str
) -> None:
    args = ["--out", str(tmp_path / "out")] if command == "run" else ["--responses", "r.jsonl"]
    (tmp_path / "r.jsonl").write_text('{"id": "x", "response": "y"}\n')
    proc = _ttc(tmp_path, command, "--suite", suite, *args, HF_HUB_OFFLINE="1")
    line = _one_line(proc, "ttc: error: --data: ")
    assert f"the {suite} questions were to come from the Hugging Face Hub ({repo})" in line
    assert "offline mode is on (HF_HUB_OFFLINE" in line
    assert line.endswith("give --data FILE with a local copy")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_offline_gpqa_names_the_token_and_the_terms(tmp_path: Path) -> None:
    proc = _ttc(tmp_path, "run", "--suite", "gpqa", "--out", "out", HF_HUB_OFFLINE="1")
    line = _one_line(proc, "ttc: error: --data: the gpqa questions")
    assert "(Idavidrein/gpqa)" in line
    assert "give --data FILE with a local copy (online, the dataset is gated" in line
    assert "https://huggingface.co/datasets/Idavidrein/gpqa" in line
    assert "HF_TOKEN" in line


@dataclass
class FakeHub:
    """A Hub holding dataset files at commit SHA, or refusing them all as a gated repository."""

    files: dict[str, bytes] = field(default_factory=dict)
    gated: bool = False
    seen: list[str] = field(default_factory=list)

    def answer(self, handler: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        path = handler.path.split("?")[0]
        self.seen.append(f"{handler.command} {path}")
        if path.startswith("/api/datasets/"):
            repo = "/".join(path.split("/")[3:5])
            self._send(handler, 200, orjson.dumps({"id": repo, "sha": SHA}), {}, body)
        elif "/resolve/" in path and self.gated:
            headers = {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access is restricted."}
            self._send(handler, 401, b"{}", headers, body)
        elif "/resolve/" in path and path.rsplit("/", 1)[1] in self.files:
            data = self.files[path.rsplit("/", 1)[1]]
            etag = hashlib.sha256(data).hexdigest()
            self._send(handler, 200, data, {"ETag": f'"{etag}"', "X-Repo-Commit": SHA}, body)
        else:
            self._send(handler, 404, b"{}", {"X-Error-Code": "EntryNotFound"}, body)

    @staticmethod
    def _send(
        handler: http.server.BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        headers: dict[str, str],
        body: bool,
    ) -> None:
        handler.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(data))}.items():
            handler.send_header(name, value)
        handler.end_headers()
        if body:
            handler.wfile.write(data)


@pytest.fixture
def fake_hub() -> Iterator[tuple[FakeHub, str]]:
    """A fake Hub on a loopback port, and its URL (for HF_ENDPOINT)."""
    hub = FakeHub()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hub.answer(self, body=True)

        def do_HEAD(self) -> None:
            hub.answer(self, body=False)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_a_gated_dataset_is_one_line_naming_the_token_and_the_terms(
    tmp_path: Path, fake_hub: tuple[FakeHub, str]
) -> None:
    hub, url = fake_hub
    hub.gated = True
    proc = _ttc(tmp_path, "run", "--suite", "gpqa", "--out", "out", HF_ENDPOINT=url)
    line = _one_line(proc, "ttc: error: --data: the gpqa questions")
    assert (
        "but it is gated: accept its terms at https://huggingface.co/datasets/Idavidrein/gpqa"
        in line
    )
    assert "set HF_TOKEN to an access token of that account; or give --data FILE" in line
    assert any("/resolve/" in s for s in hub.seen)  # it asked the Hub, which refused


@pytest.mark.slow
def test_livecodebench_from_the_hub_records_its_source_and_resumes_offline(
    tmp_path: Path, fake_hub: tuple[FakeHub, str]
) -> None:
    hub, url = fake_hub
    # The paper's window meets release files 5 and 6: the fixture, and an empty file.
    hub.files = {"test5.jsonl": FIXTURE.read_bytes(), "test6.jsonl": b""}
    out = tmp_path / "out"
    proc = _ttc(tmp_path, "run", "--suite", "livecodebench", "--out", str(out), *RUN,
                HF_ENDPOINT=url)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = orjson.loads((out / "config.json").read_bytes())
    assert config["invocation"]["data"] == {
        "hub": LCB_REPO, "revision": SHA, "files": ["test5.jsonl", "test6.jsonl"]
    }  # fmt: skip
    expected = LiveCodeBenchSuite(FIXTURE).items()  # the fixture's problems in the window
    assert [i.id for i in expected] == ["lcb_sum_pairs", "lcb_mean", "lcb_max_subarray",
                                        "lcb_rotate", "lcb_palindromes"]  # fmt: skip
    assert (config["items"], config["items_sha256"]) == (5, items_sha256(expected))
    assert f"GET /datasets/{LCB_REPO}/resolve/main/test5.jsonl" in hub.seen
    # Offline, from the cache: the same questions, so the run goes on.
    hub.files, seen = {}, list(hub.seen)
    again = _ttc(tmp_path, "run", "--suite", "livecodebench", "--out", str(out), *RUN,
                 "--resume", HF_HUB_OFFLINE="1")  # fmt: skip
    assert again.returncode == 0, again.stderr
    config = orjson.loads((out / "config.json").read_bytes())
    assert config["invocation"]["data"] == {
        "hub": LCB_REPO, "revision": SHA, "files": ["test5.jsonl", "test6.jsonl"]
    }  # fmt: skip
    assert config["items_sha256"] == items_sha256(expected)
    assert hub.seen == seen  # nothing asked of the Hub


def _paper(
    tmp_path: Path, *args: str, hub: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "benchmarks" / "paper.py"), "--out",
               str(tmp_path / "grid"), "--methods", "elim", "--seeds", "0", "--rounds", "1",
               "--embedder", "lexical", "--workers", "1", *args,
               *(["--hub"] if hub else [])]  # fmt: skip
    return subprocess.run(command, cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.slow
def test_paper_with_no_data_dir_file_and_no_hub_names_what_to_give(tmp_path: Path) -> None:
    proc = _paper(tmp_path, "--suites", "math500", "--data-dir", str(tmp_path / "none"),
                  HF_HUB_OFFLINE="1")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("paper: error: --data-dir: the math500 questions were to come from ")
    assert "(HuggingFaceH4/MATH-500)" in line
    assert line.endswith(
        f"give --data-dir DIR holding math500/test.jsonl ({tmp_path}/none/math500/test.jsonl is "
        "not there)"
    )


@pytest.mark.slow
def test_paper_livecodebench_off_the_hub_is_the_fixture_with_sim_only(tmp_path: Path) -> None:
    proc = _paper(tmp_path, "--suites", "livecodebench", "--limit", "2", HF_HUB_OFFLINE="1")
    assert proc.returncode == 0, proc.stderr
    assert "note: livecodebench: the Hub's copy is out of reach (offline mode" in proc.stderr
    line = orjson.loads(proc.stdout.splitlines()[-1])
    assert line["data"] == {"livecodebench": str(FIXTURE)}
    real = _paper(tmp_path, "--suites", "livecodebench", "--provider", "openai", "--model", "m",
                  "--out", str(tmp_path / "real"), HF_HUB_OFFLINE="1")  # fmt: skip
    assert real.returncode == 2, real.stderr
    [error] = real.stderr.strip().splitlines()
    assert error.startswith("paper: error: --lcb-data: the livecodebench questions were to come")
    assert error.endswith("give --lcb-data FILE (code_generation_lite JSONL)")


# ── offline means offline: no --hub, no download ─────────────────────────────────────────────


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["math500", "livecodebench"])
def test_without_hub_a_suite_with_no_local_file_is_one_line_saying_where_it_looked(
    tmp_path: Path, suite: str
) -> None:
    # The Hub reachable as far as the environment says: nothing but --hub lets it be asked.
    proc = _ttc(tmp_path, "run", "--suite", suite, "--out", "out", hub=False)
    line = _one_line(proc, f"ttc: error: --suite {suite}: no local copy of its questions: ")
    if suite == "math500":
        assert f"{tmp_path / 'no-data' / 'math500' / 'test.jsonl'} is not there" in line
    assert "$TTC_DATA_DIR, else ../shared/data beside the project" in line or suite != "math500"
    assert line.endswith("give --data FILE, or --hub to read the Hugging Face Hub's copy")
    assert not (tmp_path / "hf").exists()  # no Hub client was as much as set up


@pytest.mark.slow
def test_without_hub_the_data_directory_serves_run_and_paper_alike(tmp_path: Path) -> None:
    data = tmp_path / "data" / "math500"
    data.mkdir(parents=True)
    rows = [{"problem": f"What is {i}+1?", "solution": f"\\boxed{{{i + 1}}}",
             "answer": str(i + 1), "subject": "Algebra", "level": 1,
             "unique_id": f"test/algebra/{i}.json"} for i in range(3)]  # fmt: skip
    (data / "test.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    env = {"TTC_DATA_DIR": str(tmp_path / "data")}
    run = _ttc(tmp_path, "run", "--suite", "math500", "--out", "out", *RUN, hub=False, **env)
    assert run.returncode == 0, run.stderr
    config = orjson.loads((tmp_path / "out" / "config.json").read_bytes())
    assert str(data / "test.jsonl") in str(config["invocation"]["data"])
    paper = _paper(tmp_path, "--suites", "math500", hub=False, **env)
    assert paper.returncode == 0, paper.stderr
    assert orjson.loads(paper.stdout.splitlines()[-1])["data"] == {
        "math500": str(data / "test.jsonl")
    }


@pytest.mark.slow
def test_paper_livecodebench_without_hub_is_the_fixture_never_asking_the_hub(
    tmp_path: Path,
) -> None:
    # The Hub is reachable (no offline flag): the built-in copy is used without asking it.
    proc = _paper(tmp_path, "--suites", "livecodebench", "--limit", "2", hub=False,
                  HF_ENDPOINT="http://127.0.0.1:9")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "note: livecodebench: no --lcb-data and no --hub, so " in proc.stderr
    assert orjson.loads(proc.stdout.splitlines()[-1])["data"] == {"livecodebench": str(FIXTURE)}
    assert not (tmp_path / "hf").exists()
