"""An env that reports an episode fact in its info, for env.info_keys through the runtime (a user's own module:
forked actors inherit it, Ray's workers import it by name).

`AlternatingSuccessEnv`: episodes of LENGTH steps, reward 1 a step; each env succeeds every other episode. Envs
whose first seed is even start with a success, the others with a failure, so the B envs of an actor (seeded
seed, seed + 1, ...), whose episodes end together, are half successes at every episode end and any window of
whole ends averages 0.5 exactly. `bonus` is reported by the successes only: its mean is 1, not 0.5.
"""
from __future__ import annotations

import gymnasium
import numpy as np

LENGTH = 5


class AlternatingSuccessEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self):
        self.steps, self.episodes, self.parity = 0, 0, None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.parity is None:
            self.parity = (seed or 0) % 2
        self.steps = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.steps += 1
        info = {}
        if self.steps == LENGTH:
            success = (self.episodes + self.parity) % 2 == 0
            info = {"is_success": success, **({"bonus": 1} if success else {})}
            self.episodes += 1
        return np.zeros(4, np.float32), 1.0, self.steps == LENGTH, False, info
