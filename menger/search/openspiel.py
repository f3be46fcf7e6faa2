"""OpenSpiel's bots as `menger match` opponents (`--opponent openspiel:mcts:400`): a reference no one here wrote.

    pip install "menger-rl[openspiel]"
    menger match RUN --opponent openspiel:mcts:400 --games 200

`OpenSpielBot` keeps an OpenSpiel state of the game beside the PettingZoo one: at each move it finds the
opponent's new piece in the observation (plane 1 holds the opponent's pieces, from the mover's view), applies
that move and its own to its state, and asks the OpenSpiel bot. Connect Four and Tic-Tac-Toe number their
actions alike in both libraries (a column; a cell, whose 3 x 3 grid has the same lines read either way).

`mcts:N` is OpenSpiel's `MCTSBot` as its own example (`open_spiel/python/examples/mcts.py`) sets it up: UCT
constant 2, one random rollout per leaf, N simulations a move, `solve=True` (proven wins and losses back up).
"""
from __future__ import annotations

import numpy as np

from menger.extras import require

# the module that defines the PettingZoo env (its `_v3` module, or the raw env's for a registry id) -> OpenSpiel's game
GAMES = {"pettingzoo.classic.connect_four_v3": "connect_four", "pettingzoo.classic.connect_four.connect_four":
         "connect_four", "pettingzoo.classic.tictactoe_v3": "tic_tac_toe",
         "pettingzoo.classic.tictactoe.tictactoe": "tic_tac_toe"}


def openspiel_bot(spec: str, env_module: str, seed: int = 0) -> "OpenSpielBot":
    """`mcts:SIMULATIONS` for the game that `env_module` defines (`menger.commands.match` resolves registry ids)."""
    kind, _, count = spec.partition(":")
    if kind != "mcts" or not count.isdigit() or int(count) < 1:
        raise ValueError(f"unknown OpenSpiel bot {spec!r}: give openspiel:mcts:SIMULATIONS, e.g. openspiel:mcts:400")
    if env_module not in GAMES:
        raise ValueError(f"OpenSpiel's bots play Connect Four and Tic-Tac-Toe here "
                         f"(pettingzoo.classic.connect_four_v3, tictactoe_v3), not {env_module}")
    return OpenSpielBot(GAMES[env_module], int(count), seed)


class OpenSpielBot:
    def __init__(self, game: str, simulations: int, seed: int = 0):
        pyspiel = require("pyspiel", "openspiel", "the openspiel:mcts opponent")
        mcts = require("open_spiel.python.algorithms.mcts", "openspiel", "the openspiel:mcts opponent")
        self.game = pyspiel.load_game(game)
        self.columns = game == "connect_four"
        rng = np.random.RandomState(seed)
        evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng)
        self.bot = mcts.MCTSBot(self.game, uct_c=2.0, max_simulations=simulations, evaluator=evaluator,
                                random_state=rng, solve=True, verbose=False)
        self.reset()

    def reset(self) -> None:
        self.state = self.game.new_initial_state()
        self.seen: np.ndarray | None = None  # the opponent's pieces at our last move

    def act(self, observation, action_mask=None) -> int:
        board = np.asarray(observation["observation"] if isinstance(observation, dict) else observation)
        theirs = board[..., 1].astype(bool)
        seen = np.zeros_like(theirs) if self.seen is None else self.seen
        if (seen & ~theirs).any():  # pieces vanished: a new game that nobody reset us for
            self.reset()
            seen = np.zeros_like(theirs)
        new = np.argwhere(theirs & ~seen)
        if len(new) > 1:
            raise ValueError(f"the opponent placed {len(new)} pieces since our last move; OpenSpielBot must see "
                             "every one of its moves (reset() at each game start)")
        for row, column in new:
            self.state.apply_action(int(column) if self.columns else int(row) * board.shape[1] + int(column))
        self.seen = theirs
        action = int(self.bot.step(self.state))
        self.state.apply_action(action)
        return action
