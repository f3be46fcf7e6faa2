"""Multi-agent envs (PettingZoo AEC or Parallel) as a ``VecEnv`` of the seats one policy plays.

An actor learns for one policy. Of each of its G games, that policy plays k agents (`learn`: name patterns,
e.g. ``["player_0"]`` or ``["red_*"]``); every other agent is an *opponent*, acted for inside this env by an
`Opponents` object (frozen snapshots of the learner, the env's scripted bots, random play), batched per
opponent across the games. So the runtime sees a plain ``VecEnv`` of B = G x k rows, and its unrolls are the
learned policy's alone::

    envs = MultiAgentVecEnv(make_game, num_games=G, seed=s, learn=["player_0"], swap_seats=True)
    envs.set_opponents(opponents)        # who plays the other seats; random legal moves until then
    obs = envs.reset()                   # [G x k] rows: the learned agents of each game
    result = envs.step(actions)          # opponents act inside; a game that ends is reset in the same step
    envs.pop_results()                   # [(opponent name, score 1 / 0.5 / 0)] of the games that ended

Rules, as PettingZoo's: an agent that finishes is removed from its game; its row is ``valid=False`` until the
game ends and is reset (no transition to learn from). Action masks come through as the ``action_mask`` entry
of the observation (from the observation dict or the agent's info), which the policy honours. With
``swap_seats`` the learned group changes sides every game (player_0 one game, player_1 the next; red then
blue), so the policy learns every seat; both sides must then have the same spaces.

Observations are dicts: ``observation`` (the agent's own), ``action_mask``, ``agent_id`` (a one-hot of the agent's
index within its side, with ``agent_id=True``: shared parameters, or one network per agent) and
``critic_state`` (``critic="state"``: the env's global ``state()``; ``critic="team"``: every teammate's
observation side by side) that only the value function sees (MAPPO).

Turn-based (AEC) games step until it is a learned agent's turn again, so one row's reward is what its agent
accumulated between its moves (``last()``); they take one learned agent per game. Simultaneous (Parallel)
games take any number: each step every live agent acts.

A game's score for its learned side: the ``outcome`` the env puts in an agent's info at the end (1 win, 0 draw,
-1 loss; an opponent's counts negated), else the sign of the learned side's return minus the other side's.
"""
from __future__ import annotations

import fnmatch
import logging
from typing import Any, Callable, Protocol

import gymnasium
import numpy as np

from menger.envs.faults import new_stats
from menger.envs.multiagent_pad import PaddedAgents, spaces_differ

log = logging.getLogger("menger.envs")

MASK_KEY, AGENT_KEY, CRITIC_KEY, OBS_KEY = "action_mask", "agent_id", "critic_state", "observation"
CRITICS = ("local", "state", "team")


class Opponents(Protocol):
    """Who plays the seats the learner does not. Driven by `MultiAgentVecEnv`::

        name = opponents.assign(game)                    # at every game start: whom this game is against
        actions = opponents.act(name, raw, encoded)      # all the seats `name` plays this step, at once

    `raw` is the list of PettingZoo observations of those seats (what a scripted bot reads); `encoded` the same
    observations as the learned policy sees them, stacked (what a frozen copy of it reads)."""

    def assign(self, game: int) -> str: ...

    def act(self, name: str, raw: list, encoded: dict[str, np.ndarray]) -> np.ndarray: ...


class RandomOpponents:
    """Uniform random legal moves: the opponents of an env no league has set any for (probes, evaluation)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def assign(self, game: int) -> str:
        return "random"

    def act(self, name: str, raw: list, encoded: dict[str, np.ndarray]) -> np.ndarray:
        return random_legal(encoded, self.rng)


def random_legal(encoded: dict[str, np.ndarray], rng: np.random.Generator, num_actions: int | None = None):
    mask = encoded.get(MASK_KEY)
    if mask is None:
        return rng.integers(0, num_actions or 2, size=len(next(iter(encoded.values()))))
    weights = mask.astype(np.float64) + 1e-12 * (mask.sum(axis=1, keepdims=True) == 0)
    cumulative = np.cumsum(weights, axis=1)
    draws = rng.random(len(mask)) * cumulative[:, -1]
    return (cumulative < draws[:, None]).sum(axis=1)


def is_multiagent_env(env: Any) -> bool:
    from pettingzoo import AECEnv, ParallelEnv

    return isinstance(env, (AECEnv, ParallelEnv))


class MultiAgentVecEnv:
    """G PettingZoo games behind Menger's ``VecEnv`` interface, one row per learned agent (see the module doc)."""

    autoreset_mode = gymnasium.vector.AutoresetMode.SAME_STEP

    def __init__(self, make_game: Callable[[], Any], num_games: int, *, seed: int, env_id: str = "",
                 learn: tuple[str, ...] = (), swap_seats: bool = False, agent_id: bool = False,
                 critic: str = "local", random_opening: int = 0, first: Any = None):
        from pettingzoo import AECEnv

        self._make_game = make_game
        self.games = [first if (i == 0 and first is not None) else make_game() for i in range(num_games)]
        self.turn_based = isinstance(self.games[0], AECEnv)
        self._configure(self.games[0], num_games, seed=seed, env_id=env_id, learn=learn, swap_seats=swap_seats,
                        agent_id=agent_id, critic=critic, random_opening=random_opening)

    def _configure(self, game, num_games: int, *, seed: int, env_id: str, learn: tuple[str, ...], swap_seats: bool,
                   agent_id: bool, critic: str, random_opening: int = 0) -> None:
        """Sides, spaces and per-game bookkeeping, read off one game (`game`)."""
        if critic not in CRITICS:
            raise ValueError(f"multiagent.critic must be one of {', '.join(CRITICS)}; got {critic!r}")
        if random_opening < 0:
            raise ValueError(f"multiagent.random_opening must be >= 0 (plies); got {random_opening}")
        if random_opening and not self.turn_based:
            raise ValueError(f"multiagent.random_opening={random_opening}: {env_id or 'this env'} is simultaneous "
                             "(a PettingZoo ParallelEnv); random opening moves are for turn-based (AEC) games, so "
                             "set it to 0")
        self.random_opening = random_opening
        self._opening_rng = np.random.default_rng([seed, 0x09E4])  # its own stream: the games' seeds are unchanged
        self.env_id, self._seed = env_id, seed
        agents = self.possible_agents = list(game.possible_agents)
        self.sides = _sides(agents, tuple(learn), swap_seats, env_id)
        self.k = len(self.sides[0])
        if self.turn_based and self.k != 1:
            raise ValueError(f"{env_id or 'this env'} is turn-based (a PettingZoo AECEnv) and multiagent.learn "
                             f"matches {self.k} of its agents ({', '.join(self.sides[0])}); a turn-based game takes "
                             "one learned agent per game: match one agent, or give the env's parallel form")
        self.agent_id, self.critic, self.swap = agent_id, critic, swap_seats
        self.num_games, self.num_envs = num_games, num_games * self.k
        raw_space = game.observation_space(self.sides[0][0])
        self.single_action_space = game.action_space(self.sides[0][0])
        for side in self.sides:
            for agent in side:
                if game.observation_space(agent) != raw_space or game.action_space(agent) != self.single_action_space:
                    raise ValueError(f"{env_id}: agent {agent!r} has other spaces than {self.sides[0][0]!r}; one "
                                     "policy plays agents with the same observation and action spaces (learn fewer "
                                     "agents, or set multiagent.swap_seats=false)")
        self._own_space = raw_space[OBS_KEY] if isinstance(raw_space, gymnasium.spaces.Dict) else raw_space
        self._has_mask = (isinstance(raw_space, gymnasium.spaces.Dict) and MASK_KEY in raw_space.spaces) or \
            isinstance(self.single_action_space, gymnasium.spaces.Discrete)
        spaces = {OBS_KEY: self._own_space}
        if self._has_mask:
            n = int(self.single_action_space.n)
            spaces[MASK_KEY] = gymnasium.spaces.Box(0, 1, (n,), np.int8)
        if agent_id:
            spaces[AGENT_KEY] = gymnasium.spaces.Box(0.0, 1.0, (self.k,), np.float32)
        if critic == "state":
            if not hasattr(game, "state"):
                raise ValueError(f"multiagent.critic=state, but {env_id} has no state() (PettingZoo's global "
                                 "state); use critic=team (every teammate's observation) or local")
            game.reset(seed=seed)  # a global state exists once a game has started
            state = np.asarray(self._global_state(game), np.float32)
            spaces[CRITIC_KEY] = gymnasium.spaces.Box(-np.inf, np.inf, state.shape, np.float32)
        elif critic == "team":
            size = int(np.prod(self._own_space.shape)) * self.k
            spaces[CRITIC_KEY] = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.single_observation_space = gymnasium.spaces.Dict(spaces)
        self.observation_space = self.single_observation_space
        self.action_space = self.single_action_space
        self.opponents: Opponents = RandomOpponents(seed)
        self.stats = new_stats()
        self.results: list[tuple[str, float]] = []
        self._side = np.zeros(num_games, np.int64)  # which side the learner plays in each game
        self._opponent = ["random"] * num_games
        self._episodes = np.zeros(num_games, np.int64)
        self._returns = np.zeros((num_games, 2), np.float64)  # the learned side's and the other side's
        self._obs = _empty(self.single_observation_space, self.num_envs)
        self._last: list[tuple[dict, dict]] = [({}, {})] * num_games  # simultaneous games: everyone's newest
        self._outcomes: dict[int, float] = {}  # turn-based games: the outcome an info gave as the game ended

    # ----- the VecEnv interface -----------------------------------------------------------------------
    def set_opponents(self, opponents: Opponents) -> None:
        self.opponents = opponents

    def reset(self, seed: int | None = None):
        seed = self._seed if seed is None else seed
        for g in range(self.num_games):
            self._start_game(g, seed + g)
        if self.turn_based:
            self._advance(list(range(self.num_games)), np.zeros(self.num_envs, np.float32),
                          np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool))
        return _copy(self._obs)

    def step(self, actions: np.ndarray):
        from menger.envs.vector import StepResult

        actions = np.asarray(actions)
        reward = np.zeros(self.num_envs, np.float32)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        valid = np.ones(self.num_envs, bool)
        if self.turn_based:
            for g, game in enumerate(self.games):
                game.step(_action(actions[g]))
            self._advance(list(range(self.num_games)), reward, terminated, truncated)
        else:
            self._step_parallel(actions, reward, terminated, truncated, valid)
        return StepResult(_copy(self._obs), reward, terminated, truncated, valid)

    def pop_results(self) -> list[tuple[str, float]]:
        out, self.results = self.results, []
        return out

    def close(self) -> None:
        for game in self.games:
            game.close()

    def get_state(self) -> None:
        return None  # PettingZoo games cannot be copied in general: a resumed actor starts new games

    def set_state(self, state: dict) -> None:
        raise ValueError("multi-agent envs cannot restore a snapshot of their games")

    # ----- games ----------------------------------------------------------------------------------------
    def _start_game(self, g: int, seed: int | None) -> None:
        self._begin_game(g)
        game = self.games[g]
        if self.turn_based:
            game.reset(seed=seed)
            if self.random_opening:
                self._play_opening(game, int(self._opening_rng.integers(0, self.random_opening + 1)))
        else:
            observations, infos = game.reset(seed=seed)
            self._write_parallel(g, observations, infos, set(game.agents))

    def _play_opening(self, game, plies: int) -> None:
        """`plies` uniformly random legal moves, whoever is to move; a game the opening ends starts again
        without one."""
        for _ in range(plies):
            obs, _, term, trunc, info = game.last()
            if term or trunc:
                game.reset()
                return
            mask = _mask(obs, info)
            legal = np.flatnonzero(mask) if mask is not None else np.arange(game.action_space(game.agent_selection).n)
            game.step(int(self._opening_rng.choice(legal)))

    def _begin_game(self, g: int) -> None:
        """A new game's bookkeeping: the side the learner plays, its opponent, returns from zero."""
        self._side[g] = (g + self._episodes[g]) % 2 if self.swap else 0
        self._opponent[g] = self.opponents.assign(g)
        self._returns[g] = 0.0

    def _end_game(self, g: int, outcome: float | None) -> None:
        if outcome is None:
            outcome = float(np.sign(self._returns[g, 0] - self._returns[g, 1]))
        self.results.append((self._opponent[g], (outcome + 1.0) / 2.0))
        self._episodes[g] += 1
        self._start_game(g, None)

    def _learned(self, g: int) -> tuple[str, ...]:
        return self.sides[self._side[g]]

    # ----- simultaneous games ---------------------------------------------------------------------------
    def _step_parallel(self, actions, reward, terminated, truncated, valid) -> None:
        requests: dict[str, list] = {}
        chosen: list[dict] = []
        for g, game in enumerate(self.games):
            learned, live = self._learned(g), set(game.agents)
            moves = {}
            for j, agent in enumerate(learned):
                if agent in live:
                    moves[agent] = _action(actions[g * self.k + j])
                else:
                    valid[g * self.k + j] = False
            for agent in game.agents:
                if agent not in moves:
                    requests.setdefault(self._opponent[g], []).append((g, agent))
            chosen.append(moves)
        self._act_opponents(requests, chosen, {(g, a): (self._last[g][0][a], self._last[g][1].get(a, {}))
                                               for seats in requests.values() for g, a in seats})
        for g, game in enumerate(self.games):
            learned = self._learned(g)
            observations, rewards, terms, truncs, infos = game.step(chosen[g])
            for agent, r in rewards.items():
                self._returns[g, 0 if agent in learned else 1] += r
            for j, agent in enumerate(learned):
                i = g * self.k + j
                if valid[i]:
                    reward[i] = rewards.get(agent, 0.0)
                    terminated[i] = bool(terms.get(agent, False))
                    truncated[i] = bool(truncs.get(agent, False)) and not terminated[i]
            if not game.agents:  # the game is over: every row still in it ends here
                for j, agent in enumerate(learned):
                    i = g * self.k + j
                    if valid[i] and not (terminated[i] or truncated[i]):
                        truncated[i] = True
                self._end_game(g, _outcome(infos, learned))
            else:
                self._write_parallel(g, observations, infos, set(game.agents))

    def _write_parallel(self, g: int, observations: dict, infos: dict, live: set) -> None:
        learned = self._learned(g)
        self._last[g] = (observations, infos)
        for j, agent in enumerate(learned):
            i = g * self.k + j
            if agent in live:
                self._write(i, j, observations[agent], infos.get(agent, {}))
            else:
                self._write_dead(i)
        if self.critic == "state":
            self._obs[CRITIC_KEY][g * self.k:(g + 1) * self.k] = self._global_state(self.games[g])
        elif self.critic == "team":
            own = self._obs[OBS_KEY][g * self.k:(g + 1) * self.k].reshape(self.k, -1)
            self._obs[CRITIC_KEY][g * self.k:(g + 1) * self.k] = own.reshape(1, -1)

    # ----- turn-based games -----------------------------------------------------------------------------
    def _advance(self, pending: list[int], reward, terminated, truncated) -> None:
        """Play every game in `pending` on until its learned agent is to move (opponents batched per opponent),
        resetting the games that end; the learned rows' rewards are what they gathered meanwhile."""
        while pending:
            requests: dict[str, list] = {}
            for g in pending:
                game = self.games[g]
                state = game.unwrapped  # read through PettingZoo's wrapper chain, attribute reads cost a third
                while True:
                    if not state.agents:
                        self._end_game(g, self._outcomes.pop(g, None))  # the next game: its sides may swap
                        continue
                    learner = self._learned(g)[0]
                    agent = state.agent_selection
                    obs, r, term, trunc, info = game.last()
                    if term or trunc:
                        self._returns[g, 0 if agent == learner else 1] += r
                        if agent == learner:
                            reward[g] += r
                            terminated[g] |= term
                            truncated[g] |= trunc and not term
                        if "outcome" in info and g not in self._outcomes:
                            self._outcomes[g] = info["outcome"] if agent == learner else -info["outcome"]
                        game.step(None)
                        continue
                    if agent == learner:
                        self._returns[g, 0] += r
                        reward[g] += r
                        self._write(g, 0, obs, info)
                        break
                    self._returns[g, 1] += r
                    requests.setdefault(self._opponent[g], []).append((g, agent, obs, info))
                    break
            moves: list[dict] = [{} for _ in self.games]
            self._act_opponents({name: [(g, a) for g, a, *_ in items] for name, items in requests.items()}, moves,
                                {(g, a): (o, i) for items in requests.values() for g, a, o, i in items})
            pending = [g for g in pending if moves[g]]
            for g in pending:
                ((_, move),) = moves[g].items()
                self.games[g].step(move)

    # ----- opponents ------------------------------------------------------------------------------------
    def _act_opponents(self, requests: dict[str, list], moves: list[dict], observed: dict) -> None:
        """One call per opponent for every seat it plays this step, across the games; `observed`: (game, agent) ->
        (observation, info)."""
        for name, seats in requests.items():
            raws, encoded = [], _empty(self.single_observation_space, len(seats))
            for n, (g, agent) in enumerate(seats):
                obs, info = observed[(g, agent)]
                raws.append(obs)
                others = [a for a in self.possible_agents if a not in self._learned(g)]
                _write_row(encoded, n, self._encode(obs, info, min(others.index(agent), self.k - 1)))
            if CRITIC_KEY in encoded:
                encoded[CRITIC_KEY][:] = 0.0  # an opponent acts; its value is never used
            actions = np.asarray(self.opponents.act(name, raws, encoded))
            for n, (g, agent) in enumerate(seats):
                moves[g][agent] = _action(actions[n])

    # ----- observations ---------------------------------------------------------------------------------
    def _encode(self, obs, info: dict, index: int) -> dict:
        row = {OBS_KEY: obs[OBS_KEY] if isinstance(obs, dict) else obs}
        if self._has_mask:
            mask = _mask(obs, info)
            row[MASK_KEY] = np.ones(self.single_action_space.n, np.int8) if mask is None else mask
        if self.agent_id:
            one_hot = np.zeros(self.k, np.float32)
            one_hot[index] = 1.0
            row[AGENT_KEY] = one_hot
        return row

    def _write(self, i: int, j: int, obs, info: dict) -> None:
        _write_row(self._obs, i, self._encode(obs, info, j))
        if self.turn_based and self.critic == "state":
            self._obs[CRITIC_KEY][i] = self._global_state(self.games[i])
        elif self.turn_based and self.critic == "team":
            self._obs[CRITIC_KEY][i] = np.asarray(self._obs[OBS_KEY][i], np.float32).reshape(-1)

    def _write_dead(self, i: int) -> None:
        for key, array in self._obs.items():
            array[i] = 1 if key == MASK_KEY else 0

    @staticmethod
    def _global_state(game) -> np.ndarray:
        return np.asarray(game.state(), np.float32)


def multiagent_vec_env(make_game: Callable[[], Any], rows: int, *, seed: int, env_id: str, config=None,
                       first: Any = None, batched: Callable[..., MultiAgentVecEnv] | None = None) -> MultiAgentVecEnv:
    """`rows` rows (games x the agents the policy plays in each) of the game `make_game` builds; `config`: the
    experiment's `env.multiagent` (None: the first agent, nothing added). Fewer rows than one game has learned
    agents give one game (what a probe of the spaces asks for). `batched`: the class that plays `first`'s own
    batched core, all games at once (`menger.envs.multiagent_batch`, chosen by `make_vec_env`), or None."""
    from pettingzoo import AECEnv

    first = first if first is not None else make_game()
    learn = tuple(getattr(config, "learn", ()))
    swap = bool(getattr(config, "swap_seats", False))
    try:
        if batched is None and not isinstance(first, AECEnv) and spaces_differ(first):
            first, make_game = _pad_agents(first, make_game, learn, swap, env_id)
        k = len(_sides(list(first.possible_agents), learn, swap, env_id)[0])
        if rows >= k and rows % k:
            raise ValueError(f"runtime.envs_per_actor={rows} counts the rows of learned agents: {env_id} has {k} "
                             f"learned agents per game, so give a multiple of {k} ({max(1, rows // k) * k} = "
                             f"{max(1, rows // k)} games)")
        options = dict(seed=seed, env_id=env_id, learn=learn, swap_seats=swap,
                       agent_id=bool(getattr(config, "agent_id", False)), critic=getattr(config, "critic", "local"),
                       random_opening=int(getattr(config, "random_opening", 0)))
        if batched is not None:
            return batched(first, max(1, rows // k), **options)
        return MultiAgentVecEnv(make_game, max(1, rows // k), first=first, **options)
    except BaseException:
        first.close()
        raise


def _pad_agents(first, make_game: Callable[[], Any], learn: tuple[str, ...], swap: bool,
                env_id: str) -> tuple[Any, Callable[[], Any]]:
    """A game whose agents' spaces differ, and its factory, padded to common spaces (`PaddedAgents`), so that one
    policy plays its learned agents and its opponents' rows are encoded alike. Where they cannot be padded, the
    refusal stands if the learned agents differ; if only the others do, the game is left as it is."""
    learned = [agent for side in _sides(list(first.possible_agents), learn, swap, env_id) for agent in side]
    try:
        padded = PaddedAgents(first, env_id)
    except ValueError:
        if spaces_differ(first, learned):
            raise
        return first, make_game
    log.info("%s: its agents' spaces differ; each is padded to common ones, with a one-hot of its kind",
             env_id or "the env")
    return padded, lambda: PaddedAgents(make_game(), env_id)


def _sides(agents: list[str], learn: tuple[str, ...], swap: bool, env_id: str) -> tuple[tuple[str, ...], ...]:
    """The agents the policy plays, and (with swap_seats) the side it plays every other game."""
    patterns = learn or (agents[0],)
    mine = tuple(a for a in agents if any(fnmatch.fnmatchcase(a, p) for p in patterns))
    if not mine:
        raise ValueError(f"multiagent.learn={list(patterns)} matches none of {env_id or 'the env'}'s agents "
                         f"({', '.join(agents)}); give agent names or patterns such as 'red_*'")
    if not swap:
        return (mine,)
    other = tuple(a for a in agents if a not in mine)
    if len(other) != len(mine):
        raise ValueError(f"multiagent.swap_seats: the learned side ({', '.join(mine)}) and the other side "
                         f"({', '.join(other) or 'none'}) must have as many agents; set swap_seats=false or learn half "
                         "of the agents")
    return mine, other


def _outcome(infos: dict, learned: tuple[str, ...]) -> float | None:
    for agent, info in infos.items():
        if isinstance(info, dict) and "outcome" in info:
            return float(info["outcome"]) if agent in learned else -float(info["outcome"])
    return None


def _mask(obs, info: dict):
    """An agent's action mask: its observation dict's, else its info's; None where the env gives none."""
    mask = obs.get(MASK_KEY) if isinstance(obs, dict) else None
    return info.get(MASK_KEY) if mask is None else mask


def _action(a):
    a = np.asarray(a)
    return int(a) if a.ndim == 0 and np.issubdtype(a.dtype, np.integer) else a


def _empty(space: gymnasium.spaces.Dict, n: int) -> dict[str, np.ndarray]:
    return {key: np.zeros((n, *sub.shape), sub.dtype) for key, sub in space.spaces.items()}


def _write_row(arrays: dict, i: int, row: dict) -> None:
    for key, value in row.items():
        arrays[key][i] = value


def _copy(obs: dict) -> dict:
    return {key: value.copy() for key, value in obs.items()}
