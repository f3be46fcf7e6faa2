"""A tiny simultaneous two-team game for the adapter's tests: units die on a schedule, the game ends by elimination
or a time limit, and the winner is told in the infos."""
from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Duel(ParallelEnv):
    """2 v 2: each step every live agent's reward is its action (0 or 1); `deaths` {agent: step} removes agents; the
    game ends when a team is gone (the other wins) or after `max_steps` (a draw: truncation)."""

    metadata = {"name": "duel_v0"}

    def __init__(self, deaths: dict | None = None, max_steps: int = 5, masked: bool = True):
        self.possible_agents = ["red_0", "red_1", "blue_0", "blue_1"]
        self.deaths, self.max_steps, self.masked = dict(deaths or {}), max_steps, masked
        self._obs = spaces.Dict({"observation": spaces.Box(0, 10, (3,), np.float32),
                                 "action_mask": spaces.Box(0, 1, (2,), np.int8)})
        self.actions_seen: list[dict] = []

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return self._obs

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return spaces.Discrete(2)

    def state(self):
        return np.array([self.t, len(self.agents)], np.float32)

    def _observe(self, agent):
        mask = np.array([1, 1 if self.masked is False or self.t % 2 == 0 else 0], np.int8)
        return {"observation": np.array([self.t, self.possible_agents.index(agent), 1], np.float32),
                "action_mask": mask}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.actions_seen.append(dict(actions))
        self.t += 1
        rewards = {a: float(actions[a]) for a in self.agents}
        dying = {a for a in self.agents if self.deaths.get(a) == self.t}
        alive = [a for a in self.agents if a not in dying]
        red, blue = any(a.startswith("red") for a in alive), any(a.startswith("blue") for a in alive)
        over = not (red and blue)
        truncated = self.t >= self.max_steps and not over
        winner = None if not (over or truncated) else ("red" if red and not blue else "blue" if blue and not red
                                                       else "draw")
        terms = {a: a in dying or over for a in self.agents}
        truncs = {a: truncated for a in self.agents}
        infos = {a: {} for a in self.agents}
        if winner is not None:
            for a in self.agents:
                infos[a]["outcome"] = 0 if winner == "draw" else (1 if a.startswith(winner) else -1)
        observations = {a: self._observe(a) for a in self.agents}
        self.agents = [] if (over or truncated) else alive
        return observations, rewards, terms, truncs, infos


class Mixed(ParallelEnv):
    """Agents of two kinds, as MPE's predator-prey: `big_0` sees Box(2, 2) and has 3 actions (a Box(3,) action with
    `boxes`), `small_0` and `small_1` see Box(2,) and have 2 (a Box(2,) action). Each step an agent's reward is its
    action's first entry and it sees [t, its index] (the big one [[t, index], [t, t]]); the game ends after
    `max_steps`."""

    metadata = {"name": "mixed_v0"}

    def __init__(self, boxes: bool = False, max_steps: int = 4):
        self.possible_agents = ["big_0", "small_0", "small_1"]
        self.boxes, self.max_steps = boxes, max_steps
        self.actions_seen: list[dict] = []

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return spaces.Box(-10, 10, (2, 2) if agent == "big_0" else (2,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        n = 3 if agent == "big_0" else 2
        return spaces.Box(-1, 1, (n,), np.float32) if self.boxes else spaces.Discrete(n)

    def state(self):
        return np.array([self.t], np.float32)

    def _observe(self, agent):
        row = [self.t, self.possible_agents.index(agent)]
        return np.array([row, [self.t, self.t]] if agent == "big_0" else row, np.float32)

    reset = Duel.reset  # every agent back, t = 0

    def step(self, actions):
        self.actions_seen.append(dict(actions))
        self.t += 1
        rewards = {a: float(np.asarray(actions[a]).ravel()[0]) for a in self.agents}
        over = self.t >= self.max_steps
        observations = {a: self._observe(a) for a in self.agents}
        terms, truncs = {a: False for a in self.agents}, {a: over for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [] if over else list(self.agents)
        return observations, rewards, terms, truncs, infos
