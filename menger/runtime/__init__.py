"""The runtime: the Trainer that wires the roles together, the actor supervisor, observers, metrics, stop rules."""
from menger.runtime.observers import Episode, MetricsWriter, Observer, StopOnSignals
from menger.runtime.stopping import TrainingFailed
from menger.runtime.supervisor import ActorSupervisor, NoActorsError
from menger.runtime.trainer import Trainer, TrainResult

__all__ = ["ActorSupervisor", "Episode", "MetricsWriter", "NoActorsError", "Observer", "StopOnSignals", "Trainer",
           "TrainResult", "TrainingFailed"]
