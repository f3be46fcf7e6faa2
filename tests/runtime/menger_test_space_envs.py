"""Tiny envs with composite action spaces: each step shows a target per action component and pays for matching it.

`MatchEnv(kind=...)`: observation = the targets (one-hot for discrete components, the value for a Box one);
reward per step = the mean over components of 1 for a matched discrete component and 1 - |a - x| / 2 for a Box
one (a in [-1, 1]), so a step pays at most 1 and an episode of `length` steps at most `length`. The next
step's targets are drawn afresh, so acting well needs each component read from its own part of the observation.

kinds: multidiscrete (MultiDiscrete([3, 3, 3])), multibinary (MultiBinary(4)), tuple (Tuple(Discrete(3),
Box(-1, 1, (1,)))), dict (Dict(pick=Discrete(3), aim=Box(-1, 1, (1,)))), boxes (Tuple(Box(1), Box(1))),
discrete_tuple (Tuple(Discrete(2), MultiBinary(2))).
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

N = 3


def _space(kind: str) -> spaces.Space:
    box = spaces.Box(-1.0, 1.0, (1,), np.float32)
    return {
        "multidiscrete": spaces.MultiDiscrete([N, N, N]),
        "multibinary": spaces.MultiBinary(4),
        "tuple": spaces.Tuple((spaces.Discrete(N), box)),
        "dict": spaces.Dict({"pick": spaces.Discrete(N), "aim": box}),
        "boxes": spaces.Tuple((box, spaces.Box(-1.0, 1.0, (1,), np.float32))),
        "discrete_tuple": spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(2))),
    }[kind]


def _components(space: spaces.Space) -> list[spaces.Space]:
    """The space's parts, each a Discrete(n) or a Box(1) target."""
    if isinstance(space, spaces.Tuple):
        return [c for sub in space.spaces for c in _components(sub)]
    if isinstance(space, spaces.Dict):
        return [c for sub in space.spaces.values() for c in _components(sub)]
    if isinstance(space, spaces.MultiDiscrete):
        return [spaces.Discrete(int(n)) for n in space.nvec]
    if isinstance(space, spaces.MultiBinary):
        return [spaces.Discrete(2)] * int(space.n)
    return [space]


def _flatten_action(space: spaces.Space, action) -> list:
    if isinstance(space, spaces.Tuple):
        return [v for sub, a in zip(space.spaces, action) for v in _flatten_action(sub, a)]
    if isinstance(space, spaces.Dict):
        return [v for key, sub in space.spaces.items() for v in _flatten_action(sub, action[key])]
    if isinstance(space, spaces.Discrete):
        return [int(action)]
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        return [int(a) for a in np.asarray(action).ravel()]
    return [float(np.asarray(action).ravel()[0])]


class MatchEnv(gymnasium.Env):
    def __init__(self, kind: str = "multidiscrete", length: int = 8):
        self.kind, self.length = kind, length
        self.action_space = _space(kind)
        self.parts = _components(self.action_space)
        width = sum(p.n if isinstance(p, spaces.Discrete) else 1 for p in self.parts)
        self.observation_space = spaces.Box(-1.0, 1.0, (width,), np.float32)
        self.targets: list = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self._draw()
        return self._obs(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        paid = []
        for part, target, a in zip(self.parts, self.targets, _flatten_action(self.action_space, action)):
            paid.append(float(a == target) if isinstance(part, spaces.Discrete) else 1.0 - abs(a - target) / 2)
        self.t += 1
        self._draw()
        return self._obs(), float(np.mean(paid)), False, self.t >= self.length, {}

    def _draw(self) -> None:
        self.targets = [int(self.np_random.integers(p.n)) if isinstance(p, spaces.Discrete)
                        else float(self.np_random.uniform(-1, 1)) for p in self.parts]

    def _obs(self) -> np.ndarray:
        out = []
        for part, target in zip(self.parts, self.targets):
            out += list(np.eye(part.n)[target]) if isinstance(part, spaces.Discrete) else [target]
        return np.asarray(out, np.float32)


class FeaturesNet:
    """A user's encoder (has `features_dim`): Menger adds the LSTM core and the heads. Built lazily as a torch
    module so importing this file stays cheap."""

    def __new__(cls, observation_space, action_space, width: int = 32):
        import torch
        from torch import nn

        class _Features(nn.Module):
            def __init__(self):
                super().__init__()
                self.features_dim = width
                self.body = nn.Sequential(nn.Linear(int(np.prod(observation_space.shape)), width), nn.Tanh())

            def forward(self, obs: torch.Tensor) -> torch.Tensor:
                return self.body(obs.flatten(1))

        return _Features()


class MeanValueNet:
    """A user's whole policy network for Box actions: (mean [N, d], value [N]); Menger owns the log-std."""

    def __new__(cls, observation_space, action_space, width: int = 32, params: int | None = None):
        import torch
        from torch import nn

        from menger.models import num_action_params

        class _MeanValue(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(int(np.prod(observation_space.shape)), width), nn.Tanh())
                self.mean = nn.Linear(width, params or num_action_params(action_space))
                self.value = nn.Linear(width, 1)

            def forward(self, obs: torch.Tensor):
                hidden = self.body(obs.flatten(1))
                return self.mean(hidden), self.value(hidden).squeeze(-1)

        return _MeanValue()
