"""The parameter server: the newest parameters with a version, one copy per host."""
from menger.params.server import SharedParameters

__all__ = ["SharedParameters"]
