"""The parameter server: the newest parameters with a version, one copy per host.

Both homes implement `menger.core.ParameterSource` for actors and take `publish(module, version)` from the learner:
`SharedParameters` (`server.py`: shared memory, a seqlock; threads and processes launchers) and, on Ray,
`RayParameterServer` with one `ParameterCache` per node (`ray.py`, imported only by the Ray transport).
"""
from menger.params.server import SharedParameters

__all__ = ["SharedParameters"]
