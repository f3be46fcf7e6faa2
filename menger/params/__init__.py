"""The parameter server: the newest parameters with a version, one copy per host.

Both homes implement `menger.core.ParameterSource` for actors and take `publish(module, version)` from the learner:
`SharedParameters` (`server.py`: shared memory, a seqlock; threads and processes launchers) and, on Ray,
`RayParameterServer` (`ray.py`) with one `ParameterCache` per node and, with a fan-out, cells above them
(`caches.py`); both imported only by the Ray transport. `SharedParameters` loads on first use, so a cache's
process (`caches.py` imports Ray and numpy only) does not import torch.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from menger.params.server import SharedParameters

__all__ = ["SharedParameters"]


def __getattr__(name: str):
    if name == "SharedParameters":
        from menger.params.server import SharedParameters

        return SharedParameters
    raise AttributeError(f"module 'menger.params' has no attribute {name!r}")
