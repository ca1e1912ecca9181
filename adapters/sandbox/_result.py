"""What a sandboxed run takes and gives: its options, and how it ended (`SandboxResult`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunOptions", "SandboxResult"]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The limits and extras of one run (see `run_python`).

    timeout_s: wall-clock limit; cpu_s: CPU-time limit (default: timeout_s, rounded up);
    memory_mb: address-space limit; max_output_bytes: stdout (and any file written) is cut there;
    prelude: source executed in the same namespace just before the program (tracebacks keep the
    program's own line numbers); audit_guard=False leaves only the OS protections (for tests);
    hide: more directories the program must not see (e.g. where the expected answers are).
    """

    timeout_s: float
    memory_mb: int = 512
    cpu_s: float | None = None
    max_output_bytes: int = 1 << 20
    prelude: str = ""
    audit_guard: bool = True
    hide: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.memory_mb < 16:
            raise ValueError(f"memory_mb must be >= 16, got {self.memory_mb}")


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """How one run ended and what it printed (decoded as UTF-8, invalid bytes replaced).

    killed_reason is None when the program ran to its end (whatever its exit status), else
    "timeout" (wall clock), "cpu" (RLIMIT_CPU), "memory" (MemoryError under RLIMIT_AS),
    "output" (stdout beyond the cap) or "signal SIGxxx".
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    killed_reason: str | None
    stdout_truncated: bool = False
    wall_s: float = 0.0
    pid: int = 0  # the process (and process group) started, for diagnostics

    @property
    def ok(self) -> bool:
        """Whether the program exited with status 0 within every limit."""
        return self.returncode == 0 and self.killed_reason is None
