"""The sandbox's kernel layers against the escapes an attacker tried: each runs with the audit
guard off (so that the kernel, not the hook, is what stops it) and on.

Skipped, with the reason, only where this machine lacks the layer (`protections()["missing"]`).
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from ttc.adapters.sandbox import RunOptions, SandboxResult, protections, run_python

GUARD = pytest.mark.parametrize("audit_guard", [True, False], ids=["guard", "kernel-only"])

# A native extension whose import runs a shell command, as the attacker's did.
EXTENSION = r"""
#include <Python.h>
#include <stdlib.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "evil", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_evil(void) {
    int status = system("/usr/bin/expr 6 '*' 7");
    PyObject *m = PyModule_Create(&def);
    PyModule_AddIntConstant(m, "status", status);
    return m;
}
"""


def run(code: str, *, audit_guard: bool, **kwargs: object) -> SandboxResult:
    return run_python(code, "", RunOptions(timeout_s=10.0, audit_guard=audit_guard, **kwargs))  # type: ignore[arg-type]


def need(layer: str) -> None:
    report = protections()
    on = {"seccomp": report["seccomp"], "private root": report["private_root"]}.get(layer)
    if layer == "cgroup":
        on = "memory" in report["cgroup_limits"]
    if not on:
        pytest.skip(f"no {layer} here: {report['missing'].get(layer, 'not available')}")


@pytest.fixture(scope="module")
def extension() -> bytes:
    """The extension, compiled for the sandbox's interpreter."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc here to build the attacker's extension")
    python = protections()["python"]
    include = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as folder:
        source, built = Path(folder, "evil.c"), Path(folder, "evil.so")
        source.write_text(EXTENSION)
        done = subprocess.run(
            ["gcc", "-shared", "-fPIC", f"-I{include}", "-o", str(built), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"the extension does not build here: {done.stderr[-200:]}")
        return built.read_bytes()


def assert_no_shell(result: SandboxResult) -> None:
    assert "42" not in result.stdout, result.stdout
    assert "escaped" not in result.stdout


@GUARD
def test_tcl_cannot_exec(audit_guard: bool) -> None:
    need("seccomp")
    probe = subprocess.run([protections()["python"], "-c", "import _tkinter"], check=False)
    if probe.returncode != 0:
        pytest.skip("the sandbox's interpreter has no _tkinter")
    code = (
        "import _tkinter\n"
        "tcl = _tkinter.create(None, 'x', 'Tk', False, True, False, False, None)\n"
        "for command in (('exec', '/usr/bin/expr', '6', '*', '7'), ('exec', '/bin/sh', '-c',\n"
        "                'echo escaped')):\n"
        "    try:\n"
        "        print(tcl.call(*command))\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__, exc)\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert_no_shell(result)
    if not audit_guard:
        assert result.stdout.count("refused") == 2, (result.stdout, result.stderr)


@GUARD
def test_a_native_extension_runs_no_shell(extension: bytes, audit_guard: bool) -> None:
    # Written into the scratch directory (a noexec tmpfs) and into a memfd (refused): loaded
    # from neither, and were it loaded, its system() could neither fork nor exec.
    need("seccomp")
    need("private root")
    blob = base64.b64encode(extension).decode()
    code = (
        "import base64, importlib.machinery, importlib.util, os\n"
        f"data = base64.b64decode({blob!r})\n"
        "def load(path):\n"
        "    loader = importlib.machinery.ExtensionFileLoader('evil', path)\n"
        "    spec = importlib.util.spec_from_file_location('evil', path, loader=loader)\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    print('loaded', module.status)\n"
        "def scratch():\n"
        "    with open('evil.so', 'wb') as f:\n"
        "        f.write(data)\n"
        "    load(os.path.abspath('evil.so'))\n"
        "def memfd():\n"
        "    fd = os.memfd_create('evil')\n"
        "    os.write(fd, data)\n"
        "    load(f'/proc/self/fd/{fd}')\n"
        "for attempt in (scratch, memfd):\n"
        "    try:\n"
        "        attempt()\n"
        "    except Exception as exc:\n"
        "        print('refused', type(exc).__name__)\n"
    )
    result = run(code, audit_guard=audit_guard)
    assert_no_shell(result)
    assert result.stdout.splitlines() == ["refused ImportError", "refused PermissionError"], (
        result.stdout,
        result.stderr,
    )


@GUARD
def test_the_tree_stays_under_its_memory_limit(audit_guard: bool) -> None:
    # 100 MB in the scratch tmpfs and 100 MB in the process: each under the 128 MB limit, the
    # two together over it. The cgroup counts both.
    need("cgroup")
    code = (
        "with open('fill', 'wb') as f:\n"
        "    for _ in range(100):\n"
        "        f.write(b'x' * 2**20)\n"
        "print('filled', flush=True)\n"
        "block = bytearray(100 * 2**20)\n"
        "for i in range(0, len(block), 4096):\n"
        "    block[i] = 1\n"
        "print('allocated')\n"
    )
    result = run(code, audit_guard=audit_guard, memory_mb=128, max_output_bytes=200 << 20)
    assert result.stdout.startswith("filled"), (result.stdout, result.stderr)
    assert "allocated" not in result.stdout
    assert result.killed_reason == "memory", result


@GUARD
def test_forks_are_refused_whatever_the_memory(audit_guard: bool) -> None:
    # The attacker's tree of processes, each under RLIMIT_AS, that together went far beyond it.
    need("seccomp")
    code = (
        "import os\n"
        "children = 0\n"
        "for _ in range(8):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            block = bytearray(200 * 2**20)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
        "        break\n"
        "print('children', children)\n"
    )
    result = run(code, audit_guard=audit_guard, memory_mb=256)
    assert result.stdout == "refused PermissionError\nchildren 0\n", (result.stdout, result.stderr)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


@GUARD
def test_kill_9_of_the_caller_takes_its_programs_down(audit_guard: bool) -> None:
    # A verifier worker (here: a Python process calling run_python) is killed with -9 while its
    # program sleeps in a session of its own: the program dies with it, and no scratch
    # directory is left.
    marker = f"/nonexistent/ttc-orphan-{secrets.token_hex(8)}"  # on the boot's command line
    program = "import os, time\nos.setsid()\nprint('up', flush=True)\ntime.sleep(120)\n"
    caller = (
        "from ttc.adapters.sandbox import RunOptions, run_python\n"
        f"run_python({program!r}, '', RunOptions(timeout_s=100, audit_guard={audit_guard},\n"
        f"           hide=({marker!r},)))\n"
    )
    scratch_root = tempfile.mkdtemp(prefix="ttc-test-tmpdir-")
    env = {**os.environ, "TMPDIR": scratch_root}
    worker = subprocess.Popen([sys.executable, "-c", caller], env=env)
    try:
        deadline = time.monotonic() + 30
        while not _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(marker), "the program never started"
        time.sleep(0.3)  # past its boot, into its own code
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 5
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(marker) == []
        left = [n for n in os.listdir(scratch_root) if n.startswith("ttc-sandbox-")]
        if protections()["private_root"]:
            assert left == []
    finally:
        worker.kill()
        worker.wait()
        shutil.rmtree(scratch_root, ignore_errors=True)


def test_a_program_that_swaps_its_tree_for_links_harms_nothing_outside(tmp_path: Path) -> None:
    # Without a private root the scratch directory is on the host and removed by ttc, as root:
    # removal goes through descriptors and never follows the links the program left.
    from ttc.adapters.sandbox import _remove

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    tree = Path(tempfile.mkdtemp(prefix="ttc-test-swap-"))
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "file").write_text("x")
    (tree / "link-dir").symlink_to(outside)
    (tree / "a" / "link-file").symlink_to(outside / "keep.txt")
    os.chmod(outside, 0o755)
    _remove.remove_tree(str(tree))
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    assert oct(outside.stat().st_mode & 0o777) == oct(0o755)


def test_stale_scratch_directories_are_swept(tmp_path: Path) -> None:
    from ttc.adapters.sandbox import _remove

    dead = tmp_path / "ttc-sandbox-999999999-1-abc"
    (dead / "scratch").mkdir(parents=True)
    mine = tmp_path / f"{_remove.owned_name()}xyz"
    mine.mkdir()
    foreign = tmp_path / "ttc-sandbox-k2j4x9"  # named by something else: not ours to judge
    foreign.mkdir()
    assert _remove.sweep(str(tmp_path)) == 1
    assert not dead.exists()
    assert mine.exists()
    assert foreign.exists()


def test_the_filter_is_one_per_architecture() -> None:
    from ttc.adapters.sandbox import _seccomp

    for machine in ("x86_64", "aarch64"):
        program = _seccomp.filter_program(machine)
        assert program is not None
        assert len(program) % 8 == 0
        assert len(program) // 8 < 4096  # the kernel's limit on a filter
    assert _seccomp.filter_program("sparc") is None
    assert sysconfig.get_platform()  # (the machine this test runs on is one of the above)


def test_the_reviewers_escapes_are_refused_by_the_kernel() -> None:
    # ctypes with the guard off: clearing the parent-death signal (outliving ttc), fallocate
    # with KEEP_SIZE on stdout (past RLIMIT_FSIZE, onto the host's disk), System V shared
    # memory (past RLIMIT_AS), a datagram socketpair (sendto any named socket).
    need("seccomp")
    code = (
        "import ctypes, socket\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.prctl(1, 0, 0, 0, 0), ctypes.get_errno())\n"
        "print(libc.fallocate(1, 1, 0, 1 << 30), ctypes.get_errno())\n"
        "print(libc.shmget(0, 1 << 20, 0o1600), ctypes.get_errno())\n"
        "try:\n"
        "    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "    print('datagram pair')\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
        "a, b = socket.socketpair()\n"
        "a.send(b'x')\n"
        "print(b.recv(1))\n"
    )
    result = run(code, audit_guard=False)
    assert result.stdout.splitlines() == ["-1 1", "-1 1", "-1 1", "refused 1", "b'x'"], (
        result.stdout,
        result.stderr,
    )


def test_inputs_are_covered_in_a_mount_namespace_without_a_private_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dataclasses

    from ttc.adapters.sandbox import _sandbox

    chosen = _sandbox._setup()
    if "mount" not in chosen.namespaces:
        pytest.skip("no mount namespace here")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3, which nobody can read, here")
    folder = Path(tempfile.mkdtemp(prefix="ttc-test-inputs-"))
    try:
        folder.chmod(0o755)
        (folder / "answers.txt").write_text("42\n")
        (folder / "answers.txt").chmod(0o644)
        (folder / "link.txt").symlink_to(folder / "answers.txt")
        # the system interpreter: the host's files, read by nobody
        weaker = dataclasses.replace(chosen, root=False, python="/usr/bin/python3")
        monkeypatch.setattr(_sandbox, "_setup", lambda: weaker)
        code = f"print(open({str(folder / 'answers.txt')!r}).read().strip() or 'empty')"
        assert run(code, audit_guard=False).stdout == "42\n"
        hidden = run(code, audit_guard=False, hide=(str(folder / "link.txt"),))
        assert hidden.stdout == "empty\n", hidden.stderr
        assert protections()["hidden_inputs"] == "covered"
    finally:
        shutil.rmtree(folder)
