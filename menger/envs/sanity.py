"""Tiny numpy environments for sanity checks and fault injection, registered with gymnasium.

* ``menger/Bandit-v0``: a one-step contextual bandit. Learning it proves that observations, actions and
  rewards line up; a random policy earns 1/num_arms, the right one earns 1.
* ``menger/Memory-v0``: a bit is shown at t=0 and must be answered at the last step; a memoryless policy
  earns 0.5 on average, one with memory earns 1. It proves that a recurrent core carries state.
* ``menger/Catch-v0``: bsuite's Catch drawn as an 80x40 uint8 image: a ball falls one row a step and the
  paddle (left / stay / right) must be under it at the bottom: +1 or -1 after 9 steps; random play earns
  about -0.6. It proves that the image path (uint8 frames, CNN encoder) and delayed credit work, and it
  autoresets on the NEXT step like ALE's ``AtariVectorEnv``, so that path is exercised too.
* ``menger/Faulty-v0`` (single env, stepped in a loop) and ``menger/FaultyVector-v0`` (vectorised): emit
  NaN/Inf or raise in ``step``/``reset`` on demand, for testing how Menger handles broken envs.

The other vector envs autoreset in the SAME step and keep their whole state in numpy attributes, so they
train fast and can be snapshotted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


class BanditVectorEnv(gymnasium.vector.VectorEnv):
    """Contextual bandit: observation is a one-hot context c, reward is 1 for action c and 0 otherwise."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, num_arms: int = 4):
        self.num_envs = num_envs
        self.num_arms = num_arms
        self.single_observation_space = spaces.Box(0.0, 1.0, (num_arms,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(num_arms)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.context = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.context = self.np_random.integers(0, self.num_arms, self.num_envs)
        return self._obs(), {}

    def step(self, actions: np.ndarray):
        reward = (np.asarray(actions) == self.context).astype(np.float32)
        self.context = self.np_random.integers(0, self.num_arms, self.num_envs)
        terminated = np.ones(self.num_envs, dtype=np.bool_)
        return self._obs(), reward, terminated, np.zeros(self.num_envs, dtype=np.bool_), {}

    def _obs(self) -> np.ndarray:
        return np.eye(self.num_arms, dtype=np.float32)[self.context]


class MemoryVectorEnv(gymnasium.vector.VectorEnv):
    """Remember a bit: obs is [bit is 0, bit is 1, answer now]; the cue shows only at t=0.

    Actions before the last step are ignored; at the last step reward is 1 when the action equals the bit.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, length: int = 4):
        if length < 2:
            raise ValueError(f"length must be >= 2 so the cue and the question are apart, got {length}.")
        self.num_envs = num_envs
        self.length = length
        self.single_observation_space = spaces.Box(0.0, 1.0, (3,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.bit = np.zeros(num_envs, dtype=np.int64)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.bit = self.np_random.integers(0, 2, self.num_envs)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        return self._obs(), {}

    def step(self, actions: np.ndarray):
        answering = self.t == self.length - 1
        reward = (answering & (np.asarray(actions) == self.bit)).astype(np.float32)
        self.t = self.t + 1
        self.bit = np.where(answering, self.np_random.integers(0, 2, self.num_envs), self.bit)
        self.t[answering] = 0
        return self._obs(), reward, answering, np.zeros(self.num_envs, dtype=np.bool_), {}

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.num_envs, 3), dtype=np.float32)
        at_start = self.t == 0
        obs[at_start, self.bit[at_start]] = 1.0
        obs[:, 2] = self.t == self.length - 1
        return obs


class CatchVectorEnv(gymnasium.vector.VectorEnv):
    """bsuite Catch (Osband et al. 2020) as pixels: ROWS x COLS cells of SCALE x SCALE pixels, one channel."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
    ROWS, COLS, SCALE = 10, 5, 8

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        shape = (1, self.ROWS * self.SCALE, self.COLS * self.SCALE)
        self.single_observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        self.single_action_space = spaces.Discrete(3)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.ball_row = np.zeros(num_envs, dtype=np.int64)
        self.ball_col = np.zeros(num_envs, dtype=np.int64)
        self.paddle = np.zeros(num_envs, dtype=np.int64)
        self.needs_reset = np.zeros(num_envs, dtype=np.bool_)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._start(np.ones(self.num_envs, dtype=np.bool_))
        return self._obs(), {}

    def _start(self, rows: np.ndarray) -> None:
        self.ball_row[rows] = 0
        self.ball_col[rows] = self.np_random.integers(0, self.COLS, int(rows.sum()))
        self.paddle[rows] = self.COLS // 2
        self.needs_reset[rows] = False

    def step(self, actions: np.ndarray):
        resetting = self.needs_reset.copy()
        playing = ~resetting
        moves = np.asarray(actions, dtype=np.int64) - 1
        self.paddle = np.where(playing, np.clip(self.paddle + moves, 0, self.COLS - 1), self.paddle)
        self.ball_row = np.where(playing, self.ball_row + 1, self.ball_row)
        landed = playing & (self.ball_row == self.ROWS - 1)
        reward = np.where(landed, np.where(self.paddle == self.ball_col, 1.0, -1.0), 0.0).astype(np.float32)
        self._start(resetting)
        self.needs_reset = landed
        return self._obs(), reward, landed, np.zeros(self.num_envs, dtype=np.bool_), {}

    def _obs(self) -> np.ndarray:
        cells = np.zeros((self.num_envs, self.ROWS, self.COLS), dtype=np.uint8)
        envs = np.arange(self.num_envs)
        cells[envs, self.ball_row, self.ball_col] = 255
        cells[envs, self.ROWS - 1, self.paddle] = 255
        pixels = cells.repeat(self.SCALE, axis=1).repeat(self.SCALE, axis=2)
        return pixels[:, None]


@dataclass(frozen=True)
class FaultPlan:
    """Which faults to inject; step numbers count ``step`` calls since the env was built, from 1.

    Attributes:
        nan_obs_at: the step whose observation holds NaN.
        inf_reward_at: the step whose reward is +Inf.
        raise_at: the step that raises ``RuntimeError``.
        reset_failures: how many resets raise before one succeeds; -1 makes every reset raise.
    """

    nan_obs_at: int | None = None
    inf_reward_at: int | None = None
    raise_at: int | None = None
    reset_failures: int = 0

    def check_reset(self, reset_number: int) -> None:
        if self.reset_failures < 0 or reset_number <= self.reset_failures:
            raise RuntimeError(f"injected reset failure (reset number {reset_number})")

    def check_step(self, step_number: int) -> None:
        if step_number == self.raise_at:
            raise RuntimeError(f"injected step failure at step {step_number}")


class FaultyEnv(gymnasium.Env):
    """A single env with 4 float observations, 2 actions, reward 1, episodes of ``episode_length`` steps.

    ``faulty_seed`` confines the faults to the env first reset with that seed (in Menger's loop mode, env
    index i of ``make_vec_env(..., seed=s)`` gets seed s + i), so one env of a batch can misbehave alone.
    """

    def __init__(self, episode_length: int = 10, faulty_seed: int | None = None, **faults: Any):
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode_length = episode_length
        self.faulty_seed = faulty_seed
        self.plan = FaultPlan(**faults)
        self.steps_taken = 0
        self.resets = 0
        self.t = 0
        self.faulty: bool | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self.faulty is None:
            self.faulty = self.faulty_seed is None or seed == self.faulty_seed
        self.resets += 1
        if self.faulty:
            self.plan.check_reset(self.resets)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps_taken += 1
        self.t += 1
        obs, reward = self._obs(), 1.0
        if self.faulty:
            self.plan.check_step(self.steps_taken)
            if self.steps_taken == self.plan.nan_obs_at:
                obs[0] = np.nan
            if self.steps_taken == self.plan.inf_reward_at:
                reward = float("inf")
        return obs, reward, self.t >= self.episode_length, False, {}

    def _obs(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32)


class FaultyVectorEnv(gymnasium.vector.VectorEnv):
    """The vectorised ``FaultyEnv`` (NEXT_STEP autoreset, like most native vector envs).

    NaN/Inf faults hit sub-env ``faulty_index`` only; ``raise_at`` and reset failures hit the whole env,
    as they would in a real vectorised simulator.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, episode_length: int = 10, faulty_index: int = 0, **faults: Any):
        self.num_envs = num_envs
        self.episode_length = episode_length
        self.faulty_index = faulty_index
        self.plan = FaultPlan(**faults)
        self.single_observation_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.steps_taken = 0
        self.resets = 0
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.prev_done = np.zeros(num_envs, dtype=np.bool_)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.resets += 1
        self.plan.check_reset(self.resets)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self.prev_done = np.zeros(self.num_envs, dtype=np.bool_)
        return self._obs(), {}

    def step(self, actions: np.ndarray):
        self.steps_taken += 1
        self.plan.check_step(self.steps_taken)
        self.t = np.where(self.prev_done, 0, self.t + 1)
        obs = self._obs()
        reward = np.where(self.prev_done, 0.0, 1.0).astype(np.float32)
        if self.steps_taken == self.plan.nan_obs_at:
            obs[self.faulty_index, 0] = np.nan
        if self.steps_taken == self.plan.inf_reward_at:
            reward[self.faulty_index] = np.inf
        terminated = self.t >= self.episode_length
        self.prev_done = terminated
        return obs, reward, terminated, np.zeros(self.num_envs, dtype=np.bool_), {}

    def _obs(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, (self.num_envs, 4)).astype(np.float32)


SANITY_ENV_IDS = ("menger/Bandit-v0", "menger/Memory-v0", "menger/Catch-v0", "menger/Faulty-v0",
                  "menger/FaultyVector-v0")


def register_sanity_envs() -> None:
    """Make the sanity envs known to gymnasium (and so to ``make_vec_env``); safe to call twice."""
    if SANITY_ENV_IDS[0] in gymnasium.registry:
        return
    gymnasium.register("menger/Bandit-v0", vector_entry_point="menger.envs.sanity:BanditVectorEnv")
    gymnasium.register("menger/Memory-v0", vector_entry_point="menger.envs.sanity:MemoryVectorEnv")
    gymnasium.register("menger/Catch-v0", vector_entry_point="menger.envs.sanity:CatchVectorEnv")
    gymnasium.register("menger/Faulty-v0", entry_point="menger.envs.sanity:FaultyEnv")
    gymnasium.register("menger/FaultyVector-v0", vector_entry_point="menger.envs.sanity:FaultyVectorEnv")
