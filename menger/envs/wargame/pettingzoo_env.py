"""The wargame as a PettingZoo ``ParallelEnv`` over one game (and as an AEC env through PettingZoo's converter).

    from menger.envs.wargame import parallel_env
    env = parallel_env(team=["infantry", "tank", "sniper"], fog_of_war=False, render_mode="rgb_array")
    observations, infos = env.reset(seed=0)
    while env.agents:
        actions = {agent: env.action_space(agent).sample(observations[agent]["action_mask"])
                   for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)

Agents are ``red_0..red_{n-1}`` and ``blue_0..blue_{n-1}``. A unit that dies is terminated in that step
(its info says ``{"killed": True}``) and leaves ``agents`` for good. When the game ends, every agent still in
``agents`` is terminated (elimination, capture) or truncated (time limit) and its info holds ``"outcome"``
(+1 its team won, 0 draw, -1 lost) and ``"winner"`` ("red", "blue" or "draw").
"""

from __future__ import annotations

import warnings

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from menger.envs.wargame.config import WargameConfig, make_config
from menger.envs.wargame.core import WINNER_NAMES, WargameBatch
from menger.envs.wargame.render import render_game


class WargameParallelEnv(ParallelEnv):
    metadata = {"name": "menger_wargame_v0", "render_modes": ["rgb_array"], "render_fps": 4,
                "is_parallelizable": True}

    def __init__(self, config: WargameConfig | None = None, render_mode: str | None = None, **kwargs):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'rgb_array' or None")
        self.config = make_config(config, **kwargs)
        self.render_mode = render_mode
        self.game = WargameBatch(self.config, num_games=1)
        n = self.config.num_units
        self.possible_agents = [f"red_{i}" for i in range(n)] + [f"blue_{i}" for i in range(n)]
        self._index = {agent: index for index, agent in enumerate(self.possible_agents)}
        layout = self.game.layout
        observation_space = spaces.Dict({
            "observation": spaces.Box(-1.0, 1.0, (layout.size,), dtype=np.float32),
            "action_mask": spaces.Box(0, 1, (layout.num_actions,), dtype=np.int8),
        })
        action_space = spaces.Discrete(layout.num_actions)
        self.observation_spaces = {agent: observation_space for agent in self.possible_agents}
        self.action_spaces = {agent: action_space for agent in self.possible_agents}
        self.state_space = spaces.Box(-1.0, 1.0, (self.game.state_size,), dtype=np.float32)
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        out = self.game.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._observations(out.obs), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, int]):
        """Agents left out of ``actions`` take the no-op; actions the mask forbids are no-ops too."""
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents not in play: {sorted(unknown)}; act only for env.agents")
        row = np.zeros((1, self.game.num_agents), dtype=np.int64)
        for agent, action in actions.items():
            row[0, self._index[agent]] = int(action)
        out = self.game.step(row)
        observations = self._observations(out.obs)
        rewards, terminations, truncations, infos = {}, {}, {}, {}
        ended = bool(out.done[0])
        for agent in self.agents:
            index = self._index[agent]
            killed = not out.alive[0, index]
            rewards[agent] = float(out.reward[0, index])
            terminations[agent] = killed or bool(out.terminated[0])
            truncations[agent] = not killed and bool(out.truncated[0])
            info = {"killed": True} if killed else {}
            if ended:
                info.update(outcome=int(out.outcome[0, index]), winner=WINNER_NAMES[int(out.winner[0])])
            infos[agent] = info
        self.agents = [agent for agent in self.agents if not (terminations[agent] or truncations[agent])]
        return observations, rewards, terminations, truncations, infos

    def _observations(self, obs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        return {agent: {"observation": obs["observation"][0, self._index[agent]],
                        "action_mask": obs["action_mask"][0, self._index[agent]]} for agent in self.agents}

    def state(self) -> np.ndarray:
        return self.game.state()[0]

    def batched(self, num_games: int) -> WargameBatch:
        """`num_games` games of this env's settings stepped at once: what Menger's actors play
        (`menger.envs.multiagent_batch`)."""
        return WargameBatch(self.config, num_games=num_games)

    def render(self):
        if self.render_mode is None:
            warnings.warn("render() called without render_mode; make the env with render_mode='rgb_array'")
            return None
        return render_game(self.game, 0)

    def close(self) -> None:
        pass


def parallel_env(config: WargameConfig | None = None, render_mode: str | None = None, **kwargs) -> WargameParallelEnv:
    """The wargame as a PettingZoo ParallelEnv; keyword arguments are ``WargameConfig`` fields."""
    return WargameParallelEnv(config, render_mode=render_mode, **kwargs)


def env(config: WargameConfig | None = None, render_mode: str | None = None, **kwargs):
    """The wargame as a PettingZoo AEC env (``parallel_to_aec`` of ``parallel_env``)."""
    return parallel_to_aec(parallel_env(config, render_mode=render_mode, **kwargs))
