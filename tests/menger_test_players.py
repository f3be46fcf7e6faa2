"""Players and games of a user's own package, for tests/test_match.py (imported only with allow_import)."""
from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv


class FirstLegal:
    """The lowest legal action; built with no arguments."""

    def __init__(self):
        self.resets = 0

    def reset(self):
        self.resets += 1

    def act(self, observation, action_mask):
        return int(np.flatnonzero(action_mask)[0])


class Fixed:
    """Always the same action; `seed` is taken and ignored (a factory with seed=)."""

    def __init__(self, seed=0, action=0):
        self.seed, self.action, self.seen = seed, action, []

    def act(self, observation, action_mask):
        self.seen.append(observation)
        return self.action


class NoAct:
    pass


class HighCard(AECEnv):
    """Two agents pick a card 0..2 in turn; the higher card wins (+1 / -1), equal cards draw. With
    `first_wins` the first agent wins whatever is played; with `outcome_only` the rewards stay 0 and
    infos[agent]["outcome"] says who won; `endless` never ends."""

    metadata = {"name": "high_card_v0"}

    def __init__(self, first_wins=False, outcome_only=False, endless=False):
        super().__init__()
        self.possible_agents = ["player_0", "player_1"]
        self.first_wins, self.outcome_only, self.endless = first_wins, outcome_only, endless
        self._action_space, self._observation_space = spaces.Discrete(3), spaces.Box(0, 2, (2,), np.int64)

    def action_space(self, agent):
        return self._action_space

    def observation_space(self, agent):
        return self._observation_space

    def observe(self, agent):
        return np.array(self.cards, np.int64)

    def reset(self, seed=None, options=None):
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.cards, self.turn, self.agent_selection = [0, 0], 0, self.agents[0]

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            return self._was_dead_step(action)
        self._cumulative_rewards[agent] = 0
        index = self.possible_agents.index(agent)
        self.cards[index] = int(action)
        self.turn += 1
        self.agent_selection = self.possible_agents[1 - index]
        if index == 1 and not self.endless:
            first, second = self.cards
            outcome = 1 if self.first_wins else int(np.sign(first - second))
            results = {"player_0": outcome, "player_1": -outcome}
            if self.outcome_only:
                self.infos = {a: {"outcome": results[a]} for a in self.agents}
            else:
                self.rewards = dict(results)
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()


class TeamSum(ParallelEnv):
    """red_0, red_1 against blue_0, blue_1, one simultaneous move: the team whose actions sum higher wins."""

    metadata = {"name": "team_sum_v0"}
    render_mode = None

    def __init__(self):
        self.possible_agents = ["red_0", "red_1", "blue_0", "blue_1"]
        self._action_space, self._observation_space = spaces.Discrete(3), spaces.Discrete(1)

    def action_space(self, agent):
        return self._action_space

    def observation_space(self, agent):
        return self._observation_space

    def reset(self, seed=None, options=None):
        self.agents = self.possible_agents[:]
        return {agent: 0 for agent in self.agents}, {agent: {} for agent in self.agents}

    def step(self, actions):
        red = sum(actions[a] for a in actions if a.startswith("red"))
        blue = sum(actions[a] for a in actions if a.startswith("blue"))
        sign = int(np.sign(red - blue))
        rewards = {a: float(sign if a.startswith("red") else -sign) for a in self.agents}
        done = dict.fromkeys(self.agents, True)
        observations, infos = {a: 0 for a in self.agents}, {a: {} for a in self.agents}
        self.agents = []
        return observations, rewards, done, dict.fromkeys(done, False), infos


def high_card(**kwargs):
    return HighCard(**kwargs)


def team_sum():
    return TeamSum()


BOTS = {"first": FirstLegal}  # the env module's own bots, as menger.envs.wargame keeps its ladder
