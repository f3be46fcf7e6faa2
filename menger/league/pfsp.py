"""Prioritized fictitious self-play (AlphaStar): how much a player should play each opponent, from its win rates.

``pfsp_weights(win_rates, weighting)`` maps each win rate p (the player's, against that opponent) through f and
normalises. The weightings (AlphaStar's pseudocode, ``pfsp``; DI-engine's ``ding/league/algorithm.py``):

=================  ====================  ===================================================================
name               f(p)                  plays most
=================  ====================  ===================================================================
``hard``           (1 - p)^2             the opponents it loses to (AlphaStar's f_hard; DI-engine "squared")
``squared``        (1 - p)^2             the same, under DI-engine's and the pseudocode's name
``var``            p (1 - p)             the opponents near its own level (f_var; "variance")
``variance``       p (1 - p)             the same
``linear``         1 - p                 the pseudocode's default
``linear_capped``  min(0.5, 1 - p)       the pseudocode's league exploiters
=================  ====================  ===================================================================

Two fallbacks to the uniform distribution: every win rate 0 (DI-engine's rule: ``var`` would weigh them all 0)
and every weight 0 (the pseudocode's rule: ``hard`` against opponents it always beats), so the result is
always a distribution.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["WEIGHTINGS", "pfsp_weights"]

WEIGHTINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "hard": lambda p: (1.0 - p) ** 2,
    "squared": lambda p: (1.0 - p) ** 2,
    "var": lambda p: p * (1.0 - p),
    "variance": lambda p: p * (1.0 - p),
    "linear": lambda p: 1.0 - p,
    "linear_capped": lambda p: np.minimum(0.5, 1.0 - p),
}


def pfsp_weights(win_rates: Sequence[float] | np.ndarray, weighting: str = "hard") -> np.ndarray:
    """The probability of choosing each opponent: f(win rate), normalised (float64, sums to 1)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; choose one of {', '.join(WEIGHTINGS)}")
    rates = np.asarray(win_rates, dtype=np.float64)
    if rates.ndim != 1 or rates.size == 0:
        raise ValueError(f"pfsp_weights needs a non-empty 1-D sequence of win rates, got shape {rates.shape}")
    if not np.all(np.isfinite(rates)) or rates.min() < 0.0 or rates.max() > 1.0:
        raise ValueError(f"win rates must lie in [0, 1], got {rates.tolist()}")
    uniform = np.full(rates.size, 1.0 / rates.size)
    if rates.sum() < 1e-8:  # DI-engine: all-zero win rates
        return uniform
    weights = WEIGHTINGS[weighting](rates)
    total = weights.sum()
    if total < 1e-10:  # AlphaStar's pseudocode: nothing left to weigh
        return uniform
    return weights / total
