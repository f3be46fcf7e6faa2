"""SAC's networks: a tanh-squashed Gaussian actor (what actors copy) and twin critics (the learner's alone).

    actor = SquashedGaussianActor(obs_space, action_space, hidden=(256, 256))
    out = actor.act(obs, None, generator=g)            # ActOutput(action in [low, high], logp, state)
    u, mean, log_std = actor.sample(obs)                # the learner's reparameterised draw (graph kept)
    critics = TwinCritics(obs_space, action_space, hidden=(256, 256))
    q1, q2 = critics(obs, action)                       # [N] each; both critics in one batched matmul chain

The critics see actions rescaled from [low, high] to [-1, 1], so one network fits any box.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.losses import squash, squashed_gaussian_logp
from menger.models.actions import ActionCodec
from menger.models.encoders import build_encoder
from menger.models.policy import ActOutput

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # as in the SAC authors' code and Stable-Baselines3


def _check_box(action_space: gym.Space) -> None:
    if not isinstance(action_space, gym.spaces.Box) or not np.all(np.isfinite(action_space.low)) or \
            not np.all(np.isfinite(action_space.high)):
        raise ValueError(f"sac needs a bounded Box action space, got {action_space}; use apex for Discrete actions")


class SquashedGaussianActor(nn.Module):
    lstm_size = 0

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, encoder: str = "auto",
                 hidden: tuple[int, ...] = (256, 256), activation: str = "relu"):
        super().__init__()
        self.codec = ActionCodec(action_space, "box", "sac")  # a Tuple/Dict of Boxes acts in one flat Box
        action_space = self.codec.space
        _check_box(action_space)
        self.obs_space, self.action_space, self.discrete = obs_space, action_space, False
        self.encoder = build_encoder(obs_space, encoder, tuple(hidden), activation)
        dims = int(np.prod(action_space.shape))
        self.mean = nn.Linear(self.encoder.out_dim, dims)
        self.log_std = nn.Linear(self.encoder.out_dim, dims)
        self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32).flatten())
        self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32).flatten())
        self.random_steps = 0  # the actor's first steps act uniformly at random (SACConfig.random_steps)

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(0)

    def forward(self, obs):
        features = self.encoder(obs)
        return self.mean(features), self.log_std(features).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs, generator: torch.Generator | None = None):
        """(u, mean, log_std): u = mean + std * noise, before the squash; differentiable (reparameterised)."""
        mean, log_std = self.forward(obs)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        return mean + log_std.exp() * noise, mean, log_std

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        return squash(u, self.low, self.high)

    def logp(self, u, mean, log_std) -> torch.Tensor:
        return squashed_gaussian_logp(u, mean, log_std, self.low, self.high)

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        if deterministic:
            mean, log_std = self.forward(obs)
            u = mean
        elif self.random_steps > 0:  # uniform in the box, before the policy has learned anything
            self.random_steps -= 1
            n = obs.shape[0] if not isinstance(obs, dict) else next(iter(obs.values())).shape[0]
            a = self.low + (self.high - self.low) * torch.rand((n, self.low.numel()), generator=generator)
            shape = (n, *self.action_space.shape)
            return ActOutput(a.view(shape), torch.zeros(n), state)
        else:
            u, mean, log_std = self.sample(obs, generator)
        action = self.squash(u)
        logp = self.logp(u, mean, log_std)
        return ActOutput(action.view(action.shape[0], *self.action_space.shape), logp, state)


class TwinCritics(nn.Module):
    """Q1 and Q2 as one ensemble: weights [2, in, out], each layer one batched matmul for both critics."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        _check_box(action_space)
        if not isinstance(obs_space, gym.spaces.Box):
            raise ValueError(f"sac's critics take a flat Box observation, got {obs_space}")
        obs_dim, act_dim = int(np.prod(obs_space.shape)), int(np.prod(action_space.shape))
        sizes = [obs_dim + act_dim, *hidden, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            w = torch.empty(2, n_in, n_out)
            for k in range(2):  # torch.nn.Linear's default initialisation, per critic
                layer = nn.Linear(n_in, n_out)
                w[k] = layer.weight.detach().T
            self.weights.append(nn.Parameter(w))
            bound = 1.0 / np.sqrt(n_in)
            self.biases.append(nn.Parameter(torch.empty(2, 1, n_out).uniform_(-bound, bound)))
        low = torch.as_tensor(action_space.low, dtype=torch.float32).flatten()
        high = torch.as_tensor(action_space.high, dtype=torch.float32).flatten()
        self.register_buffer("action_mid", (high + low) / 2)
        self.register_buffer("action_half", (high - low) / 2)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = (action.flatten(1) - self.action_mid) / self.action_half
        x = torch.cat([obs.flatten(1).float(), a], dim=1).unsqueeze(0).expand(2, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if i < last:
                x = torch.relu(x)
        q = x.squeeze(-1)
        return q[0], q[1]
