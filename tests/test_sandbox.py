"""The sandbox: hostile programs end in a failed run within their limits and harm nothing."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters import _sandbox
from ttc.adapters._sandbox import SandboxResult, protections, run_python

GUARD = pytest.mark.parametrize("audit_guard", [True, False], ids=["guard", "os-only"])


def run(code: str, stdin: str = "", *, timeout_s: float = 5.0, **kwargs: Any) -> SandboxResult:
    return run_python(code, stdin, timeout_s=timeout_s, **kwargs)


def live_members(pgid: int) -> list[int]:
    """Processes (zombies aside) whose process group is `pgid`."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rfind(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry))
    return members


def wait_until_gone(pgid: int, within_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (members := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return members


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


@pytest.fixture
def server() -> Iterator[socket.socket]:
    """A listening TCP socket on 127.0.0.1; a test checks that nobody connected."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


def assert_no_connection(srv: socket.socket) -> None:
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        return
    conn.close()
    pytest.fail("the sandboxed program reached the test server")


def test_normal_program_passes() -> None:
    result = run("import sys\nprint(sys.stdin.read()[::-1].strip())", "olleh\n")
    assert result.ok
    assert result.stdout == "hello\n"
    assert result.stderr == ""
    assert (result.timed_out, result.killed_reason) == (False, None)
    assert result.wall_s < 5


def test_ordinary_competitive_idioms_work_under_the_guard() -> None:
    deep = (
        "import sys, threading\n"
        "sys.setrecursionlimit(10**6)\n"
        "threading.stack_size(2**26)\n"
        "def depth(n):\n"
        "    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "t = threading.Thread(target=lambda: print(depth(50000)))\n"
        "t.start(); t.join()\n"
        "print(sum(map(int, open(0).read().split())))\n"
        "import tempfile\n"
        "with tempfile.TemporaryFile('w+') as f:\n"
        "    f.write('ok'); f.seek(0); print(f.read())\n"
        "print(len(str(10**5000)))\n"
        "exit(0)\n"
    )
    result = run(deep, "1 2 3\n")
    assert result.ok, result.stderr
    assert result.stdout.split() == ["50000", "6", "ok", "5001"]


def test_prelude_runs_first_in_the_same_namespace() -> None:
    result = run("print(X + 1)", prelude="X = 41\n")
    assert result.ok, result.stderr
    assert result.stdout == "42\n"


def test_large_stdin_and_exit_status() -> None:
    big = "7\n" * 1_000_000
    result = run("import sys\nprint(len(sys.stdin.buffer.read()))\nsys.exit(3)", big)
    assert result.stdout == f"{len(big)}\n"
    assert result.returncode == 3
    assert result.killed_reason is None
    assert not result.ok


def test_scratch_directory_is_fresh_and_removed() -> None:
    code = "import os\nopen('made.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.listdir('.'))"
    first, second = run(code), run(code)
    assert first.ok, first.stderr
    cwd = first.stdout.splitlines()[0]
    assert cwd != second.stdout.splitlines()[0]
    assert "made.txt" in first.stdout
    assert not os.path.exists(cwd)
    assert not os.path.exists(os.path.dirname(cwd))


def test_other_sandboxes_cannot_find_the_scratch_directory() -> None:
    if not protections()["uid_dropped"]:
        pytest.skip("sandboxes run as the calling user here: nothing separates them")
    result = run("import os\nos.listdir(os.path.dirname(os.getcwd()))", audit_guard=False)
    assert "PermissionError" in result.stderr


@GUARD
def test_secrets_in_the_environment_are_invisible(
    monkeypatch: pytest.MonkeyPatch, audit_guard: bool
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    code = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in {os.getppid(), 1}:\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__)\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert result.returncode == 0, result.stderr
    assert "PATH" in result.stdout
    assert "sk-test-secret" not in result.stdout + result.stderr
    assert "OPENAI_API_KEY" not in result.stdout + result.stderr


def test_infinite_loop_times_out_within_its_limit() -> None:
    started = time.monotonic()
    # CPU limit above the wall limit, so the wall clock is what ends it (not a race of the two).
    result = run("while True:\n    pass", timeout_s=1.0, cpu_s=5.0)
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert result.killed_reason == "timeout"
    assert not result.ok
    assert elapsed < 1.0 + 2.0
    assert wait_until_gone(result.pid) == []


def test_cpu_limit_kills_before_the_wall_clock() -> None:
    started = time.monotonic()
    result = run("while True:\n    pass", timeout_s=10.0, cpu_s=1.0)
    assert result.killed_reason == "cpu"
    assert not result.timed_out
    assert time.monotonic() - started < 1.0 + 2.0


@GUARD
def test_fork_bomb_is_bounded_and_leaves_no_process(audit_guard: bool) -> None:
    # It swallows the failures of fork (EAGAIN at RLIMIT_NPROC, or the guard's refusal) and
    # spins until the deadline.
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    started = time.monotonic()
    result = run(bomb, timeout_s=2.0, cpu_s=10.0, audit_guard=audit_guard)
    assert time.monotonic() - started < 2.0 + 2.0
    assert result.killed_reason == "timeout"
    assert wait_until_gone(result.pid) == []


def test_guard_refuses_fork_outright() -> None:
    result = run("import os\nwhile True:\n    os.fork()\n")
    assert result.returncode == 1
    assert "os.fork is not allowed" in result.stderr
    assert wait_until_gone(result.pid) == []


def test_processes_that_leave_the_group_die_with_the_program() -> None:
    if "pid" not in protections()["namespaces"]:
        pytest.skip("no PID namespace here: a setsid escapee is only stopped by the guard")
    marker = f"ttc-escapee-{os.getpid()}-{time.monotonic_ns()}"
    code = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    os.execv(sys.executable,\n"
        f"             [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        "print('parent leaves')\n"
    )
    result = run(code, audit_guard=False)
    assert result.stdout == "parent leaves\n"
    deadline = time.monotonic() + 3
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


@pytest.mark.parametrize(
    "hog",
    ["x = bytearray(8 * 1024**3)", "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))"],
    ids=["at-once", "gradual"],
)
def test_memory_hog_is_stopped(hog: str) -> None:
    started = time.monotonic()
    result = run(hog, memory_mb=256, timeout_s=10.0)
    assert result.killed_reason == "memory", result
    assert not result.ok
    assert time.monotonic() - started < 10.0
    assert bytearray(10**6)  # and this process is fine


@GUARD
def test_writes_outside_the_scratch_directory_fail(tmp_path: Path, audit_guard: bool) -> None:
    target = tmp_path / "escaped.txt"
    code = (
        "import os\n"
        f"target = {str(target)!r}\n"
        "for attempt in (lambda: open(target, 'w').write('x'),\n"
        "                lambda: os.close(os.open(target, os.O_WRONLY | os.O_CREAT)),\n"
        "                lambda: os.symlink('/etc/passwd', target)):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('wrote')\n"
        "    except OSError as exc:\n"
        "        print('refused', exc)\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert result.returncode == 0, result.stderr
    assert "wrote" not in result.stdout
    assert not target.exists()
    assert not target.is_symlink()
    if audit_guard:
        assert "not allowed" in result.stdout


@GUARD
def test_network_connections_never_arrive(server: socket.socket, audit_guard: bool) -> None:
    if not audit_guard and "net" not in protections()["namespaces"]:
        pytest.skip("no network namespace here: only the audit guard blocks the network")
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert result.returncode == 0, result.stderr
    assert "connected" not in result.stdout
    assert "refused" in result.stdout
    assert_no_connection(server)


def test_subprocess_and_ctypes_are_refused() -> None:
    for code in (
        "import subprocess\nsubprocess.run(['id'])",
        "import os\nos.system('id')",
        "import ctypes",
    ):
        result = run(code)
        assert result.returncode != 0
        assert "not allowed" in result.stderr


def test_output_is_capped() -> None:
    started = time.monotonic()
    result = run("while True:\n    print('x' * 1000)", max_output_bytes=100_000, timeout_s=5.0)
    assert result.killed_reason == "output"
    assert result.stdout_truncated
    assert len(result.stdout) == 100_000
    assert time.monotonic() - started < 5.0


def test_protections_report_this_machine() -> None:
    report = protections()
    assert report["audit_guard"]
    assert report["fresh_env"]
    assert report["isolated_python"]
    assert set(report["rlimits"]) == {"CPU", "AS", "NPROC", "FSIZE", "NOFILE", "CORE"}
    if os.geteuid() == 0:
        assert report["uid"] == 65534
        assert report["nproc_enforced"]
    result = run("import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    assert result.ok, result.stderr
    if os.geteuid() == 0:
        assert result.stdout.split() == ["65534", "65534", "[]"]


def test_without_unshare_the_guard_and_uid_drop_still_hold(
    monkeypatch: pytest.MonkeyPatch, server: socket.socket, tmp_path: Path
) -> None:
    setup = _sandbox._make_setup(allow_unshare=False)
    assert setup.wrapper == ()
    assert setup.namespaces == ()
    monkeypatch.setattr(_sandbox, "_setup", lambda: setup)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    port = server.getsockname()[1]
    target = tmp_path / "escaped.txt"
    code = (
        "import os, socket\n"
        "print(os.getuid(), 'sk-' in str(os.environ))\n"
        f"for attempt in (lambda: socket.create_connection(('127.0.0.1', {port}), timeout=2),\n"
        f"                lambda: open({str(target)!r}, 'w'), lambda: os.fork()):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('allowed')\n"
        "    except OSError as exc:\n"
        "        print('refused', exc)\n"
    )
    result = run(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{setup.uid} False"
    assert [line.split()[0] for line in lines[1:]] == ["refused"] * 3
    assert_no_connection(server)
    assert not target.exists()
    looping = run("while True:\n    pass", timeout_s=1.0, cpu_s=5.0)
    assert looping.killed_reason == "timeout"
    assert wait_until_gone(looping.pid) == []
