"""The league's settings: who plays in it, how opponents are chosen, when snapshots are taken.

Constants are AlphaStar's (Vinyals et al. 2019, the pseudocode's ``MainPlayer``, ``MainExploiter``,
``LeagueExploiter``) as DI-engine configures them (``ding/league``: branch probabilities 0.5 / 0.35 / 0.15,
snapshots above a 0.7 win rate, a league exploiter reset with probability 0.25, payoff decay 0.99, 0.5 below 8
games). Steps are the learner's env steps, as the runtime reports them to ``League.update_steps``.
"""
from __future__ import annotations

from menger.experiment import LeagueConfig  # the experiment's `league` section, defined with the other sections

__all__ = ["LeagueConfig"]
