"""Self-play games for AlphaZero: B games of a two-player turn-based game in which the searching policy makes
every move, one row per game, behind Menger's ``VecEnv`` interface::

    envs = SelfPlayGames(make_game, num_games=B, seed=s, round_length=T)
    obs = envs.reset()                  # {"observation", "action_mask"} of the seat to move in each game
    result = envs.step(actions)         # one move in every live game
    envs.live, envs.moves               # which games are still on, and the moves each has had

Games are played in *rounds* of `round_length` steps (the actor's unroll length): every game starts at a round's
first step, and a game that ends sits out (``valid=False``) until the round is over, so an unroll holds whole
games and each position's outcome is in the same unroll (what AlphaZero's value trains towards). A game still on
at the round's last step is cut (``truncated``): its positions get no outcome and are not trained on, so the
round should be at least as long as the game's longest game (42 moves for Connect Four, 9 for Tic-Tac-Toe).
The step after a game's end is not a reset step as in gymnasium: the row waits for the next round, which is
``AutoresetMode.NEXT_STEP``'s contract (terminations and truncations told apart, an invalid row after each end).

A row's reward is the mover's reward for its move: the game's result for the seat that just moved when the move
ended the game (1 a win, 0 a draw, -1 a loss), else 0. The positions' outcomes follow by negation back through
the game (`menger.algorithms.alphazero.losses.outcome_targets`). Rows sitting out have no search to run, so a
round's wasted steps cost memory in the unroll, not time.

A snapshot (`get_state`) is each game's moves since its start, plain integers a checkpoint can hold: the searchable
games are deterministic, so `set_state` replays them and a resumed actor continues its games exactly.
"""
from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np

from menger.envs.faults import new_stats
from menger.envs.multiagent import MASK_KEY, OBS_KEY
from menger.search.games import searchable, searchable_games


class SelfPlayGames:
    autoreset_mode = gymnasium.vector.AutoresetMode.NEXT_STEP

    def __init__(self, make_game: Callable[[], Any], num_games: int, *, seed: int, round_length: int,
                 env_id: str = ""):
        if round_length < 1:
            raise ValueError(f"round_length must be at least 1 step; got {round_length}")
        self.games = [make_game() for _ in range(num_games)]
        first = self.games[0]
        if not searchable(first):
            self.close()
            raise ValueError(f"alphazero plays the games search can copy: {env_id or type(first).__name__} is not one "
                             f"of them ({searchable_games()})")
        agent = first.possible_agents[0]
        raw_space = first.observation_space(agent)
        self.single_action_space = first.action_space(agent)
        n = int(self.single_action_space.n)
        self.single_observation_space = gymnasium.spaces.Dict(
            {OBS_KEY: raw_space[OBS_KEY], MASK_KEY: gymnasium.spaces.Box(0, 1, (n,), np.int8)})
        self.observation_space, self.action_space = self.single_observation_space, self.single_action_space
        self.num_envs = self.num_games = num_games
        self.round_length, self._seed, self.env_id = round_length, seed, env_id
        self.live = np.ones(num_games, bool)
        self.moves = np.zeros(num_games, np.int64)
        self.step_in_round = 0
        self.history: list[list[int]] = [[] for _ in range(num_games)]  # each game's moves since its start
        self.stats = dict(new_stats(), idle_rows=0)  # idle rows are by design, not faults (`FrameAccounts`)
        self._obs = {key: np.zeros((num_games, *space.shape), space.dtype)
                     for key, space in self.single_observation_space.spaces.items()}

    # ----- the VecEnv interface -----------------------------------------------------------------------
    def reset(self, seed: int | None = None):
        seed = self._seed if seed is None else seed
        self._new_round(seed)
        return self._copy_obs()

    def step(self, actions: np.ndarray):
        from menger.envs.vector import StepResult

        actions = np.asarray(actions)
        reward = np.zeros(self.num_envs, np.float32)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        valid = self.live.copy()
        self.stats["idle_rows"] += int(self.num_games - valid.sum())
        for g in np.flatnonzero(self.live):
            raw = self.games[g].unwrapped
            mover = raw.agent_selection
            self.games[g].step(int(actions[g]))
            self.history[g].append(int(actions[g]))
            self.moves[g] += 1
            if any(raw.terminations.values()) or any(raw.truncations.values()):
                reward[g] = raw.rewards[mover]
                terminated[g] = any(raw.terminations.values())
                truncated[g] = not terminated[g]
                self.live[g] = False
            self._write(g)
        self.step_in_round += 1
        if self.step_in_round == self.round_length:  # the round is over: games still on are cut
            truncated |= self.live
            self._new_round(None)
        return StepResult(self._copy_obs(), reward, terminated, truncated, valid)

    def close(self) -> None:
        for game in self.games:
            game.close()

    def get_state(self) -> dict:
        return {"history": [np.array(moves, np.int64) for moves in self.history], "live": self.live.copy(),
                "moves": self.moves.copy(), "step_in_round": self.step_in_round}

    def set_state(self, state: dict) -> None:
        for g, (game, moves) in enumerate(zip(self.games, state["history"], strict=True)):
            game.reset(seed=self._seed + g)
            for move in np.asarray(moves).tolist():
                game.step(int(move))
            self.history[g] = np.asarray(moves).tolist()
            self._write(g)
        self.live, self.moves = np.array(state["live"], bool), np.array(state["moves"], np.int64)
        self.step_in_round = int(state["step_in_round"])

    # ----- games ----------------------------------------------------------------------------------------
    def _new_round(self, seed: int | None) -> None:
        for g, game in enumerate(self.games):
            game.reset(seed=None if seed is None else seed + g)
            self.history[g] = []
            self._write(g)
        self.live[:] = True
        self.moves[:] = 0
        self.step_in_round = 0

    def _write(self, g: int) -> None:
        raw = self.games[g].unwrapped
        obs = raw.observe(raw.agent_selection)
        self._obs[OBS_KEY][g] = obs[OBS_KEY]
        self._obs[MASK_KEY][g] = obs[MASK_KEY]

    def _copy_obs(self) -> dict:
        return {key: value.copy() for key, value in self._obs.items()}
