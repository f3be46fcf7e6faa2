"""User environments given to make_vec_env as 'module:ClassOrFactory' in the env tests."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

from menger.envs.sanity import BanditVectorEnv


class CounterEnv(gymnasium.Env):
    """Observation is the step count within the episode, so a reset observation is recognisable (0)."""

    def __init__(self, episode_length: int = 3):
        self.observation_space = spaces.Box(0.0, 1000.0, (1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode_length = episode_length
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, self.t >= self.episode_length, False, {}


class DictObsEnv(gymnasium.Env):
    """Dict observations with a float and an integer part; ``nan_at`` puts NaN in the float part at that step."""

    def __init__(self, nan_at: int | None = None):
        self.observation_space = spaces.Dict({
            "position": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
            "mask": spaces.MultiBinary(3),
        })
        self.action_space = spaces.Discrete(3)
        self.nan_at = nan_at
        self.steps_taken = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        self.steps_taken += 1
        obs = self._obs()
        if self.steps_taken == self.nan_at:
            obs["position"][1] = np.nan
        return obs, 0.5, False, self.steps_taken % 5 == 0, {}

    def _obs(self):
        return {
            "mask": self.np_random.integers(0, 2, 3).astype(np.int8),
            "position": self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32),
        }


class CounterVectorEnv(gymnasium.vector.VectorEnv):
    """Vector CounterEnv with autoreset DISABLED: the caller resets finished envs with a reset_mask.

    Env i ends after ``episode_length + i`` steps; ``nan_at`` puts NaN into env 0's observation at that step.
    """

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED}

    def __init__(self, num_envs: int, episode_length: int = 3, nan_at: int | None = None):
        self.num_envs = num_envs
        self.single_observation_space = spaces.Box(0.0, 1000.0, (1,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)
        self.lengths = episode_length + np.arange(num_envs)
        self.nan_at = nan_at
        self.steps_taken = 0
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        mask = (options or {}).get("reset_mask", np.ones(self.num_envs, dtype=bool))
        self.t[mask] = 0
        return self._obs(), {}

    def step(self, actions):
        self.steps_taken += 1
        self.t += 1
        obs = self._obs()
        if self.steps_taken == self.nan_at:
            obs[0, 0] = np.nan
        terminated = self.t >= self.lengths
        return obs, np.ones(self.num_envs, dtype=np.float32), terminated, np.zeros(self.num_envs, dtype=bool), {}

    def _obs(self):
        return self.t.astype(np.float32)[:, None]


def make_counter(episode_length: int = 3) -> CounterEnv:
    """A single-env factory (no num_envs argument)."""
    return CounterEnv(episode_length)


def make_bandit_vector(num_envs: int, num_arms: int = 3) -> BanditVectorEnv:
    """A vector-env factory (takes num_envs)."""
    return BanditVectorEnv(num_envs, num_arms)


NOT_AN_ENV = 42


class ScaledReward(gymnasium.RewardWrapper):
    """A user's own wrapper (env.wrappers): rewards times `scale`."""

    def __init__(self, env, scale: float = 2.0):
        super().__init__(env)
        self.scale = scale

    def reward(self, reward):
        return self.scale * reward


def limit_steps(env, steps: int = 5):
    """A wrapper given as a function: env -> wrapped env."""
    return gymnasium.wrappers.TimeLimit(env, max_episode_steps=steps)
