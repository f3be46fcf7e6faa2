"""Actor inference: local on cached parameters, or central on the learner's device (SEED RL)."""
from menger.inference.central import (CentralActions, CentralInference, InferenceSlots, LocalInference,
                                      sample_actions, start_inference)
from menger.inference.source import ActionSource, LocalActions

__all__ = ["ActionSource", "CentralActions", "CentralInference", "InferenceSlots", "LocalActions", "LocalInference",
           "sample_actions", "start_inference"]
