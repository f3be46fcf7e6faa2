"""One policy for the agents of a game whose spaces differ: each agent's spaces padded to common ones, as
parameter sharing across heterogeneous agents does it (Terry et al. 2020, "Revisiting Parameter Sharing in
Multi-Agent Deep Reinforcement Learning"; SuperSuit's pad_observations, pad_action_space, agent_indicator)::

    game = PaddedAgents(simple_tag_v3.parallel_env())  # adversaries see Box(16,), good agents Box(14,)
    game.observation_space(agent)   # Box(18,): the agent's own observation flattened, zeros after it, then a
                                    # one-hot of its kind (the agents that share one pair of spaces)
    game.action_space(agent)        # Discrete: the largest, and each info's action_mask allows the agent's own
                                    # actions; Box: the widest, and an agent acts with its leading entries

A kind is the set of agents with the same observation and action spaces, numbered in the order of
`possible_agents`. Observations must be Boxes; actions all Discrete or all Box. Anything else is refused,
saying which agents differ. `multiagent_vec_env` wraps a simultaneous (Parallel) game in it when its agents' spaces
differ, so the generic multi-agent preset plays every agent of any such game with one network; a game it cannot
pad is refused only where the learned agents differ (`env.multiagent.learn` to agents of one kind is the way out).
"""
from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

MASK_KEY = "action_mask"


def spaces_differ(game, agents=None) -> bool:
    """Whether some of `agents` (all of `game`'s by default) has other observation or action spaces than the
    first."""
    agents = list(game.possible_agents if agents is None else agents)
    first = (game.observation_space(agents[0]), game.action_space(agents[0]))
    return any((game.observation_space(a), game.action_space(a)) != first for a in agents[1:])


class PaddedAgents:
    """A PettingZoo ParallelEnv whose agents all have the same spaces (see the module doc); everything else is the
    wrapped game's."""

    def __init__(self, game, env_id: str = ""):
        self.game = game
        agents = self.possible_agents = list(game.possible_agents)
        observation = {a: game.observation_space(a) for a in agents}
        action = {a: game.action_space(a) for a in agents}
        name = env_id or "this env"
        for a in agents:
            if not isinstance(observation[a], gymnasium.spaces.Box):
                raise ValueError(f"{name}: its agents' spaces differ, and agent {a!r} observes {observation[a]}; one "
                                 "policy plays agents of different spaces by padding Box observations only: set "
                                 "env.multiagent.learn to agents with the same spaces")
        discrete = [isinstance(action[a], gymnasium.spaces.Discrete) for a in agents]
        boxes = [isinstance(action[a], gymnasium.spaces.Box) for a in agents]
        if not (all(discrete) or all(boxes)):
            raise ValueError(f"{name}: its agents' spaces differ, and their actions are not all Discrete or all Box "
                             f"({', '.join(f'{a}: {action[a]}' for a in agents)}); set env.multiagent.learn to agents "
                             "with the same spaces")
        kinds: list[tuple] = []
        for a in agents:
            if (observation[a], action[a]) not in kinds:
                kinds.append((observation[a], action[a]))
        self.kind = {a: kinds.index((observation[a], action[a])) for a in agents}
        self._width, self._count = max(int(np.prod(observation[a].shape)) for a in agents), len(kinds)
        lows = np.stack([self._pad(observation[a].low, a, 0.0) for a in agents])
        highs = np.stack([self._pad(observation[a].high, a, 1.0) for a in agents])
        self._observation = gymnasium.spaces.Box(lows.min(axis=0), highs.max(axis=0), lows.shape[1:], np.float32)
        self._discrete = all(discrete)
        if self._discrete:
            self._n = {a: int(action[a].n) for a in agents}
            self._action = gymnasium.spaces.Discrete(max(self._n.values()))
            self._masks = {a: (np.arange(self._action.n) < self._n[a]).astype(np.int8) for a in agents}
        else:
            self._dims = {a: int(np.prod(action[a].shape)) for a in agents}
            self._own_action = action
            dims = max(self._dims.values())
            low = np.full((len(agents), dims), np.inf, np.float32)
            high = np.full((len(agents), dims), -np.inf, np.float32)
            for i, a in enumerate(agents):
                low[i, :self._dims[a]] = np.asarray(action[a].low, np.float32).ravel()
                high[i, :self._dims[a]] = np.asarray(action[a].high, np.float32).ravel()
            low, high = low.min(axis=0), high.max(axis=0)
            unused = low > high  # entries no agent has
            low[unused], high[unused] = -1.0, 1.0
            self._action = gymnasium.spaces.Box(low, high, (dims,), np.float32)

    # ----- PettingZoo's ParallelEnv -----------------------------------------------------------------------------
    @property
    def agents(self) -> list[str]:
        return self.game.agents

    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        return self._observation

    def action_space(self, agent: str) -> gymnasium.Space:
        return self._action

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.game.reset(seed=seed, options=options)
        return self._observations(observations), self._infos(infos, observations)

    def step(self, actions: dict[str, Any]):
        observations, rewards, terminations, truncations, infos = self.game.step(
            {a: self._own(a, action) for a, action in actions.items()})
        return self._observations(observations), rewards, terminations, truncations, self._infos(infos, observations)

    def close(self) -> None:
        self.game.close()

    def __getattr__(self, name: str):  # state(), render(), metadata, unwrapped: the game's own
        if name == "game":
            raise AttributeError(name)
        return getattr(self.game, name)

    # ----- padding ------------------------------------------------------------------------------------------------
    def _pad(self, values, agent: str, one_hot: float) -> np.ndarray:
        """`agent`'s `values` (an observation, or a bound of its space) flattened, zeros up to the widest, then
        `one_hot` at its kind among as many entries as there are kinds."""
        flat = np.asarray(values, np.float32).ravel()
        out = np.zeros(self._width + self._count, np.float32)
        out[:flat.size] = flat
        out[self._width + self.kind[agent]] = one_hot
        return out

    def _observations(self, observations: dict) -> dict:
        return {a: self._pad(obs, a, 1.0) for a, obs in observations.items()}

    def _infos(self, infos: dict, observations: dict) -> dict:
        """Each agent's info with its action mask over the padded actions (its own actions; the env's own mask
        over them, where it gives one)."""
        if not self._discrete:
            return infos
        out = dict(infos)
        for a in observations:
            info = dict(infos.get(a) or {})
            own = info.get(MASK_KEY)
            mask = self._masks[a].copy()
            if own is not None:
                mask[:self._n[a]] = np.asarray(own, np.int8)[:self._n[a]]
            info[MASK_KEY] = mask
            out[a] = info
        return out

    def _own(self, agent: str, action):
        if self._discrete:
            return int(min(int(action), self._n[agent] - 1))  # a masked policy never picks past its own actions
        space = self._own_action[agent]
        own = np.asarray(action, np.float32).ravel()[:self._dims[agent]].reshape(space.shape)
        return np.clip(own, space.low, space.high).astype(space.dtype)
