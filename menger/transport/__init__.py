"""Moving unrolls from actors to the learner: preallocated slots; only slot indices and tags travel."""
from menger.transport.shm import SlotChunks, UnrollBuffers, UnrollSpec, is_observation

__all__ = ["SlotChunks", "UnrollBuffers", "UnrollSpec", "is_observation"]
