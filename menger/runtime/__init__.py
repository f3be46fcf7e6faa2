"""The coordinator: runs the learner loop, supervises actors, checkpoints, logs and decides when to stop."""
from menger.runtime.trainer import NoActorsError, Trainer, TrainResult

__all__ = ["NoActorsError", "Trainer", "TrainResult"]
