"""Connect Four's position as bitboards, for search: the same game as PettingZoo's `connect_four_v3` (its seats,
its observations, its outcomes: tested move for move against it in tests/search), an order of magnitude cheaper
to clone and step.

Search spends most of its time copying and stepping positions: PettingZoo's env clones by a pickle round trip
(about 10 µs) and checks for a win by walking the whole board in Python (about 40 µs a move). Here a position is
two integers, one per seat, with bit `7 c + h` set where that seat has a piece in column c at height h (row 0
the bottom; the seventh bit of each column stays empty, so shifts by 1, 6, 7 and 8 never wrap from one line
into the next), and a win is four in a row along one of those four shifts: a few integer operations.

    state = ConnectFourState.from_env(env)      # a PettingZoo connect_four_v3 env (wrapped or raw), not stepped
    child = state.clone(); child.step(3)
    child.observe()                             # {"observation": int8 [6, 7, 2], "action_mask": int8 [7]}
"""
from __future__ import annotations

from typing import Any

import numpy as np

ROWS, COLUMNS = 6, 7
SEATS = ("player_0", "player_1")  # PettingZoo's agents: player_0 moves first
_BITS = np.array([[7 * c + (ROWS - 1 - r) for c in range(COLUMNS)] for r in range(ROWS)], dtype=np.int64)
_TOPS = [7 * c + ROWS for c in range(COLUMNS)]  # a column is full when its next free bit is here


def _wins(pieces: int) -> bool:
    for shift in (1, 7, 6, 8):  # vertical, horizontal, the two diagonals
        pairs = pieces & (pieces >> shift)
        if pairs & (pairs >> (2 * shift)):
            return True
    return False


class ConnectFourState:
    """A Connect Four position (the `menger.search.mcts.GameState` methods). `to_move()` and `outcome(seat)` use
    PettingZoo's seat names; the observation is PettingZoo's: plane 0 the mover's pieces, plane 1 the other's,
    row 0 the top."""

    __slots__ = ("pieces", "heights", "mover", "moves", "winner", "_observed")

    def __init__(self):
        self.pieces = [0, 0]
        self.heights = [7 * c for c in range(COLUMNS)]  # each column's next free bit
        self.mover, self.moves, self.winner = 0, 0, None
        self._observed = None

    @classmethod
    def from_env(cls, env: Any) -> "ConnectFourState":
        """The position of a PettingZoo Connect Four env (its `board`: 42 cells row by row from the top, 0 empty,
        1 player_0's, 2 player_1's)."""
        raw = getattr(env, "unwrapped", env)
        state = cls()
        for index, cell in enumerate(raw.board):
            if cell:
                row, column = divmod(index, COLUMNS)
                state.pieces[cell - 1] |= 1 << (7 * column + ROWS - 1 - row)
                state.moves += 1
        for column in range(COLUMNS):
            while state.heights[column] < _TOPS[column] and \
                    (state.pieces[0] | state.pieces[1]) >> state.heights[column] & 1:
                state.heights[column] += 1
        state.mover = SEATS.index(raw.agent_selection)
        if any(raw.terminations.values()):
            state.winner = next((i for i in (0, 1) if raw.rewards[SEATS[i]] > 0), -1)  # -1: a draw
        return state

    def clone(self) -> "ConnectFourState":
        copy = object.__new__(ConnectFourState)
        copy.pieces, copy.heights = self.pieces[:], self.heights[:]
        copy.mover, copy.moves, copy.winner, copy._observed = self.mover, self.moves, self.winner, None
        return copy

    def step(self, action: int) -> None:
        column = int(action)
        if self.winner is not None or self.heights[column] >= _TOPS[column]:
            raise ValueError(f"column {column} cannot be played: " +
                             ("the game is over" if self.winner is not None else "it is full"))
        mover = self.mover
        self.pieces[mover] |= 1 << self.heights[column]
        self.heights[column] += 1
        self.moves += 1
        if _wins(self.pieces[mover]):
            self.winner = mover
        elif self.moves == ROWS * COLUMNS:
            self.winner = -1
        self.mover = 1 - mover
        self._observed = None

    def to_move(self) -> str:
        return SEATS[self.mover]

    def legal(self) -> np.ndarray:
        """The action mask: the observation's, read once per position (search evaluates a leaf, then expands it)."""
        return self.observe()["action_mask"]

    def terminal(self) -> bool:
        return self.winner is not None

    def outcome(self, seat: str) -> float:
        if self.winner is None or self.winner == -1:
            return 0.0
        return 1.0 if SEATS[self.winner] == seat else -1.0

    def playout(self, rng: np.random.Generator) -> float:
        """The outcome of the game played on by uniformly random legal moves, from the view of the seat to move
        here (`menger.search.mcts.playout`; this position is left as it is)."""
        seat, game = SEATS[self.mover], self.clone()
        draws = rng.random(ROWS * COLUMNS - self.moves).tolist()
        heights, tops = game.heights, _TOPS
        for draw in draws:
            if game.winner is not None:
                break
            legal = [c for c in range(COLUMNS) if heights[c] < tops[c]]
            game.step(legal[int(draw * len(legal))])
        return game.outcome(seat)

    def observe(self) -> dict:
        """The seat to move's observation, as PettingZoo gives it: {"observation": [6, 7, 2] int8 (the mover's
        pieces, the other seat's), "action_mask": [7] int8}."""
        if self._observed is None:
            mine, theirs = self.pieces[self.mover], self.pieces[1 - self.mover]
            planes = (np.array([mine, theirs], dtype=np.int64)[:, None, None] >> _BITS) & 1
            self._observed = {"observation": np.ascontiguousarray(planes.transpose(1, 2, 0), dtype=np.int8),
                              "action_mask": np.array([self.heights[c] < _TOPS[c] for c in range(COLUMNS)],
                                                      dtype=np.int8)}
        return self._observed
