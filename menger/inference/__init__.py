"""Actor inference: local on cached parameters, or central on the learner's device (SEED RL).

`service` holds what both central services share (the batched forward, the serving thread); `central` is the
one-host service (shared-memory request slots), `ray` the Ray one (requests on a socket to the driver; imported only by
the ray launcher). Launchers choose which one runs (`Launcher.start_inference`).
"""
from menger.inference.central import CentralActions, CentralClient, CentralInference, InferenceSlots
from menger.inference.service import InferenceService, LocalInference, batched_act, sample_actions
from menger.inference.source import LocalActions

__all__ = ["CentralActions", "CentralClient", "CentralInference", "InferenceService", "InferenceSlots",
           "LocalActions", "LocalInference", "batched_act", "sample_actions"]
