"""What actors act with, for each family of algorithms, from the experiment's `ModelConfig`."""
from __future__ import annotations

import gymnasium as gym
from torch import nn

from menger.models.agents import AgentBank
from menger.models.policy import Policy
from menger.models.qnet import QNetwork, RecurrentQNetwork
from menger.models.sac import SquashedGaussianActor


def build_policy(obs_space: gym.Space, action_space: gym.Space, model_cfg, algo: str = "ppo",
                 normalize=None) -> nn.Module:
    """Build what actors act with from a `ModelConfig` (see menger.experiment): the policy network of the
    on-policy algorithms, Ape-X's Q network (algo apex), R2D2's recurrent one (algo r2d2) or SAC's squashed
    Gaussian actor (algo sac). `normalize` (`env.normalize`): with `obs` set, the policy network's first layer
    normalises observations (`menger.models.normalize.ObsNormalizer`). `model.agents=K > 0`: K independent
    policy networks, each row acting with its agent's (`menger.models.agents.AgentBank`)."""
    if model_cfg.board_mirror and algo in ("r2d2", "apex", "gorila", "sac"):
        raise ValueError(f"model.board_mirror=true is built into the policy network of ppo, impala, appo and a3c; algo "
                         f"{algo} builds its own network without it: unset model.board_mirror")
    if algo == "r2d2":
        return RecurrentQNetwork(obs_space, action_space, lstm_size=model_cfg.lstm_size, encoder=model_cfg.encoder,
                                 hidden=tuple(model_cfg.hidden), activation=model_cfg.activation,
                                 dueling=model_cfg.dueling, board_channels=tuple(model_cfg.board_channels))
    if algo in ("apex", "gorila"):
        return QNetwork(obs_space, action_space, encoder=model_cfg.encoder, hidden=tuple(model_cfg.hidden),
                        activation=model_cfg.activation, dueling=model_cfg.dueling,
                        board_channels=tuple(model_cfg.board_channels))
    if algo == "sac":
        return SquashedGaussianActor(obs_space, action_space, encoder=model_cfg.encoder,
                                     hidden=tuple(model_cfg.hidden), activation=model_cfg.activation)
    kwargs = dict(
        encoder=model_cfg.encoder, hidden=tuple(model_cfg.hidden),
        activation=model_cfg.activation, lstm_size=model_cfg.lstm_size, network=model_cfg.network,
        network_kwargs=dict(model_cfg.kwargs), init_log_std=model_cfg.init_log_std,
        separate_value=model_cfg.separate_value, board_channels=tuple(model_cfg.board_channels),
        board_mirror=model_cfg.board_mirror,
        obs_clip=normalize.clip_obs if normalize is not None and normalize.obs else None,
    )
    agents = getattr(model_cfg, "agents", 0)
    if agents:
        return AgentBank(obs_space, action_space, agents, **kwargs)
    return Policy(obs_space, action_space, **kwargs)
