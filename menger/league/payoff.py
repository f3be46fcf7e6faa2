"""The payoff table: decayed win, draw and loss counts per pair of league members (AlphaStar, DI-engine).

A game between a and b is one record of the pair {a, b}: it is also b's game against a, with the result
mirrored. Before each game of a pair is added, that pair's counts are multiplied by ``decay`` (0.99: a game
100 games ago weighs 1/e as much), so the win rate follows a learner that keeps changing::

    payoff = PayoffTable(decay=0.99, min_games=8)
    payoff.record("main_0", "main_0@3", 1.0)        # 1 win, 0.5 draw, 0 loss, from the first player's view
    payoff.win_rate("main_0", "main_0@3")          # (wins + draws / 2) / games, decayed; 0.5 below 8 games
    payoff.win_rate("main_0@3", "main_0")          # 1 - the above

``win_rate`` reports 0.5 until the pair has played ``min_games`` games (counted, not decayed; DI-engine
compares its decayed count, which with decay 0.99 first passes 8 at the ninth game). A player's games against
itself are worth half a win and half a loss (or a draw), so that win rate is always 0.5.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

__all__ = ["PayoffTable", "check_outcome"]

_WINS, _DRAWS, _LOSSES, _GAMES, _PLAYED = range(5)


def check_outcome(outcome: float) -> float:
    """1, 0.5 or 0 (a win, a draw, a loss) as a float; anything else is refused."""
    if isinstance(outcome, bool) or outcome not in (0, 0.5, 1):
        raise ValueError(f"a game's outcome is 1 (win), 0.5 (draw) or 0 (loss) from the player's view, "
                         f"got {outcome!r}")
    return float(outcome)


class PayoffTable:
    """Decayed (wins, draws, losses, games) per unordered pair, kept from the view of the pair's first name."""

    def __init__(self, decay: float = 0.99, min_games: int = 8):
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"payoff decay must lie in (0, 1], got {decay}")
        if min_games < 0:
            raise ValueError(f"min_games must be >= 0, got {min_games}")
        self.decay, self.min_games = float(decay), int(min_games)
        # (first, second) with first <= second -> [wins, draws, losses, games, played] of first against second
        self._pairs: dict[tuple[str, str], list[float]] = {}

    def record(self, player: str, opponent: str, outcome: float) -> None:
        """Add one game that ``player`` scored ``outcome`` in against ``opponent``."""
        score = check_outcome(outcome)
        key, flipped = self._key(player, opponent)
        counts = self._pairs.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0])
        for index in (_WINS, _DRAWS, _LOSSES, _GAMES):
            counts[index] *= self.decay
        counts[_GAMES] += 1.0
        counts[_PLAYED] += 1
        if player == opponent and score != 0.5:
            counts[_WINS] += 0.5
            counts[_LOSSES] += 0.5
        elif score == 0.5:
            counts[_DRAWS] += 1.0
        else:
            first_won = (score == 1.0) != flipped
            counts[_WINS if first_won else _LOSSES] += 1.0

    def win_rate(self, player: str, opponent: str) -> float:
        """``player``'s (wins + draws / 2) / games against ``opponent``, decayed; 0.5 below ``min_games``."""
        if player == opponent:
            return 0.5
        key, flipped = self._key(player, opponent)
        counts = self._pairs.get(key)
        if counts is None or counts[_PLAYED] < max(self.min_games, 1):
            return 0.5
        wins = counts[_LOSSES] if flipped else counts[_WINS]
        return (wins + 0.5 * counts[_DRAWS]) / counts[_GAMES]

    def win_rates(self, player: str, opponents: Iterable[str]) -> np.ndarray:
        return np.array([self.win_rate(player, opponent) for opponent in opponents], dtype=np.float64)

    def games(self, player: str, opponent: str) -> int:
        """Games the pair has played (counted, not decayed)."""
        counts = self._pairs.get(self._key(player, opponent)[0])
        return 0 if counts is None else int(counts[_PLAYED])

    def forget(self, name: str) -> None:
        """Drop every game of ``name`` (its learner was reset: those games were played by other parameters)."""
        self._pairs = {key: counts for key, counts in self._pairs.items() if name not in key}

    def state_dict(self) -> dict:
        """Plain data: the settings and one row [first, second, wins, draws, losses, games, played] per pair."""
        return {"decay": self.decay, "min_games": self.min_games,
                "pairs": [[first, second, *counts] for (first, second), counts in self._pairs.items()]}

    def load_state_dict(self, state: dict) -> None:
        """The saved counts; decay and min_games stay this table's (the config's)."""
        pairs = {}
        for row in state["pairs"]:
            first, second, wins, draws, losses, games, played = row
            if first > second:
                raise ValueError(f"payoff row {row!r}: the pair's names must be in sorted order")
            pairs[(first, second)] = [float(wins), float(draws), float(losses), float(games), int(played)]
        self._pairs = pairs

    @classmethod
    def from_state(cls, state: dict) -> "PayoffTable":
        table = cls(state["decay"], state["min_games"])
        table.load_state_dict(state)
        return table

    @staticmethod
    def _key(player: str, opponent: str) -> tuple[tuple[str, str], bool]:
        return ((player, opponent), False) if player <= opponent else ((opponent, player), True)
