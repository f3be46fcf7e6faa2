"""Torch networks: encoders (MLP, Nature CNN), an optional LSTM core, and policy heads with masking; Ape-X's
dueling Q network (`qnet`) and SAC's squashed Gaussian actor and twin critics (`sac`)."""
from menger.models.build import build_policy
from menger.models.policy import Policy, obs_to_tensors

__all__ = ["Policy", "build_policy", "obs_to_tensors"]
