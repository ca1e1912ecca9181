"""The sandbox where the kernel refuses namespaces (Docker's default seccomp profile; a user
without user namespaces), and what issue 31 found there and beside it: Landlock keeps the files
from the program, a suite with hidden tests refuses a setup that cannot hide them, programs of one
uid cannot starve each other, the guard stops writes that had no "open" check, and the program's
/proc/1/cmdline names no host path.

The fallbacks are forced in-process with `_make_setup(allow_unshare=False)` and the
TTC_SANDBOX_WITHOUT variable, and checked for real once: with unshare(2) refused by a seccomp
filter, as root (Docker's case) and as an unprivileged user.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.sandbox import RunOptions, SandboxResult, _sandbox, protections, run_python
from ttc.adapters.sandbox._landlock import abi as landlock_abi
from ttc.adapters.suites._livecodebench import LiveCodeBenchSuite
from ttc.adapters.suites._mixed import MixedSuite
from ttc.engine import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "data" / "lcb_fixture.jsonl"
GUARD = pytest.mark.parametrize("audit_guard", [True, False], ids=["guard", "os-only"])
NOBODY = 65534


def run(code: str, stdin: str = "", **kwargs: Any) -> SandboxResult:
    return run_python(code, stdin, RunOptions(timeout_s=kwargs.pop("timeout_s", 10.0), **kwargs))


def need_landlock() -> None:
    version, why = landlock_abi()
    if not version:
        pytest.skip(f"no Landlock here: {why}")


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    """A world-readable directory in the host's /tmp, as a user's data often is."""
    path = Path(tempfile.mkdtemp(prefix="ttc-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _use(monkeypatch: pytest.MonkeyPatch, without: str = "") -> dict[str, Any]:
    """Stands in the setup this machine would choose were namespaces (and `without`) refused;
    returns its protections()."""
    monkeypatch.setenv(_sandbox.WITHOUT, without)
    chosen = _sandbox._make_setup(allow_unshare=False)
    monkeypatch.setattr(_sandbox, "_chosen_here", lambda: chosen)
    monkeypatch.setattr(_sandbox, "_setup", lambda: chosen.setup)
    return protections()


# Item 1: a program reads the answers where namespaces are refused.

READER = (
    "import os\n"
    "out = []\n"
    "for attempt in (lambda: open(ANSWERS).read(), lambda: os.listdir(FOLDER),\n"
    "                lambda: open('/etc/passwd').read(), lambda: open(NEW, 'w').write('x')):\n"
    "    try:\n"
    "        out.append(repr(attempt())[:40])\n"
    "    except OSError as exc:\n"
    "        out.append(type(exc).__name__)\n"
    "print(out)\n"
)


@GUARD
def test_landlock_keeps_the_machines_files_from_a_program_without_namespaces(
    monkeypatch: pytest.MonkeyPatch, host_tmp: Path, audit_guard: bool
) -> None:
    need_landlock()
    answers = host_tmp / "answers.jsonl"
    answers.write_text('{"output": "42"}\n')
    answers.chmod(0o644)
    report = _use(monkeypatch)
    assert report["namespaces"] == []
    assert report["file_allow_list"] == f"Landlock ABI {landlock_abi()[0]}"
    assert report["hidden_inputs"] == "unreadable"
    names = (
        f"ANSWERS, FOLDER, NEW = {str(answers)!r}, {str(host_tmp)!r}, {str(host_tmp / 'new')!r}\n"
    )
    result = run(names + READER, audit_guard=audit_guard)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout
        == "['PermissionError', 'PermissionError', 'PermissionError', 'PermissionError']\n"
    )
    assert not (host_tmp / "new").exists()
    # and what a program needs still works: the standard library, its scratch directory
    ok = run(
        "import json, decimal, collections\nopen('f', 'w').write('1')\nprint(open('f').read())"
    )
    assert (ok.returncode, ok.stdout) == (0, "1\n"), ok.stderr


ATTACKER = """
import base64, json, pickle, sys, zlib
data = sys.stdin.read()
for line in open(PROBLEMS):
    record = json.loads(line)
    for field in ("public_test_cases", "private_test_cases"):
        raw = record[field]
        try:
            tests = json.loads(raw)
        except ValueError:
            tests = json.loads(pickle.loads(zlib.decompress(base64.b64decode(raw))))
        for test in tests:
            if test["input"] == data:
                print(test["output"])
                sys.exit(0)
print("not found")
"""


def test_a_program_that_reads_the_problems_file_passes_nothing_without_namespaces(
    monkeypatch: pytest.MonkeyPatch, host_tmp: Path
) -> None:
    # The attack of issue 31: the program finds the problems file and prints the expected
    # outputs. Without namespaces the file is outside Landlock's allow-list.
    need_landlock()
    problems = host_tmp / "problems.jsonl"
    shutil.copy(FIXTURE, problems)
    problems.chmod(0o644)
    _use(monkeypatch)
    suite = LiveCodeBenchSuite(problems, start=None, end=None)
    assert suite.judging is None
    stdin_items = [
        item for item in suite.items() if all(t.testtype == "stdin" for t in item.meta["tests"])
    ]
    assert stdin_items
    program = f"PROBLEMS = {str(problems)!r}\n{ATTACKER}"
    for item in stdin_items:
        verdict = suite.judge(item, program)
        assert verdict.score == 0.0, (item.id, verdict)
        assert "PermissionError" in (verdict.detail or ""), verdict


def test_a_suite_with_hidden_tests_refuses_a_sandbox_that_cannot_hide_them(
    monkeypatch: pytest.MonkeyPatch, host_tmp: Path
) -> None:
    report = _use(monkeypatch, without="landlock")
    assert report["hidden_inputs"] == "not hidden", report
    with pytest.raises(ConfigError) as refused:
        LiveCodeBenchSuite(FIXTURE, start=None, end=None)
    assert "--allow-visible-tests" in str(refused.value)
    assert "cannot keep the test cases from the programs" in str(refused.value)
    allowed = LiveCodeBenchSuite(FIXTURE, start=None, end=None, visible_tests=True)
    assert allowed.judging is not None
    assert allowed.judging["tests_visible_to_programs"] is True
    assert "namespaces" in allowed.judging["why"]
    # a mixed test set says it of its LiveCodeBench source
    mixed = MixedSuite({"livecodebench": allowed}, per_source=1)
    assert mixed.judging == {"livecodebench": allowed.judging}


# Item 1, for real: unshare(2) refused by a seccomp filter, as Docker's default profile does.

REFUSE_UNSHARE = r"""
import ctypes, os, struct, sys
# BPF: unshare, setns, mount -> EPERM; clone with a namespace flag -> EPERM; all else allowed.
def op(code, k, jt=0, jf=0):
    return struct.pack("=HBBI", code, jt, jf, k)
LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
prog = [op(LD, 4), op(JEQ, 0xC000003E, jt=1), op(RET, ALLOW), op(LD, 0)]
for nr in (272, 308, 165):  # unshare, setns, mount
    prog += [op(JEQ, nr, jf=1), op(RET, EPERM)]
prog += [op(JEQ, 56, jf=3), op(LD, 16), op(JSET, 0x7E020000, jf=1), op(RET, EPERM)]
prog += [op(RET, ALLOW)]
code = b"".join(prog)
buf = ctypes.create_string_buffer(code)
fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
pbuf = ctypes.create_string_buffer(fprog)
assert libc.prctl(22, 2, ctypes.c_void_p(ctypes.addressof(pbuf)), 0, 0) == 0, ctypes.get_errno()
os.execv(sys.argv[1], sys.argv[1:])
"""

PROBE = """
import json, subprocess, sys
unshare = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
report = S.protections()
program = (
    "out = []\\n"
    "for path in (ANSWERS, '/etc/passwd'):\\n"
    "    try:\\n"
    "        out.append(len(open(path).read()))\\n"
    "    except OSError as exc:\\n"
    "        out.append(type(exc).__name__)\\n"
    "print(out)\\n"
)
code = "ANSWERS = " + repr(sys.argv[1]) + "\\n" + program
result = S.run_python(code, "", P.RunOptions(timeout_s=20, audit_guard=False))
run = [result.returncode, result.stdout, result.stderr]
print(json.dumps({"unshare": unshare.returncode, "report": report, "run": run}))
"""


def _refused_unshare(uid: int | None, answers: Path) -> dict[str, Any]:
    """protections() and a run reading `answers`, in a process whose unshare(2) is refused by a
    seccomp filter (as `uid` via setpriv, else as root)."""
    python = "/usr/bin/python3"
    if os.uname().machine != "x86_64" or not os.access(python, os.X_OK):
        pytest.skip("the refusing filter is written for x86_64, with /usr/bin/python3")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    package = os.path.dirname(_sandbox.__file__)
    prologue = (
        "import importlib, importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('sb', {package + '/__init__.py'!r},\n"
        f"    submodule_search_locations=[{package!r}])\n"
        "P = importlib.util.module_from_spec(spec)\n"
        "sys.modules['sb'] = P\n"
        "spec.loader.exec_module(P)\n"
        "S = importlib.import_module('sb._sandbox')\n"
    )
    argv = [python, "-c", REFUSE_UNSHARE, python, "-c", prologue + PROBE, str(answers)]
    if uid is not None:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return outcome


@pytest.mark.parametrize("uid", [None, 54321], ids=["root", "unprivileged"])
def test_where_unshare_is_refused_for_real_landlock_hides_the_files(
    host_tmp: Path, uid: int | None
) -> None:
    need_landlock()
    answers = host_tmp / "answers.jsonl"
    answers.write_text("the expected outputs\n")
    answers.chmod(0o644)
    outcome = _refused_unshare(uid, answers)
    assert outcome["unshare"] != 0  # the filter does refuse namespaces
    report = outcome["report"]
    assert report["namespaces"] == [], report
    assert "Operation not permitted" in report["missing"]["namespaces"], report["missing"]
    assert report["file_allow_list"] == f"Landlock ABI {landlock_abi()[0]}"
    assert report["hidden_inputs"] == "unreadable"
    returncode, stdout, stderr = outcome["run"]
    assert returncode == 0, stderr
    assert stdout == "['PermissionError', 'PermissionError']\n"


# Item 13: programs of one uid starved each other through RLIMIT_NPROC.


def _threaded(mark: int) -> str:
    """The threaded program, marked by blocking real-time signal `mark` beside SIGUSR2: its
    SigBlk tells it from every other process of its uid, this test's others run beside it by
    the other worker included."""
    return (
        "import signal, threading\n"
        "# SIGUSR2 and the mark pick it out for the test: sigwait unblocks SIGUSR1 while it waits\n"
        f"signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1, signal.SIGUSR2, {mark}}})\n"
        "signal.sigwait({signal.SIGUSR1})  # until the other program has taken its threads\n"
        "done = []\n"
        "threads = [threading.Thread(target=done.append, args=(n,)) for n in range(40)]\n"
        "for t in threads:\n"
        "    t.start()\n"
        "for t in threads:\n"
        "    t.join()\n"
        "print(len(done))\n"
    )


def _mark(case: str) -> int:
    """A real-time signal of this test's own: one per pytest worker and case, so no two runs of
    the test at once share it."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    return int(signal.SIGRTMIN) + (3 * worker + ("", "namespaces", "cgroup").index(case)) % 30


HOG = (
    "import threading, sys\n"
    "stop = threading.Event()\n"
    "for _ in range(150):\n"
    "    threading.Thread(target=stop.wait, daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)
_SIGUSR2 = 1 << (signal.SIGUSR2 - 1)


def _waiting_for_sigusr1(uid: int, mark: int) -> list[int]:
    """Processes of `uid` that block SIGUSR2 and `mark` and nothing else (the threaded program,
    in its sigwait, which unblocks SIGUSR1 while it waits). Not any that blocks SIGUSR2: a
    process between fork and exec blocks every signal, and the program of this test's other
    case, run beside it by the other worker, blocks SIGUSR2 too; either, taken for the program,
    was released in its place (seen in full CI runs: the program killed at its timeout, -9, or
    "ended before it was released")."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid and (
            int(fields.get("SigBlk", "0"), 16) == _SIGUSR2 | 1 << (mark - 1)
        ):
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    "without",
    [
        "",
        "namespaces",
        "cgroup",
    ],
)
def test_a_threaded_program_is_not_starved_by_another_of_its_uid(
    monkeypatch: pytest.MonkeyPatch, without: str
) -> None:
    # The other program (here a process of uid nobody beside the sandbox, as another program
    # would be) takes 150 threads after this one started: RLIMIT_NPROC, counted per uid, left
    # the first none. A pids cgroup per run, or (without cgroups, as root) a uid per ttc
    # process, keeps them apart.
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the other program as nobody")
    if without == "namespaces":
        _use(monkeypatch)
    elif without:
        monkeypatch.setenv(_sandbox.WITHOUT, without)
        chosen = _sandbox._make_setup()
        monkeypatch.setattr(_sandbox, "_chosen_here", lambda: chosen)
        monkeypatch.setattr(_sandbox, "_setup", lambda: chosen.setup)
    uid = protections()["uid"]
    outcome: list[SandboxResult] = []
    mark = _mark(without)
    program = _threaded(mark)
    runner = threading.Thread(target=lambda: outcome.append(run(program, timeout_s=120.0)))
    runner.start()
    hog = None
    try:
        deadline = time.monotonic() + 60
        while not (waiting := _waiting_for_sigusr1(uid, mark)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waiting, "the threaded program never started"
        hog = subprocess.Popen(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "/usr/bin/python3", "-c", HOG],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert hog.stdout is not None
        assert hog.stdout.readline() == "ready\n"
        released = 0
        for pid in waiting:  # a process of the same uid may have ended meanwhile (another test's)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
                released += 1
        assert released, "the threaded program ended before it was released"
        runner.join(timeout=150)
    finally:
        if hog is not None:
            hog.kill()
            hog.communicate()
        runner.join()
    (result,) = outcome
    said = f"{result.killed_reason} after {result.wall_s:.1f} s: {result.stderr[-500:]}"
    assert (result.returncode, result.stdout) == (0, "40\n"), said


# Item 14: the sandbox saw host paths in /proc/1/cmdline.


def test_proc_cmdline_names_no_host_path(host_tmp: Path) -> None:
    if not protections()["private_root"]:
        pytest.skip(f"no PID namespace here: {protections()['missing']}")
    hidden = host_tmp / "private-answers"
    hidden.mkdir()
    code = (
        "import os\n"
        "print(repr(open('/proc/1/cmdline', 'rb').read()))\n"
        "print(repr(open('/proc/self/cmdline', 'rb').read()))\n"
        "print(os.getpid())\n"
    )
    result = run(code, hide=(str(hidden),))
    assert result.returncode == 0, result.stderr
    first, own, pid = result.stdout.splitlines()
    assert pid == "1"
    assert first == own
    cmdline = ast.literal_eval(first)
    assert b"/" not in cmdline, cmdline
    for host_path in (str(hidden), "/sys/fs/cgroup", protections()["python"]):
        assert host_path.encode() not in cmdline


# Item 6: writes that the guard let out, in a setup without a private root (or Landlock).

WRITERS = {
    "readline": "import readline\nreadline.write_history_file(TARGET)\n",
    "ssl keylog": (
        "import ssl\nctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\nctx.keylog_filename = TARGET\n"
    ),
    "tcl": (
        "import _tkinter\n"
        "tcl = _tkinter.create(None, 'x', 'Tk', False, True, False, False, None)\n"
        "tcl.call('close', tcl.call('open', TARGET, 'w'))\n"
    ),
    # the general rule: any "open" event whose mode writes, whatever raised it
    "any open event": "import sys\nsys.audit('open', TARGET, 'a', 0)\n",
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_the_guard_stops_writes_that_have_no_open_check(
    monkeypatch: pytest.MonkeyPatch, host_tmp: Path, writer: str
) -> None:
    _use(monkeypatch, without="landlock")  # the guard alone stands between it and the disk
    target = host_tmp / "written"
    host_tmp.chmod(0o777)  # writable by the program's uid: only the guard refuses
    code = f"TARGET = {str(target)!r}\n" + WRITERS[writer] + "print('unchecked')\n"
    result = run(code)
    assert not target.exists(), (writer, result.stdout, result.stderr)
    assert "unchecked" not in result.stdout
    assert result.returncode != 0
    assert "sandbox:" in result.stderr, result.stderr[-300:]
    assert "not allowed" in result.stderr, result.stderr[-300:]


@pytest.mark.slow
def test_ttc_run_refuses_or_records_judging_that_cannot_hide_the_tests(tmp_path: Path) -> None:
    ttc = str(Path(sys.executable).with_name("ttc"))
    env = {
        **os.environ,
        _sandbox.WITHOUT: "namespaces,landlock",
        "TTC_CACHE_DIR": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    args = ["run", "--suite", "livecodebench", "--data", str(FIXTURE), "--lcb-start",
            "2000-01-01", "--lcb-end", "2100-01-01", "--limit", "2", "--rounds", "1",
            "--embedder", "lexical", "--workers", "1"]  # fmt: skip

    def ttc_run(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ttc, *args, *more], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip

    refused = ttc_run("--out", str(tmp_path / "refused"))
    assert refused.returncode == 2, refused.stderr
    assert "--allow-visible-tests" in refused.stderr
    assert not (tmp_path / "refused" / "summary.json").exists()
    allowed = ttc_run("--out", str(tmp_path / "allowed"), "--allow-visible-tests")
    assert allowed.returncode == 0, allowed.stderr
    summary = json.loads((tmp_path / "allowed" / "summary.json").read_text())
    assert summary["judging"]["tests_visible_to_programs"] is True
    assert "TTC_SANDBOX_WITHOUT" in summary["judging"]["why"]
