"""The code sandbox: one untrusted Python program under namespaces, limits and an audit guard.

Standard library only, and imported relatively, so that tests can load it on its own under
another interpreter and uid.
"""

from ._result import RunOptions, SandboxResult
from ._sandbox import SandboxUnavailable, protections, run_python

__all__ = ["RunOptions", "SandboxResult", "SandboxUnavailable", "protections", "run_python"]
