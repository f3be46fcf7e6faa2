"""What actors act with, for each family of algorithms, from the experiment's `ModelConfig`."""
from __future__ import annotations

import gymnasium as gym
from torch import nn

from menger.models.policy import Policy
from menger.models.qnet import QNetwork, RecurrentQNetwork
from menger.models.sac import SquashedGaussianActor


def build_policy(obs_space: gym.Space, action_space: gym.Space, model_cfg, algo: str = "ppo") -> nn.Module:
    """Build what actors act with from a `ModelConfig` (see menger.experiment): the policy network of the
    on-policy algorithms, Ape-X's Q network (algo apex), R2D2's recurrent one (algo r2d2) or SAC's squashed
    Gaussian actor (algo sac)."""
    if algo == "r2d2":
        return RecurrentQNetwork(obs_space, action_space, lstm_size=model_cfg.lstm_size, encoder=model_cfg.encoder,
                                 hidden=tuple(model_cfg.hidden), activation=model_cfg.activation,
                                 dueling=model_cfg.dueling)
    if algo == "apex":
        return QNetwork(obs_space, action_space, encoder=model_cfg.encoder, hidden=tuple(model_cfg.hidden),
                        activation=model_cfg.activation, dueling=model_cfg.dueling)
    if algo == "sac":
        return SquashedGaussianActor(obs_space, action_space, encoder=model_cfg.encoder,
                                     hidden=tuple(model_cfg.hidden), activation=model_cfg.activation)
    return Policy(
        obs_space, action_space, encoder=model_cfg.encoder, hidden=tuple(model_cfg.hidden),
        activation=model_cfg.activation, lstm_size=model_cfg.lstm_size, network=model_cfg.network,
        network_kwargs=dict(model_cfg.kwargs), init_log_std=model_cfg.init_log_std,
        separate_value=model_cfg.separate_value,
    )


def check_custom_network(policy: nn.Module, obs_space: gym.Space, action_space: gym.Space, batch: int = 2) -> None:
    """Call a custom `model.network` once on a batch of observations sampled from the env's space, and raise
    ValueError naming the shapes when it fails or returns something else than (logits [N, A], value [N]):
    a network that builds but does not fit the env is found before anything starts, not in every actor."""
    import torch

    from menger.models.policy import obs_to_tensors

    sample = gym.vector.utils.batch_space(obs_space, batch).sample()
    with torch.no_grad():
        out = policy.custom(obs_to_tensors(sample))
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ValueError(f"its forward(obs) returned {type(out).__name__}, not a pair (logits, value)")
    logits, value = out
    expected = (batch, action_space.n)
    if tuple(getattr(logits, "shape", ())) != expected or tuple(getattr(value, "shape", ())) != (batch,):
        raise ValueError(f"on a batch of {batch} observations of shape {getattr(obs_space, 'shape', obs_space)} "
                         f"its forward returned logits {tuple(getattr(logits, 'shape', ()))} and value "
                         f"{tuple(getattr(value, 'shape', ()))}; expected logits {expected} and value ({batch},)")
