"""The code sandbox: one untrusted Python program under namespaces, limits and an audit guard."""

from ttc.adapters.sandbox._sandbox import (
    SandboxResult,
    SandboxUnavailable,
    protections,
    run_python,
)

__all__ = ["SandboxResult", "SandboxUnavailable", "protections", "run_python"]
