"""PQN's Q network: LayerNorm after every hidden layer, one Q head, epsilon-greedy acting.

    q = PQNNetwork(obs_space, action_space, hidden=(128, 128))
    q.set_epsilon(linear_epsilon(frames, 1.0, 0.05, decay_frames))  # the learner, after each update
    out = q.act(obs, None, generator=g)       # ActOutput(action, logp=Q(s, a), state, value=max_a Q(s, .))

PQN has no target network: the targets come from the network being trained. Gallici et al. 2024 show that
LayerNorm is what keeps this stable (it bounds the features, so the bootstrapped targets cannot run away), so
every hidden layer is normalised before its ReLU, as purejaxql's PQN does.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.models.actions import MASKED_LOGIT, ActionCodec
from menger.models.encoders import MASK_KEY, build_encoder
from menger.models.policy import ActOutput
from menger.models.qnet import epsilon_greedy


def linear_epsilon(frames: int, start: float, end: float, decay_frames: int) -> float:
    """Exploration's schedule: epsilon falls linearly from `start` to `end` over the first `decay_frames` env
    frames and stays at `end` after (decay_frames <= 0: `end` from the start)."""
    if decay_frames <= 0:
        return float(end)
    fraction = min(1.0, max(0.0, frames / decay_frames))
    return float(start + fraction * (end - start))


def _layer_norm_mlp(in_dim: int, hidden: tuple[int, ...]) -> nn.Sequential:
    """Linear -> LayerNorm -> ReLU per hidden size, on observations flattened to [N, in_dim]."""
    layers: list[nn.Module] = [nn.Flatten()]
    for n_in, n_out in zip((in_dim, *hidden[:-1]), hidden):
        layers += [nn.Linear(n_in, n_out), nn.LayerNorm(n_out), nn.ReLU()]
    return nn.Sequential(*layers)


def _is_flat_box(obs_space: gym.Space, encoder: str) -> bool:
    """Whether the torso is PQN's own MLP: a Box read as a vector (what `build_encoder` would flatten)."""
    if not isinstance(obs_space, gym.spaces.Box):
        return False
    return encoder == "mlp" or (encoder == "auto" and len(obs_space.shape) != 3)


class PQNNetwork(nn.Module):
    lstm_size = 0  # feed-forward: no recurrent state travels with its unrolls
    algo = "pqn"

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, hidden: tuple[int, ...] = (128, 128),
                 encoder: str = "auto", board_channels: tuple[int, ...] = (64, 64)):
        super().__init__()
        # a MultiDiscrete, MultiBinary or Tuple/Dict of discrete components acts in one joint Discrete
        self.codec = ActionCodec(action_space, family="q", name="pqn")
        self.obs_space, self.action_space = obs_space, self.codec.space
        self.discrete, self.num_actions = True, int(self.action_space.n)
        self.has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        if self.has_mask and int(np.prod(obs_space[MASK_KEY].shape)) != self.num_actions:
            raise ValueError(f"the observation's action_mask has {int(np.prod(obs_space[MASK_KEY].shape))} entries, "
                             f"but PQN's Q network has {self.num_actions} actions ({action_space}): a mask over "
                             "joint actions needs one flag per combination")
        self.torso, out_dim = self._torso(obs_space, tuple(hidden), encoder, tuple(board_channels))
        self.head = nn.Linear(out_dim, self.num_actions)
        # A parameter, not a buffer, on purpose: Menger's parameter server copies only `parameters()` to the
        # actors, so the epsilon the learner sets travels with every published version. requires_grad=False keeps
        # it out of the optimizer (Learner.params) and out of the gradients.
        self.epsilon = nn.Parameter(torch.ones(()), requires_grad=False)

    @staticmethod
    def _torso(obs_space: gym.Space, hidden: tuple[int, ...], encoder: str,
               board_channels: tuple[int, ...]) -> tuple[nn.Module, int]:
        """The features before the Q head, and their width: PQN's LayerNorm MLP for a flat Box; otherwise Menger's
        encoder (images, Dicts, boards) with a LayerNorm and ReLU on its output."""
        if _is_flat_box(obs_space, encoder):
            in_dim = int(np.prod(obs_space.shape))
            return _layer_norm_mlp(in_dim, hidden), (hidden[-1] if hidden else in_dim)
        body = build_encoder(obs_space, encoder, hidden, "relu", board_channels=board_channels)
        return nn.Sequential(body, nn.LayerNorm(body.out_dim), nn.ReLU()), body.out_dim

    def set_epsilon(self, value: float) -> None:
        """The exploration rate of every row of `act`, from the next call (and the next published version)."""
        with torch.no_grad():
            self.epsilon.fill_(float(value))

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(0)

    def forward(self, obs) -> torch.Tensor:
        """Q(s, .) [N, A]; illegal actions (an `action_mask` entry) get a value no legal one can lose to."""
        q = self.head(self.torso(obs))
        if self.has_mask:
            q = q.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return q

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        q = self.forward(obs)
        action = q.argmax(-1) if deterministic else self._epsilon_greedy(q, obs, generator)
        q_taken = q.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return ActOutput(action, q_taken, state, q.max(-1).values)

    def _epsilon_greedy(self, q: torch.Tensor, obs, generator: torch.Generator | None) -> torch.Tensor:
        """Each row: with probability epsilon an action drawn uniformly among its legal ones, else the greedy."""
        if float(self.epsilon) <= 0.0:
            return q.argmax(-1)
        return epsilon_greedy(q, self.epsilon, obs[MASK_KEY] if self.has_mask else None, generator)
