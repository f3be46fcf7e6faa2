"""What actors act with: each algorithm's registry entry builds its own network (`Algorithm.network`); the
policy-gradient family's is built here from the experiment's `ModelConfig`."""
from __future__ import annotations

import gymnasium as gym
from torch import nn

from menger.models.agents import AgentBank
from menger.models.policy import Policy


def build_policy(obs_space: gym.Space, action_space: gym.Space, model_cfg, algo: str = "ppo",
                 normalize=None) -> nn.Module:
    """What `algo`'s actors act with, from a `ModelConfig` (see menger.experiment): its registry entry's network
    (`menger.registry`): the policy network of ppo, impala, appo and a3c, Ape-X's Q network, R2D2's recurrent
    one, SAC's squashed Gaussian actor, or a plug-in's own."""
    from menger.registry import get

    return get(algo).network(obs_space, action_space, model_cfg, normalize)


def policy_network(obs_space: gym.Space, action_space: gym.Space, model_cfg, normalize=None) -> nn.Module:
    """The policy-gradient family's network. `normalize` (`env.normalize`): with `obs` set, its first layer
    normalises observations (`menger.models.normalize.ObsNormalizer`). `model.agents=K > 0`: K independent
    policy networks, each row acting with its agent's (`menger.models.agents.AgentBank`)."""
    kwargs = dict(
        encoder=model_cfg.encoder, hidden=tuple(model_cfg.hidden),
        activation=model_cfg.activation, lstm_size=model_cfg.lstm_size, network=model_cfg.network,
        network_kwargs=dict(model_cfg.kwargs), init_log_std=model_cfg.init_log_std,
        separate_value=model_cfg.separate_value, board_channels=tuple(model_cfg.board_channels),
        board_mirror=model_cfg.board_mirror, squash_mean=model_cfg.squash_mean,
        obs_clip=normalize.clip_obs if normalize is not None and normalize.obs else None,
    )
    agents = getattr(model_cfg, "agents", 0)
    if agents:
        return AgentBank(obs_space, action_space, agents, **kwargs)
    return Policy(obs_space, action_space, **kwargs)


def refuse_board_mirror(model_cfg, algo: str) -> None:
    """A network that has no mirrored forward refuses `model.board_mirror` (a config built in code skips the
    experiment's check)."""
    if model_cfg.board_mirror:
        raise ValueError(f"model.board_mirror=true is built into the policy network of ppo, impala, appo and a3c; "
                         f"algo {algo} builds its own network without it: unset model.board_mirror")
