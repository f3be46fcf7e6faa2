"""Torch networks: encoders (MLP, Nature CNN), an optional LSTM core, and policy heads with masking; Ape-X's
dueling Q network (`qnet`) and SAC's squashed Gaussian actor and twin critics (`sac`); what each acts in for an
env's action space and the policy gradient's product distribution (`actions`)."""
from menger.models.actions import ActionCodec, ActionHead
from menger.models.build import build_policy
from menger.models.policy import Policy, num_action_params, obs_to_tensors

__all__ = ["ActionCodec", "ActionHead", "Policy", "build_policy", "num_action_params", "obs_to_tensors"]
