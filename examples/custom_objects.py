"""Train on an env and a network defined in this script, through the Python API.

    python examples/custom_objects.py                       # actors in forked processes
    python examples/custom_objects.py --launcher threads    # actors in threads of this process

`MyEnv` and `MyNet` are passed as classes: the run's config.yaml records them as `__main__:MyEnv` and
`__main__:MyNet`, and the actors (threads, or processes forked from this one) find them in this script. Loading
the trained policy takes them again. With `runtime.launcher: ray` they would have to live in a module every node
can import (docs/guides/python-api.md). Exits 0 when the trained policy points at the cue.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import menger


class MyEnv(gym.Env[np.ndarray, np.int64]):
    """Point at the cue: each step lights one of `size` cells; naming the lit cell earns 1. An episode is `length`
    steps, so a policy that reads the cue returns `length`, and one that guesses returns length / size."""

    def __init__(self, size: int = 4, length: int = 8) -> None:
        self.size, self.length = size, length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (size,), np.float32)
        self.action_space = gym.spaces.Discrete(size)
        self.cue, self.steps = 0, 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.steps = 0
        return self._light(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = float(int(action) == self.cue)
        self.steps += 1
        return self._light(), reward, self.steps >= self.length, False, {}

    def _light(self) -> np.ndarray:
        self.cue = int(self.np_random.integers(self.size))
        cells = np.zeros(self.size, np.float32)
        cells[self.cue] = 1.0
        return cells


class MyNet(nn.Module):
    """An encoder (it has `features_dim`): Menger puts its action and value heads on the features it returns."""

    def __init__(self, obs_space: gym.Space[Any], action_space: gym.Space[Any], width: int = 32) -> None:
        super().__init__()
        self.features_dim = width
        self.body = nn.Sequential(nn.Linear(int(np.prod(obs_space.shape or (1,))), width), nn.Tanh())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features: torch.Tensor = self.body(obs)
        return features


EXPERIMENT: dict[str, Any] = {
    "name": "custom-objects",
    "algo": "ppo",
    "ppo": {"lr": 0.003, "epochs": 4, "minibatches": 2},
    "runtime": {"actors": 2, "envs_per_actor": 8, "unroll_length": 16},
    "stop": {"target_return": 7.5, "env_frames": 60_000, "wall_clock_s": 120},
    "checkpoint": {"interval_s": 0},
    "log": {"progress": False, "tensorboard": False},
}


def hit_rate(policy: menger.Policy, steps: int = 200, seed: int = 123) -> float:
    """How often the policy names the lit cell, acting deterministically."""
    env, hits = MyEnv(), 0
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        action = policy.act(obs)
        hits += int(action) == env.cue
        obs, _, terminated, truncated, _ = env.step(np.int64(action))
        if terminated or truncated:
            obs, _ = env.reset()
    return hits / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--launcher", choices=["threads", "processes"], default="processes")
    parser.add_argument("--run-dir", help="where the run goes (default runs/custom-objects-TIME)")
    args = parser.parse_args(argv)

    result = menger.train(EXPERIMENT, [f"runtime.launcher={args.launcher}"], run_dir=args.run_dir,
                          env=MyEnv, network=MyNet, seed=1)
    policy = menger.load_policy(result.run_dir, env=MyEnv, network=MyNet)
    rate = hit_rate(policy)
    print(f"{result.run_dir}: reached the target {result.reached_target}, names the lit cell {rate:.0%} of the time")
    return 0 if rate >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
