"""Tasks that need memory, for recurrent agents (R2D2, an LSTM core): what the observation leaves out must be
inferred from the past.

* ``menger/CartPoleNoVel-v0``: CartPole-v1 with the two velocities (cart velocity, pole angular velocity) removed
  from the observation, which is ``[cart position, pole angle]``. One frame says where the pole is but not where
  it is going; an agent must difference successive frames in its recurrent state to balance it (rl-zoo's
  ``CartPoleNoVel-v1`` is the same task). Dynamics, rewards, the 500-step time limit and the NEXT_STEP autoreset
  are CartPole-v1's own; it is vectorised like CartPole (gymnasium's ``CartPoleVectorEnv``).
* ``menger/AcrobotNoVel-v0``, ``menger/MountainCarNoVel-v0``, ``menger/PendulumNoVel-v0`` and
  ``menger/MountainCarContinuousNoVel-v0``: the other classic-control tasks with their velocities masked out of
  the observation the same way (rl-zoo's ``MaskVelocityWrapper``): Acrobot keeps the cosines and sines of its two
  angles, MountainCar its position, Pendulum the cosine and sine of its angle. The env under the mask is
  gymnasium's own (its dynamics, rewards and time limit), stepped one by one.
* ``menger/Memory-v0`` (in ``menger.envs.sanity``): a bit is shown at the first step and must be answered at the
  last: an agent must hold one bit for the episode's length.
"""
from __future__ import annotations

import functools

import gymnasium
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


class MaskedVelocity(gymnasium.ObservationWrapper):
    """An env whose observation keeps only the entries `seen` (the velocities left out)."""

    def __init__(self, env: gymnasium.Env, seen):
        super().__init__(env)
        self.seen = np.asarray(seen)
        self.observation_space = spaces.Box(env.observation_space.low[self.seen],
                                            env.observation_space.high[self.seen], dtype=np.float32)

    def observation(self, observation):
        return np.asarray(observation, np.float32)[self.seen]


# the masked id -> (gymnasium's id, the observation entries kept)
MASKED_VELOCITY = {
    "menger/AcrobotNoVel-v0": ("Acrobot-v1", (0, 1, 2, 3)),         # cos/sin of both angles; no angular velocities
    "menger/MountainCarNoVel-v0": ("MountainCar-v0", (0,)),         # the position; no velocity
    "menger/PendulumNoVel-v0": ("Pendulum-v1", (0, 1)),             # cos/sin of the angle; no angular velocity
    "menger/MountainCarContinuousNoVel-v0": ("MountainCarContinuous-v0", (0,)),
}


def masked_velocity_env(masked_id: str, **kwargs) -> gymnasium.Env:
    """gymnasium's env behind `masked_id`, its velocities masked out (`MASKED_VELOCITY`)."""
    env_id, seen = MASKED_VELOCITY[masked_id]
    return MaskedVelocity(gymnasium.make(env_id, disable_env_checker=True, **kwargs), seen)


MEMORY_ENV_IDS = ("menger/CartPoleNoVel-v0", *MASKED_VELOCITY)


def register_memory_envs() -> None:
    """Make the memory tasks known to gymnasium (and so to ``make_vec_env``); safe to call twice."""
    if MEMORY_ENV_IDS[0] in gymnasium.registry:
        return
    gymnasium.register("menger/CartPoleNoVel-v0", entry_point="menger.envs.memory:CartPoleNoVelEnv",
                       vector_entry_point="menger.envs.memory:CartPoleNoVelVectorEnv", max_episode_steps=500,
                       reward_threshold=475.0)
    for masked_id in MASKED_VELOCITY:  # the time limit is the wrapped env's own
        gymnasium.register(masked_id, entry_point=functools.partial(masked_velocity_env, masked_id),
                           disable_env_checker=True)
