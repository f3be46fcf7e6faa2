"""Torch networks: encoders (MLP, Nature CNN), an optional LSTM core, and policy heads with masking."""
from menger.models.policy import Policy, build_policy, obs_to_tensors

__all__ = ["Policy", "build_policy", "obs_to_tensors"]
