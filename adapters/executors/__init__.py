"""Where responses are verified besides ttc's own worker processes: Ray (`RayVerifierPool`).

Ray is imported only when a pool is made: `pip install 'ttc[ray]'`.
"""

from ttc.adapters.executors._ray import INSTALL, RayVerifierPool

__all__ = ["INSTALL", "RayVerifierPool"]
