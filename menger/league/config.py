"""The league's settings: who plays in it, how opponents are chosen, when snapshots are taken.

Constants are AlphaStar's (Vinyals et al. 2019, the pseudocode's ``MainPlayer``, ``MainExploiter``,
``LeagueExploiter``) as DI-engine configures them (``ding/league``: branch probabilities 0.5 / 0.35 / 0.15,
snapshots above a 0.7 win rate, a league exploiter reset with probability 0.25, payoff decay 0.99, 0.5 below 8
games). Steps are the learner's env steps, as the runtime reports them to ``League.update_steps``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from menger.config import ConfigError, field, validate

__all__ = ["LeagueConfig"]


@dataclass(frozen=True)
class LeagueConfig:
    """Self-play against one's own snapshots, or an AlphaStar league of main agents and exploiters."""

    mode: Literal["selfplay", "league"] = field(
        "selfplay", doc="selfplay: one main agent plays its own snapshots (league.opponent says which); league: "
        "main agents, main exploiters and league exploiters (AlphaStar)")
    opponent: Literal["latest", "uniform", "pfsp"] = field(
        "latest", doc="selfplay: the opponent of each game: latest (the newest snapshot), uniform (any snapshot or "
        "fixed opponent), pfsp (PFSP over them, weighted by league.pfsp_weighting); before the first snapshot the "
        "learner plays itself")
    main_agents: int = field(1, min=1, doc="league: learners that play everyone (selfplay: exactly 1)")
    main_exploiters: int = field(0, min=0, doc="league: learners that play the current main agents to find their "
                                 "weaknesses, reset to their initial parameters at every snapshot (AlphaStar: 1 "
                                 "per main agent)")
    league_exploiters: int = field(0, min=0, doc="league: learners that play every snapshot by PFSP, reset with "
                                   "probability league.reset_probability at a snapshot (AlphaStar: 2 per main agent)")
    fixed_opponents: tuple[str, ...] = field(
        (), doc="opponents that never learn, each a spec the runtime knows how to build (e.g. 'bot:random', "
        "'alphabeta:2'); they play like snapshots: in PFSP and in the snapshot rules")
    main_mix: tuple[float, ...] = field(
        (0.5, 0.35, 0.15), doc="league: the main agents' share of games by branch: PFSP over all snapshots, "
        "self-play against the current main agents, verification (exploiter snapshots it loses to, then its own "
        "forgotten snapshots; self-play when there are none); sums to 1")
    pfsp_weighting: Literal["hard", "var", "linear", "linear_capped"] = field(
        "hard", doc="PFSP's f(win rate) where the opponent should be hard: hard (1-p)^2, var p(1-p), linear 1-p, "
        "linear_capped min(0.5, 1-p); the curriculum branches (an opponent too strong to learn from) always use var")
    snapshot_win_rate: float = field(0.7, min=0.0, max=1.0, doc="a learner is snapshotted when its win rate against "
                                     "every relevant opponent exceeds this (after league.min_snapshot_steps); main "
                                     "agents also verify their snapshots they beat less often than this")
    curriculum_win_rate: float = field(0.3, min=0.0, max=1.0, doc="league: a main agent that wins less than this "
                                       "against a main agent plays that agent's snapshots instead (PFSP var), and "
                                       "verifies exploiter snapshots it wins less than this against")
    exploiter_min_win_rate: float = field(0.2, min=0.0, max=1.0, doc="league: a main exploiter that wins less than "
                                          "this against a main agent plays that agent's snapshots instead (PFSP "
                                          "var; DI-engine's min_valid_win_rate, AlphaStar 0.1)")
    reset_probability: float = field(0.25, min=0.0, max=1.0, doc="league: chance that a league exploiter goes back "
                                     "to its initial parameters at a snapshot (main exploiters always do)")
    min_snapshot_steps: int = field(100_000, min=0, doc="steps a learner trains after a snapshot before the next "
                                    "one may be taken")
    snapshot_steps: int = field(200_000, min=1, doc="steps after which a learner is snapshotted whatever its win "
                                "rates (the step budget; AlphaStar: twice the minimum)")
    payoff_decay: float = field(0.99, min=0.0, max=1.0, doc="each game of a pair first multiplies that pair's win, "
                                "draw and loss counts by this (0 is refused: it would forget the game being added)")
    min_games: int = field(8, min=0, doc="a pair's win rate reads 0.5 until it has played this many games")
    elo_k: float = field(32.0, min=0.0, doc="Elo: rating points a game can move (k); the scale is 400")
    elo_initial: float = field(1000.0, doc="Elo of a new learner or fixed opponent (a snapshot starts at its "
                               "learner's rating)")

    def __post_init__(self):
        validate(self, path="league")
        problems = []
        if self.mode == "selfplay" and (self.main_agents != 1 or self.main_exploiters or self.league_exploiters):
            problems.append(f"league.mode=selfplay has one main agent and no exploiters, got main_agents="
                            f"{self.main_agents}, main_exploiters={self.main_exploiters}, league_exploiters="
                            f"{self.league_exploiters}; set league.mode=league for those")
        if len(self.main_mix) != 3 or min(self.main_mix) < 0 or not math.isclose(sum(self.main_mix), 1.0,
                                                                                 abs_tol=1e-6):
            problems.append(f"league.main_mix={list(self.main_mix)}: three shares (pfsp, self-play, verification), "
                            "each >= 0, that sum to 1, e.g. [0.5, 0.35, 0.15]")
        if self.snapshot_steps < self.min_snapshot_steps:
            problems.append(f"league.snapshot_steps={self.snapshot_steps} < league.min_snapshot_steps="
                            f"{self.min_snapshot_steps}: the step budget must be at least the minimum")
        if self.payoff_decay <= 0.0:
            problems.append("league.payoff_decay=0 would forget every game as it is added; use a value in (0, 1]")
        if len(set(self.fixed_opponents)) != len(self.fixed_opponents) or not all(
                spec.strip() for spec in self.fixed_opponents):
            problems.append(f"league.fixed_opponents={list(self.fixed_opponents)}: each spec must be a non-empty "
                            "name, given once")
        if problems:
            raise ConfigError(problems)
