"""Ape-X's network: an encoder, then dueling value and advantage heads (or one Q head), acting epsilon-greedily.

    q = QNetwork(obs_space, action_space, hidden=(256, 256), activation="relu")
    q.explore([i] * B, N, base=0.4, alpha=7)             # each of its B envs with copy i's 0.4^(1 + 7 i / (N - 1))
    out = q.act(obs, None, generator=g)                   # ActOutput(action, logp=Q(s, a), state, value=max Q(s, .))

Acting returns the value of the action taken (in `logp`'s place: the slot's per-step float) and the greedy
value, which is all an actor needs for Ape-X's initial priorities |R + D max_a Q(s', a) - Q(s, a)|.
"""
from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from menger.losses import dueling
from menger.models.encoders import MASK_KEY, build_encoder
from menger.models.policy import MASKED_LOGIT, ActOutput


def apex_epsilon(actor_id: int, num_actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's per-actor exploration: eps_i = base^(1 + alpha i / (N - 1)); a single actor gets base."""
    if num_actors <= 1:
        return base
    return base ** (1.0 + alpha * actor_id / (num_actors - 1))


class QNetwork(nn.Module):
    lstm_size = 0  # feed-forward: no recurrent state travels with its unrolls

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, encoder: str = "auto",
                 hidden: tuple[int, ...] = (256, 256), activation: str = "relu", dueling: bool = True):
        super().__init__()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"apex needs Discrete actions, got {action_space}; use algo sac for Box actions")
        self.obs_space, self.action_space = obs_space, action_space
        self.discrete, self.num_actions = True, int(action_space.n)
        self.has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        self.encoder = build_encoder(obs_space, encoder, tuple(hidden), activation)
        self.dueling = dueling
        self.advantage = nn.Linear(self.encoder.out_dim, self.num_actions)
        self.value = nn.Linear(self.encoder.out_dim, 1) if dueling else None
        self.epsilon = torch.zeros(1)  # per env of the acting batch (row r explores with epsilon[r % len])

    def explore(self, copies: list[int], num_copies: int, base: float, alpha: float) -> None:
        """Act with Ape-X's epsilon of copy `copies[r]` (of `num_copies`) for row r of each batch."""
        self.epsilon = torch.tensor([apex_epsilon(i, num_copies, base, alpha) for i in copies])

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(0)

    def forward(self, obs) -> torch.Tensor:
        """Q(s, .) [N, A]; illegal actions (an `action_mask` entry) get a value no legal one can lose to."""
        features = self.encoder(obs)
        q = self.advantage(features)
        if self.value is not None:
            q = dueling(self.value(features), q)
        if self.has_mask:
            q = q.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return q

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        q = self.forward(obs)
        greedy = q.argmax(-1)
        action = greedy
        if not deterministic and bool((self.epsilon > 0).any()):
            n = q.shape[0]
            epsilon = self.epsilon if len(self.epsilon) == n else self.epsilon[torch.arange(n) % len(self.epsilon)]
            explore = torch.rand(n, generator=generator) < epsilon
            noise = torch.rand(q.shape, generator=generator)
            if self.has_mask:
                noise = noise.masked_fill(obs[MASK_KEY] < 0.5, -1.0)
            action = torch.where(explore, noise.argmax(-1), greedy)  # uniform over the legal actions
        q_taken = q.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return ActOutput(action, q_taken, state, q.max(-1).values)

