"""Tasks that need memory, for recurrent agents (R2D2, an LSTM core): what the observation leaves out must be
inferred from the past.

* ``menger/CartPoleNoVel-v0``: CartPole-v1 with the two velocities (cart velocity, pole angular velocity) removed
  from the observation, which is ``[cart position, pole angle]``. One frame says where the pole is but not where
  it is going; an agent must difference successive frames in its recurrent state to balance it (rl-zoo's
  ``CartPoleNoVel-v1`` is the same task). Dynamics, rewards, the 500-step time limit and the NEXT_STEP autoreset
  are CartPole-v1's own; it is vectorised like CartPole (gymnasium's ``CartPoleVectorEnv``).
* ``menger/Memory-v0`` (in ``menger.envs.sanity``): a bit is shown at the first step and must be answered at the
  last: an agent must hold one bit for the episode's length.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv
from gymnasium.vector.utils import batch_space

SEEN = np.array([0, 2])  # cart position, pole angle; velocities (1, 3) are hidden


def _positions_only(space: spaces.Box) -> spaces.Box:
    return spaces.Box(space.low[SEEN], space.high[SEEN], dtype=np.float32)


class CartPoleNoVelEnv(CartPoleEnv):
    """One CartPole-v1 whose observation is [cart position, pole angle] (for `gymnasium.make` and rendering)."""

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self.observation_space = _positions_only(self.observation_space)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs[SEEN], info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[SEEN], reward, terminated, truncated, info


class CartPoleNoVelVectorEnv(CartPoleVectorEnv):
    """CartPole-v1's vector env with the velocities removed from every observation."""

    def __init__(self, num_envs: int = 1, max_episode_steps: int = 500, render_mode: str | None = None):
        super().__init__(num_envs=num_envs, max_episode_steps=max_episode_steps, render_mode=render_mode)
        self.single_observation_space = _positions_only(self.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, num_envs)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return np.ascontiguousarray(obs[:, SEEN]), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return np.ascontiguousarray(obs[:, SEEN]), reward, terminated, truncated, info


MEMORY_ENV_IDS = ("menger/CartPoleNoVel-v0",)


def register_memory_envs() -> None:
    """Make the memory tasks known to gymnasium (and so to ``make_vec_env``); safe to call twice."""
    import gymnasium

    if MEMORY_ENV_IDS[0] in gymnasium.registry:
        return
    gymnasium.register("menger/CartPoleNoVel-v0", entry_point="menger.envs.memory:CartPoleNoVelEnv",
                       vector_entry_point="menger.envs.memory:CartPoleNoVelVectorEnv", max_episode_steps=500,
                       reward_threshold=475.0)
