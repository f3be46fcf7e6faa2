"""Elo ratings of league members, updated after every recorded game.

The expected score of a player rated r against one rated s is ``1 / (1 + 10 ** ((s - r) / scale))`` and a game
moves each rating by ``k * (score - expected)``, score 1 / 0.5 / 0 (DI-engine's ``EloCalculator``: k = 32,
scale 2 x 200 = 400). Ratings stay floats (DI-engine rounds each update to an integer, which drifts over
thousands of small updates); the total over both players is conserved by every game.
"""
from __future__ import annotations

from typing import Iterator

__all__ = ["EloRatings", "elo_update", "expected_score"]


def expected_score(rating: float, opponent: float, scale: float = 400.0) -> float:
    """The score a player rated ``rating`` expects against one rated ``opponent`` (0.5 at equal ratings)."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / scale))


def elo_update(rating: float, opponent: float, score: float, k: float = 32.0,
               scale: float = 400.0) -> tuple[float, float]:
    """Both ratings after one game that the first player scored ``score`` in (1 win, 0.5 draw, 0 loss)."""
    delta = k * (score - expected_score(rating, opponent, scale))
    return rating + delta, opponent - delta


class EloRatings:
    """Ratings by name: ``add`` a member, ``update`` after each game, read with ``ratings[name]``."""

    def __init__(self, initial: float = 1000.0, k: float = 32.0, scale: float = 400.0):
        if k <= 0 or scale <= 0:
            raise ValueError(f"Elo k ({k}) and scale ({scale}) must be positive")
        self.initial, self.k, self.scale = float(initial), float(k), float(scale)
        self._ratings: dict[str, float] = {}

    def add(self, name: str, rating: float | None = None) -> None:
        if name in self._ratings:
            raise ValueError(f"{name!r} already has an Elo rating")
        self._ratings[name] = self.initial if rating is None else float(rating)

    def reset(self, name: str) -> None:
        """Back to the initial rating (a learner whose parameters were reset)."""
        self._ratings[self._known(name)] = self.initial

    def update(self, player: str, opponent: str, score: float) -> None:
        if self._known(player) == self._known(opponent):
            return  # a game against itself moves nothing
        self._ratings[player], self._ratings[opponent] = elo_update(
            self._ratings[player], self._ratings[opponent], score, self.k, self.scale)

    def __getitem__(self, name: str) -> float:
        return self._ratings[self._known(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ratings)

    def __len__(self) -> int:
        return len(self._ratings)

    def state_dict(self) -> dict:
        return {"initial": self.initial, "k": self.k, "scale": self.scale, "ratings": dict(self._ratings)}

    def load_state_dict(self, state: dict) -> None:
        """The saved ratings; k, scale and the initial rating stay this object's (the config's)."""
        self._ratings = {str(name): float(value) for name, value in state["ratings"].items()}

    def _known(self, name: str) -> str:
        if name not in self._ratings:
            raise KeyError(f"no Elo rating for {name!r}; rated: {', '.join(self._ratings) or '(none)'}")
        return name
