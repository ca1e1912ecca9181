"""The sandbox: hostile programs end in a failed run within their limits and harm nothing."""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ttc.adapters.sandbox import (
    RunOptions,
    SandboxResult,
    _boot,
    _remove,
    _sandbox,
    protections,
    run_python,
)
from ttc.adapters.sandbox._proc import owner_tag

GUARD = pytest.mark.parametrize("audit_guard", [True, False], ids=["guard", "os-only"])


def run(code: str, stdin: str = "", *, timeout_s: float = 5.0, **kwargs: Any) -> SandboxResult:
    return run_python(code, stdin, RunOptions(timeout_s=timeout_s, **kwargs))


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
    code = "import os\nprint(sorted(os.listdir('.')))\nopen('made.txt', 'w').write('x')"
    before = set(os.listdir(tempfile.gettempdir()))
    first, second = run(code), run(code)
    assert first.ok, first.stderr
    assert first.stdout == second.stdout == "['main.py']\n"
    after = set(os.listdir(tempfile.gettempdir())) - before
    # This process's scratch directories only: another test worker's sandboxes may be running.
    assert [name for name in after if name.startswith(owner_tag())] == []


def test_other_sandboxes_cannot_find_the_scratch_directory() -> None:
    if not protections()["uid_dropped"]:
        pytest.skip("sandboxes run as the calling user here: nothing separates them")
    if protections()["private_root"]:
        pytest.skip("each scratch directory is a tmpfs in its own mount namespace here")
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


@GUARD
def test_a_setsid_program_dies_at_its_deadline(audit_guard: bool) -> None:
    # The program leaves its process group; after the run nothing of it, nor of its uid, is left.
    marker = f"/nonexistent/ttc-escapee-{secrets.token_hex(8)}"  # on the boot's command line
    code = "import os, time\nos.setsid()\nprint('alone', flush=True)\ntime.sleep(90)\n"
    result = run(code, timeout_s=1.0, audit_guard=audit_guard, hide=(marker,))
    assert result.stdout == "alone\n"
    assert result.killed_reason == "timeout"
    assert processes_with(marker) == []
    assert wait_until_gone(result.pid) == []


@GUARD
def test_the_kernel_refuses_exec_fork_and_sockets(audit_guard: bool) -> None:
    if not protections()["seccomp"]:
        pytest.skip(f"no seccomp here: {protections()['missing'].get('seccomp')}")
    assert protections()["seccomp_status"] == "2"
    code = (
        "import os, socket, threading\n"
        "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])\n"
        "for attempt in (lambda: os.execv('/bin/sh', ['sh', '-c', 'echo escaped']),\n"
        "                lambda: os.fork(), lambda: socket.socket(socket.AF_UNIX),\n"
        "                lambda: socket.socket(socket.AF_INET), lambda: os.memfd_create('x')):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('allowed')\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(6 * 7))\n"
        "t.start(); t.join(); print(out[0])\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2"
    assert lines[1:6] == ["refused PermissionError"] * 5, lines
    assert lines[6] == "42"


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
@pytest.mark.parametrize("where", ["host-tmp", "etc"])
def test_writes_outside_the_scratch_directory_fail(
    tmp_path: Path, audit_guard: bool, where: str
) -> None:
    # /etc is there in a private root, the host's /tmp is not (/tmp is the scratch tmpfs)
    name = f"ttc-escaped-{secrets.token_hex(8)}"
    target = tmp_path / name if where == "host-tmp" else Path("/etc") / name
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
    if audit_guard and where == "etc":
        assert "not allowed" in result.stdout


@GUARD
def test_network_connections_never_arrive(tcp_listener: socket.socket, audit_guard: bool) -> None:
    if not audit_guard and "net" not in protections()["namespaces"]:
        pytest.skip("no network namespace here: only the audit guard blocks the network")
    port = tcp_listener.getsockname()[1]
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
    assert_no_connection(tcp_listener)


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
    # RLIMIT_NPROC counts the whole uid's processes: a pids cgroup of the run's own replaces it
    nproc = set() if "pids" in report["cgroup_limits"] else {"NPROC"}
    assert set(report["rlimits"]) == {"CPU", "AS", "FSIZE", "NOFILE", "CORE"} | nproc
    assert report["uid_dropped"] == (report["uid"] != os.geteuid())
    if os.geteuid() == 0 and shutil.which("unshare"):
        # as root with util-linux and seccomp, as here and in CI, every layer is on
        assert report["private_root"], report["missing"]
        assert report["seccomp"], report["missing"]
        assert report["seccomp_status"] == "2"
    for layer, why in report["missing"].items():
        assert layer in (
            "namespaces",
            "private root",
            "seccomp",
            "cgroup",
            "cgroup memory",
            "cgroup pids",
        )
        assert why
    if os.geteuid() == 0:
        assert report["uid"] == 65534
        assert report["nproc_enforced"]
    result = run("import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    assert result.ok, result.stderr
    if os.geteuid() == 0:
        assert result.stdout.split() == ["65534", "65534", "[]"]


def test_without_unshare_the_guard_and_uid_drop_still_hold(
    monkeypatch: pytest.MonkeyPatch, tcp_listener: socket.socket, tmp_path: Path
) -> None:
    setup = _sandbox._make_setup(allow_unshare=False).setup
    assert setup.wrapper == ()
    assert setup.namespaces == ()
    monkeypatch.setattr(_sandbox, "_setup", lambda: setup)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    port = tcp_listener.getsockname()[1]
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
    assert [line.split()[0] for line in lines[1:]] == ["refused"] * 3, lines
    assert_no_connection(tcp_listener)
    assert not target.exists()
    looping = run("while True:\n    pass", timeout_s=1.0, cpu_s=5.0)
    assert looping.killed_reason == "timeout"
    assert wait_until_gone(looping.pid) == []


# Findings of the review: each test below failed before its fix.


@pytest.fixture
def host_tmp() -> Iterator[Path]:
    """A world-readable directory in the host's /tmp (pytest's own tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="ttc-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_subinterpreters_cannot_shed_the_guard(host_tmp: Path, tcp_listener: socket.socket) -> None:
    # Audit hooks belong to one interpreter: a subinterpreter would run without the guard.
    target = host_tmp / "from-subinterpreter"
    port = tcp_listener.getsockname()[1]
    inner = (
        f"open({str(target)!r}, 'w').write('x')\n"
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "print('escaped')\n"
    )
    code = f"import _xxsubinterpreters as I\nI.run_string(I.create(isolated=False), {inner!r})\n"
    result = run(code)
    assert "importing _xxsubinterpreters is not allowed" in result.stderr
    assert "escaped" not in result.stdout
    assert not target.exists()
    assert_no_connection(tcp_listener)
    for name in ("_xxsubinterpreters", "_interpreters", "_xxinterpchannels", "_interpqueues"):
        assert name in _boot.DENY_IMPORTS


@pytest.mark.parametrize("variant", ["default", "no-namespaces"])
def test_guard_normalises_proc_and_dir_fd_paths(
    monkeypatch: pytest.MonkeyPatch, variant: str
) -> None:
    if variant == "no-namespaces":
        setup = _sandbox._make_setup(allow_unshare=False).setup
        monkeypatch.setattr(_sandbox, "_setup", lambda: setup)
    name = f"ttc-test-{secrets.token_hex(8)}"
    code = (
        "import os\n"
        "def environ():\n"
        "    return open(f'/proc/self/../{os.getppid()}/environ', 'rb').read()\n"
        "def via_root():\n"
        "    fd = os.open('/proc/self/root/etc', os.O_RDONLY)\n"
        f"    os.open({name!r}, os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd)\n"
        "def via_cwd():\n"
        "    fd = os.open('/proc/self/cwd/..', os.O_RDONLY)\n"
        "for attempt in (environ, via_root, via_cwd):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('allowed')\n"
        "    except OSError as exc:\n"
        "        print('refused', exc)\n"
    )
    result = run(code)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert all(line.startswith("refused") for line in lines), lines
    # without a PID namespace, /proc/self/cwd is not even the program's to read: the kernel
    # refuses before the guard can
    assert all("not allowed" in line or "Permission denied" in line for line in lines), lines
    assert "/environ is not allowed" in lines[0]
    assert "opening the directory /etc is not allowed" in lines[1]
    assert not os.path.lexists(f"/etc/{name}")


def test_other_ways_of_writing_are_refused(host_tmp: Path) -> None:
    host_tmp.chmod(0o777)
    attempts = {
        "sqlite": f"import sqlite3\nsqlite3.connect({str(host_tmp / 'db')!r}).execute('select 1')",
        "fifo": f"import os\nos.mkfifo({str(host_tmp / 'fifo')!r})",
        "node": f"import os, stat\nos.mknod({str(host_tmp / 'node')!r}, stat.S_IFIFO | 0o666)",
        "shm": "import _posixshmem, os\n_posixshmem.shm_open('/ttc-test-shm', os.O_CREAT | 2)",
        "link": f"import os\nos.link('/etc/hostname', {str(host_tmp / 'link')!r})",
        "subdirectory": "import os\nos.chdir('..')\nopen('x', 'w')",
    }
    for name, code in attempts.items():
        result = run(code)
        assert result.returncode == 1, (name, result)
        assert "not allowed" in result.stderr, (name, result.stderr)
    assert list(host_tmp.iterdir()) == []
    assert not Path("/dev/shm/ttc-test-shm").exists()


def test_the_guards_state_is_out_of_reach() -> None:
    # The reviewer's trick: the traceback of a refusal leads to the hook's frame, whose locals
    # were the guard's mutable state.
    marker = f"/tmp/ttc-test-link-{secrets.token_hex(8)}"
    code = (
        "import os, sys\n"
        "try:\n"
        "    open('/etc/x_never', 'w')\n"
        "except PermissionError as e:\n"
        "    tb = e.__traceback__\n"
        "    while tb.tb_next:\n"
        "        tb = tb.tb_next\n"
        "    loc = tb.tb_frame.f_locals\n"
        "    loc['_paths'].clear()\n"
        "    loc['_budget'][0] = 10**9\n"
        f"os.symlink('/etc/passwd', {marker!r})\n"
        "print('linked')\n"
    )
    result = run(code)
    assert "linked" not in result.stdout
    assert "reading the guard's frame is not allowed" in result.stderr
    assert not os.path.lexists(marker)
    # A path object's __fspath__ may run inside the hook: what it finds there is immutable.
    sneaky = (
        "import os, shutil, sys\n"
        "class P:\n"
        "    def __fspath__(self):\n"
        "        hook = sys._getframe(1)\n"
        "        if hook.f_code.co_name == 'hook':\n"
        "            values = hook.f_locals.values()\n"
        "            mutable = (list, dict, set, bytearray)\n"
        "            print('mutable:', sorted({type(v).__name__ for v in values\n"
        "                                     if isinstance(v, mutable)}))\n"
        "        return 'inside'\n"
        "os.mkdir('inside')\n"
        "shutil.rmtree(P())\n"
    )
    result = run(sneaky)
    assert result.ok, result.stderr
    assert result.stdout == "mutable: []\n"


@GUARD
def test_only_the_system_is_visible(host_tmp: Path, audit_guard: bool) -> None:
    if not protections()["private_root"]:
        pytest.skip(f"no private root here: {protections()['missing']}")
    secret = host_tmp / "secret.txt"
    secret.write_text("sk-world-readable\n")
    secret.chmod(0o644)
    shm = Path(f"/dev/shm/ttc-test-{secrets.token_hex(8)}")
    shm.write_text("sk-in-shm\n")
    shm.chmod(0o644)
    project = os.path.realpath(_sandbox.__file__)
    code = (
        "import json, os\n"
        f"for path in ({str(secret)!r}, {str(shm)!r}, {project!r},\n"
        "             '/etc/passwd', '/etc/hostname'):\n"
        "    try:\n"
        "        print(open(path).read().strip())\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
        "print(json.dumps(os.listdir('/')))\n"
        "print(json.dumps(os.listdir('/dev') + os.listdir('/etc')))\n"
        "print(os.getcwd(), sorted(os.listdir('.')))\n"
        "print([p for p in os.listdir('/proc') if p.isdigit()])\n"
    )
    try:
        result = run(code, audit_guard=audit_guard)
    finally:
        shm.unlink()
    assert result.returncode == 0, result.stderr
    assert "sk-" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[:5] == ["refused FileNotFoundError"] * 5, lines
    top = set(json.loads(lines[5]))
    system = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr"}
    python_top = protections()["python"].split("/")[1]
    assert top - system <= {"dev", "etc", "proc", "tmp", python_top}, top
    devices = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr"}
    assert set(json.loads(lines[6])) <= devices | {"ld.so.cache", "localtime"}, lines[6]
    assert lines[7] == "/tmp ['main.py']"
    assert lines[8] == "['1']"  # its own PID namespace: nothing else runs there


def test_callers_hide_inputs_by_their_real_path(host_tmp: Path) -> None:
    # A link to a file and a link to a directory, both inside the visible system: covered where
    # they really are, as a data file given through a symlinked path must be.
    if not protections()["private_root"]:
        pytest.skip(f"no private root here: {protections()['missing']}")
    stdlib = Path(os.__file__).resolve().parent
    (host_tmp / "answers.py").symlink_to(stdlib / "this.py")
    (host_tmp / "private").symlink_to(stdlib / "email")
    code = (
        "import os\n"
        f"print(len(open({str(stdlib / 'this.py')!r}).read()) > 0)\n"
        f"print(sorted(os.listdir({str(stdlib / 'email')!r})) != [])\n"
    )
    assert run(code).stdout == "True\nTrue\n"
    hide = (str(host_tmp / "answers.py"), str(host_tmp / "private"))
    hidden = run(code, hide=hide)
    assert hidden.stdout == "False\nFalse\n", hidden.stderr


def _run_as(uid: int, script: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Runs `script` (which prints one JSON line last) as `uid`, with this sandbox module."""
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access(python, os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to act as another user")
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info >= (3, 10))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if version.stdout.strip() != "True":
        pytest.skip("/usr/bin/python3 is older than 3.10")
    # The sandbox package on its own (stdlib only, relative imports), without ttc around it.
    package = os.path.dirname(_sandbox.__file__)
    prologue = (
        "import importlib, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('sb', {package + '/__init__.py'!r},\n"
        f"    submodule_search_locations=[{package!r}])\n"
        "P = importlib.util.module_from_spec(spec)\n"
        "sys.modules['sb'] = P\n"
        "spec.loader.exec_module(P)\n"
        "S = importlib.import_module('sb._sandbox')\n"
        "L = importlib.import_module('sb._limits')\n"
    )
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            python,
            "-c",
            prologue + script,
        ],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


OTHER_UID = 54321  # no user of this machine: act as an unprivileged user of our own


def test_an_unprivileged_users_files_are_hidden_from_its_programs(host_tmp: Path) -> None:
    home = host_tmp / "home"
    home.mkdir(mode=0o700)
    (home / ".env").write_text("OPENAI_API_KEY=sk-user-secret\n")
    (home / ".bashrc").write_text("export PS1=ok\n")
    for path in (home, home / ".env", home / ".bashrc"):
        os.chown(path, OTHER_UID, OTHER_UID)
    program = (
        "import json\n"
        "out = []\n"
        f"for action in (lambda: open({str(home / '.env')!r}).read(),\n"
        f"               lambda: open({str(home / '.bashrc')!r}, 'a').write('evil\\n')):\n"
        "    try:\n"
        "        out.append(repr(action()))\n"
        "    except OSError as exc:\n"
        "        out.append(type(exc).__name__)\n"
        "print(json.dumps(out))\n"
    )
    script = (
        "report = S.protections()\n"
        f"runs = [S.run_python({program!r}, '', P.RunOptions(timeout_s=10, audit_guard=guard))\n"
        "        for guard in (True, False)]\n"
        "print(json.dumps({'report': report, 'runs': [[r.returncode, r.stdout, r.stderr] "
        "for r in runs]}))\n"
    )
    outcome = _run_as(OTHER_UID, script)
    report = outcome["report"]
    assert report["uid"] == OTHER_UID
    assert report["uid_dropped"] is False
    refusals = {"FileNotFoundError", "PermissionError"}
    for returncode, stdout, stderr in outcome["runs"]:
        assert returncode == 0, stderr
        assert set(json.loads(stdout)) <= refusals, stdout
    if "user" in report["namespaces"]:
        assert report["private_root"], report["missing"]
    assert (home / ".bashrc").read_text() == "export PS1=ok\n"


def test_nproc_leaves_room_beside_the_users_other_processes() -> None:
    # The kernel counts all of a uid's processes against RLIMIT_NPROC: a user already running
    # 70 of them could start no thread at all with a flat limit of 64.
    threaded = (
        "import threading\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(42))\n"
        "t.start(); t.join(); print(out[0])\n"
    )
    script = (
        "import subprocess\n"
        "sleepers = [subprocess.Popen(['sleep', '60']) for _ in range(70)]\n"
        "try:\n"
        "    limit = L._nproc_limit(L.os.geteuid())\n"
        f"    result = S.run_python({threaded!r}, '', P.RunOptions(timeout_s=10))\n"
        "finally:\n"
        "    for p in sleepers:\n"
        "        p.kill(); p.wait()\n"
        "print(json.dumps({'result': [limit, result.returncode, result.stdout, result.stderr]}))\n"
    )
    limit, returncode, stdout, stderr = _run_as(OTHER_UID, script)["result"]
    assert limit >= 70 + 64
    assert (returncode, stdout) == (0, "42\n"), stderr


def test_a_weaker_sandbox_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_probe = _sandbox._probe

    def probe(setup: Any) -> tuple[str | None, str]:
        return ("refused for the test", "?") if setup.wrapper else real_probe(setup)

    monkeypatch.setattr(_sandbox, "_probe", probe)
    with caplog.at_level(logging.WARNING, logger="ttc"):
        chosen = _sandbox._make_setup()
    assert chosen.setup.namespaces == ()
    assert "refused for the test" in chosen.missing["namespaces"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "ttc"]
    assert any("without namespaces" in w and "refused for the test" in w for w in warnings)


def test_deep_trees_are_removed() -> None:
    # Not in tmp_path: should this fail, pytest's own clean-up would trip over the tree.
    top = Path(tempfile.mkdtemp(prefix="ttc-test-deep-"))
    try:
        fd = os.open(top, os.O_RDONLY)
        for _ in range(sys.getrecursionlimit() + 500):  # beyond shutil.rmtree's recursion
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(fd)
        _remove.remove_tree(str(top))
        assert not top.exists()
    finally:
        subprocess.run(["rm", "-rf", "--", str(top)], check=False)


def test_guard_caps_the_directories_a_program_makes() -> None:
    code = (
        "import os\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        os.mkdir('d'); os.chdir('d'); n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc)\n"
    )
    started = time.monotonic()
    result = run(code, timeout_s=10.0)
    assert result.ok, result.stderr
    assert result.stdout == f"{_boot.DIRS} sandbox: too many directories created\n"
    assert time.monotonic() - started < 5.0
