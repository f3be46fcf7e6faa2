"""A simultaneous multi-agent game whose env steps many games at once, behind the same ``VecEnv`` as one-by-one games.

`MultiAgentVecEnv` steps G PettingZoo games one by one, so a game of arrays pays its per-step overheads G times.
A ``ParallelEnv`` can offer its own batched core instead, with one method::

    batch = env.batched(num_games)          # G games of the env's settings
    out = batch.reset(seed)                 # int: game g as a single game reset with seed + g; a list: one per game
    out = batch.reset(seeds, games=done)    # restart only the games where the bool array `done` [G] is True
    out = batch.step(actions)               # actions [G, A] ints, A = len(env.possible_agents), in that order
    batch.state()                           # [G, S] global states (only with critic=state)

where ``out`` has ``obs`` {"observation": [G, A, ...], "action_mask": [G, A, K]}, ``reward`` [G, A], ``alive``
[G, A] (after the step), ``done`` / ``terminated`` / ``truncated`` [G] and ``outcome`` [G, A] (+1 won, 0 draw,
-1 lost, at a game's end). A dead agent takes the no-op (action 0). The wargame's ``WargameBatch`` is one.

`BatchedMultiAgentVecEnv` plays such a core by the rules of `MultiAgentVecEnv` (rows, sides, opponents acting
inside, results), and matches it step for step: the same seeds give the same observations, rewards, ends and
scores (``tests/multiagent/test_batched.py``). Game g restarts from the seed stream a lone game g would draw from.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from menger.envs.multiagent import (AGENT_KEY, CRITIC_KEY, MASK_KEY, OBS_KEY, MultiAgentVecEnv, _action, _copy,
                                    _empty)

# an unseeded reset draws each game's seed as a lone game's batch of one would: from its own stream, offset thus
SEED_STREAM_OFFSET = 2**32


def has_batched_core(game: Any) -> bool:
    """A PettingZoo ParallelEnv that offers `batched(num_games)` (the module doc)."""
    from pettingzoo import ParallelEnv

    return isinstance(game, ParallelEnv) and callable(getattr(game, "batched", None))


class BatchedMultiAgentVecEnv(MultiAgentVecEnv):
    """G games of `first`'s kind stepped by `first.batched(G)`; rows, sides and opponents as `MultiAgentVecEnv`."""

    def __init__(self, first: Any, num_games: int, *, seed: int, env_id: str = "", learn: tuple[str, ...] = (),
                 swap_seats: bool = False, agent_id: bool = False, critic: str = "local", random_opening: int = 0):
        self.games, self.turn_based = [], False
        self._configure(first, num_games, seed=seed, env_id=env_id, learn=learn, swap_seats=swap_seats,
                        agent_id=agent_id, critic=critic, random_opening=random_opening)  # refused: not turn-based
        self.batch = first.batched(num_games)
        first.close()  # spaces and sides are read; the batch plays every game
        index = {agent: a for a, agent in enumerate(self.possible_agents)}
        self._mine = np.array([[index[agent] for agent in side] for side in self.sides])       # [sides, k]
        # the other side's agents, in possible_agents order, and the agent-id index each is encoded with
        self._theirs = [np.array([a for a, agent in enumerate(self.possible_agents) if agent not in side])
                        for side in self.sides]
        self._streams = [np.random.default_rng() for _ in range(num_games)]
        self._alive = np.zeros((num_games, len(self.possible_agents)), bool)
        self._current: dict[str, np.ndarray] = {}
        self._eye = np.eye(self.k, dtype=np.float32)

    # ----- the VecEnv interface -----------------------------------------------------------------------
    def reset(self, seed: int | None = None):
        seed = self._seed if seed is None else seed
        self._streams = [np.random.default_rng(seed + g + SEED_STREAM_OFFSET) for g in range(self.num_games)]
        for g in range(self.num_games):
            self._start_game(g, None)
        self._take(self.batch.reset(seed))
        self._write_rows()
        return _copy(self._obs)

    def step(self, actions: np.ndarray):
        from menger.envs.vector import StepResult

        G, k = self.num_games, self.k
        actions = np.asarray(actions).reshape(G, k)
        games = np.arange(G)[:, None]
        mine = self._mine[self._side]                                                         # [G, k]
        live = self._alive[games, mine]                                                       # [G, k]
        joint = np.zeros(self._alive.shape, np.int64)
        joint[games, mine] = np.where(live, actions, 0)
        self._act_opponents_batched(joint)
        out = self.batch.step(joint)

        started = self._alive
        side_of = np.zeros_like(started, np.int64)
        side_of[games, mine] = 1                                                              # 1: a learned agent
        reward_all = np.asarray(out.reward, np.float64) * started
        self._returns[:, 0] += (reward_all * side_of).sum(1)
        self._returns[:, 1] += (reward_all * (1 - side_of)).sum(1)
        killed = live & ~out.alive[games, mine]
        ended = np.asarray(out.done, bool)
        terminated = live & (killed | out.terminated[:, None])
        truncated = live & ~killed & out.truncated[:, None] & ~terminated
        truncated |= live & ended[:, None] & ~(terminated | truncated)
        reward = np.where(live, out.reward[games, mine], 0.0).astype(np.float32)

        self._take(out)
        if ended.any():
            seeds = []
            for g in np.flatnonzero(ended):
                self._end_game(g, self._outcome_of(started[g], out.outcome[g], set(mine[g].tolist())))
                seeds.append(int(self._streams[g].integers(0, 2**63 - 1, size=1)[0]))
            self._take(self.batch.reset(seeds, games=ended))
        self._write_rows()
        return StepResult(_copy(self._obs), reward.reshape(-1), terminated.reshape(-1), truncated.reshape(-1),
                          live.reshape(-1))

    def close(self) -> None:
        pass

    # ----- games ----------------------------------------------------------------------------------------
    def _start_game(self, g: int, seed: int | None) -> None:
        self._begin_game(g)  # the board: the batch restarts every game that ended at once (reset, step)

    @staticmethod
    def _outcome_of(started: np.ndarray, outcome: np.ndarray, mine: set) -> float:
        """The learned side's outcome, read off the first agent in the final step, as one game's infos give it."""
        first = int(np.flatnonzero(started)[0])
        return float(outcome[first]) if first in mine else -float(outcome[first])

    def _take(self, out) -> None:
        self._current = out.obs
        self._alive = np.asarray(out.alive, bool).copy()

    # ----- opponents ------------------------------------------------------------------------------------
    def _act_opponents_batched(self, joint: np.ndarray) -> None:
        """Every live seat of the other side, batched per opponent (in game order, then agent order)."""
        seats: dict[str, list[tuple[int, int, int]]] = {}
        for g in range(self.num_games):
            theirs = self._theirs[self._side[g]]
            for index, a in enumerate(theirs):
                if self._alive[g, a]:
                    seats.setdefault(self._opponent[g], []).append((g, int(a), min(index, self.k - 1)))
        own, masks = self._current[OBS_KEY], self._current.get(MASK_KEY)
        for name, chosen in seats.items():
            g, a, index = (np.array(column) for column in zip(*chosen))
            encoded = _empty(self.single_observation_space, len(g))
            encoded[OBS_KEY][:] = own[g, a]
            raws = [{OBS_KEY: own[gi, ai]} for gi, ai in zip(g, a)]
            if MASK_KEY in encoded:
                encoded[MASK_KEY][:] = masks[g, a] if masks is not None else 1
                for raw, mask in zip(raws, encoded[MASK_KEY]):
                    raw[MASK_KEY] = mask
            if AGENT_KEY in encoded:
                encoded[AGENT_KEY][:] = self._eye[index]
            moves = np.asarray(self.opponents.act(name, raws, encoded))
            joint[g, a] = [_action(m) for m in moves]

    # ----- observations ---------------------------------------------------------------------------------
    def _write_rows(self) -> None:
        G, k = self.num_games, self.k
        games = np.arange(G)[:, None]
        mine = self._mine[self._side]
        live = self._alive[games, mine].reshape(-1)
        obs = self._obs
        obs[OBS_KEY][:] = self._current[OBS_KEY][games, mine].reshape(G * k, *obs[OBS_KEY].shape[1:])
        obs[OBS_KEY][~live] = 0
        if MASK_KEY in obs:
            masks = self._current.get(MASK_KEY)
            obs[MASK_KEY][:] = 1 if masks is None else masks[games, mine].reshape(G * k, -1)
            obs[MASK_KEY][~live] = 1
        if AGENT_KEY in obs:
            obs[AGENT_KEY][:] = np.tile(self._eye, (G, 1))
            obs[AGENT_KEY][~live] = 0
        if self.critic == "state":
            obs[CRITIC_KEY][:] = np.repeat(np.asarray(self.batch.state(), np.float32), k, axis=0)
        elif self.critic == "team":
            team = obs[OBS_KEY].reshape(G, -1)
            obs[CRITIC_KEY][:] = np.repeat(team, k, axis=0)
