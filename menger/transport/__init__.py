"""Moving unrolls from actors to the learner: preallocated slots; only slot indices and tags travel."""
from menger.transport.shm import UnrollBuffers, UnrollSpec

__all__ = ["UnrollBuffers", "UnrollSpec"]
