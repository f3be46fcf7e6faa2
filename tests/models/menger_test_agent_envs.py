"""A tiny env whose observation carries the multi-agent entries a multi-agent adapter writes.

`AgentMatchEnv(agents=2)`: each episode is played by one agent, drawn at reset and shown as a one-hot `agent_id`;
`obs` shows a target sign; agent k is paid 1 for action (target > 0) xor (k odd), so agents must act differently
on the same `obs`. `critic_state` holds the target and the agent index, the global state a centralised critic reads.
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class AgentMatchEnv(gymnasium.Env):
    def __init__(self, agents: int = 2, length: int = 8):
        self.agents, self.length = agents, length
        self.observation_space = spaces.Dict({
            "obs": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "agent_id": spaces.Box(0.0, 1.0, (agents,), np.float32),
            "critic_state": spaces.Box(-1.0, float(agents), (2,), np.float32),
        })
        self.action_space = spaces.Discrete(2)
        self.agent, self.target, self.t = 0, 0.0, 0

    def _obs(self):
        return {"obs": np.array([self.target, 1.0], np.float32),
                "agent_id": np.eye(self.agents, dtype=np.float32)[self.agent],
                "critic_state": np.array([self.target, self.agent], np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.agent, self.t = int(self.np_random.integers(self.agents)), 0
        self.target = float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {}

    def step(self, action):
        wanted = int(self.target > 0) ^ (self.agent % 2)
        reward = float(int(action) == wanted)
        self.t += 1
        self.target = float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), reward, False, self.t >= self.length, {}
