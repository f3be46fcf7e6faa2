"""League members and each role's rules: whom it plays (a distribution over opponents) and what a snapshot needs.

Learners (``main``, ``main_exploiter``, ``league_exploiter``) train; ``historical`` players are their frozen
snapshots and ``fixed`` players opponents that never learn (scripted bots). Each role's matchmaking is a pure
function of the members, their win rates and the config, returning the probability of each opponent; the
``League`` samples from it, or hands it to actors that sample for themselves. The branches are AlphaStar's
pseudocode (``get_match``), with its random choices turned into the probabilities they draw with:

* main agent: PFSP over every historical player (``main_mix[0]``, 0.5); against a main agent m drawn uniformly,
  self-play (0.35) -- m itself, or m's snapshots by PFSP var if it wins less than ``curriculum_win_rate``
  against m -- or verification (0.15): the main exploiters' snapshots by PFSP if it beats one of them less than
  ``curriculum_win_rate``, else m's snapshots it has forgotten (the monotonic suffix removed) by PFSP if it
  beats one less than ``snapshot_win_rate``, else self-play. No historical players yet: self-play.
* main exploiter: a main agent m drawn uniformly; m's snapshots by PFSP var when it wins less than
  ``exploiter_min_win_rate`` against m (and m has snapshots), else m.
* league exploiter: PFSP over every historical player (the main agents while there are none).
* selfplay mode's one main agent: its newest snapshot (``latest``), or all historical players uniformly or by
  PFSP; itself until the first snapshot.

A learner may be snapshotted once it trained ``min_snapshot_steps`` since its last one and beats every relevant
opponent (main agents and league exploiters: all historical players; main exploiters: the main agents; selfplay:
its newest snapshot with ``latest``, else every historical player) more than ``snapshot_win_rate`` of the time,
or once ``snapshot_steps`` have passed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from menger.league.config import LeagueConfig
from menger.league.pfsp import pfsp_weights

__all__ = ["FIXED", "HISTORICAL", "LEARNER_ROLES", "Player", "opponent_distribution", "remove_monotonic_suffix",
           "snapshot_opponents"]

LEARNER_ROLES = ("main", "main_exploiter", "league_exploiter")
HISTORICAL = "historical"
FIXED = "fixed"

WinRate = Callable[[str, str], float]
Distribution = dict[str, float]


@dataclass(frozen=True)
class Player:
    """One league member, as plain data (the League replaces the record when something changes)."""

    name: str
    role: str  # main | main_exploiter | league_exploiter | historical | fixed
    parent: Optional[str] = None  # historical: the learner it is a snapshot of
    snapshot_key: Optional[str] = None  # historical: where the runtime saved its parameters (opaque)
    spec: Optional[str] = None  # fixed: what the runtime builds it from, e.g. "bot:random"
    steps: int = 0  # learners: steps trained so far; historical: its learner's steps when it was taken
    snapshot_step: int = 0  # learners: steps at the last snapshot
    snapshots: int = 0  # learners: snapshots taken of it
    games: int = 0  # games recorded with it

    @property
    def learning(self) -> bool:
        return self.role in LEARNER_ROLES

    @property
    def frozen(self) -> bool:
        return self.role in (HISTORICAL, FIXED)


def opponent_distribution(me: Player, players: Sequence[Player], win_rate: WinRate,
                          cfg: LeagueConfig) -> Distribution:
    """The probability of each opponent ``me`` plays next (names in league order, zero weights left out)."""
    if cfg.mode == "selfplay":
        mixed = _selfplay(me, players, win_rate, cfg)
    elif me.role == "main":
        mixed = _main_agent(me, players, win_rate, cfg)
    elif me.role == "main_exploiter":
        mixed = _main_exploiter(me, players, win_rate, cfg)
    elif me.role == "league_exploiter":
        historical = _frozen(players)
        mixed = _pfsp(me, historical, win_rate, cfg.pfsp_weighting) if historical else \
            _uniform(_role(players, "main"))
    else:
        raise ValueError(f"{me.name!r} is a {me.role} player: only learners choose opponents")
    order = {player.name: index for index, player in enumerate(players)}
    return {name: mixed[name] for name in sorted(mixed, key=order.__getitem__) if mixed[name] > 0.0}


def snapshot_opponents(me: Player, players: Sequence[Player], cfg: LeagueConfig) -> list[Player]:
    """The opponents ``me`` has to beat for a snapshot by win rate."""
    if me.role == "main_exploiter":
        return _role(players, "main")
    if cfg.mode == "selfplay" and cfg.opponent == "latest":
        return _snapshots_of(players, me.name)[-1:]  # the only one it plays
    return _frozen(players)


def remove_monotonic_suffix(win_rates: np.ndarray, players: list[Player]) -> tuple[np.ndarray, list[Player]]:
    """AlphaStar's rule: drop the newest snapshots while win rates keep falling towards them (those are not
    forgotten, only stronger); what is left ends at the last snapshot that it beats more often than its
    predecessor."""
    for index in range(len(win_rates) - 1, 0, -1):
        if win_rates[index - 1] < win_rates[index]:
            return win_rates[:index + 1], players[:index + 1]
    return win_rates[:0], []


def _main_agent(me: Player, players: Sequence[Player], win_rate: WinRate, cfg: LeagueConfig) -> Distribution:
    historical = _frozen(players)
    if not historical:
        return {me.name: 1.0}
    pfsp_share, selfplay_share, verification_share = cfg.main_mix
    mains = _role(players, "main")
    parts = [(pfsp_share, _pfsp(me, historical, win_rate, cfg.pfsp_weighting))]
    for main in mains:
        selfplay = _selfplay_branch(me, main, players, win_rate, cfg)
        verification = _verification_branch(me, main, players, win_rate, cfg)
        parts.append((selfplay_share / len(mains), selfplay))
        parts.append((verification_share / len(mains), selfplay if verification is None else verification))
    return _mix(parts)


def _selfplay_branch(me: Player, main: Player, players: Sequence[Player], win_rate: WinRate,
                     cfg: LeagueConfig) -> Distribution:
    if win_rate(me.name, main.name) > cfg.curriculum_win_rate:
        return {main.name: 1.0}
    snapshots = _snapshots_of(players, main.name)
    return _pfsp(me, snapshots, win_rate, "var") if snapshots else {main.name: 1.0}


def _verification_branch(me: Player, main: Player, players: Sequence[Player], win_rate: WinRate,
                         cfg: LeagueConfig) -> Optional[Distribution]:
    exploiters = {player.name for player in _role(players, "main_exploiter")}
    exploiter_snapshots = [player for player in _frozen(players) if player.parent in exploiters]
    rates = np.array([win_rate(me.name, player.name) for player in exploiter_snapshots])
    if len(rates) and rates.min() < cfg.curriculum_win_rate:
        return _pfsp(me, exploiter_snapshots, win_rate, cfg.pfsp_weighting)
    own = _snapshots_of(players, main.name)
    rates, own = remove_monotonic_suffix(np.array([win_rate(me.name, player.name) for player in own]), own)
    if len(rates) and rates.min() < cfg.snapshot_win_rate:
        return _pfsp(me, own, win_rate, cfg.pfsp_weighting)
    return None


def _main_exploiter(me: Player, players: Sequence[Player], win_rate: WinRate, cfg: LeagueConfig) -> Distribution:
    mains = _role(players, "main")
    if not mains:
        raise ValueError(f"main exploiter {me.name!r} has no main agent to play; add one with "
                         "League.add_player('main', name)")
    parts = []
    for main in mains:
        snapshots = _snapshots_of(players, main.name)
        if win_rate(me.name, main.name) >= cfg.exploiter_min_win_rate or not snapshots:
            parts.append((1.0 / len(mains), {main.name: 1.0}))
        else:
            parts.append((1.0 / len(mains), _pfsp(me, snapshots, win_rate, "var")))
    return _mix(parts)


def _selfplay(me: Player, players: Sequence[Player], win_rate: WinRate, cfg: LeagueConfig) -> Distribution:
    if cfg.opponent == "latest":
        snapshots = _snapshots_of(players, me.name)
        return {snapshots[-1].name if snapshots else me.name: 1.0}
    pool = _frozen(players)
    if not pool:
        return {me.name: 1.0}
    fixed = [player for player in pool if player.role == FIXED]
    if cfg.fixed_share > 0 and fixed and len(fixed) < len(pool):  # the fixed ones get their share whatever
        rest = [player for player in pool if player.role != FIXED]
        return _mix([(cfg.fixed_share, _uniform(fixed)), (1.0 - cfg.fixed_share, _chosen(me, rest, win_rate, cfg))])
    return _chosen(me, pool, win_rate, cfg)


def _chosen(me: Player, pool: Sequence[Player], win_rate: WinRate, cfg: LeagueConfig) -> Distribution:
    return _uniform(pool) if cfg.opponent == "uniform" else _pfsp(me, pool, win_rate, cfg.pfsp_weighting)


def _pfsp(me: Player, opponents: Sequence[Player], win_rate: WinRate, weighting: str) -> Distribution:
    weights = pfsp_weights([win_rate(me.name, player.name) for player in opponents], weighting)
    return _mix([(float(weight), {player.name: 1.0}) for weight, player in zip(weights, opponents)])


def _uniform(opponents: Sequence[Player]) -> Distribution:
    return {player.name: 1.0 / len(opponents) for player in opponents}


def _mix(parts: list[tuple[float, Distribution]]) -> Distribution:
    mixed: Distribution = {}
    for share, distribution in parts:
        for name, probability in distribution.items():
            mixed[name] = mixed.get(name, 0.0) + share * probability
    return mixed


def _frozen(players: Sequence[Player]) -> list[Player]:
    return [player for player in players if player.frozen]


def _role(players: Sequence[Player], role: str) -> list[Player]:
    return [player for player in players if player.role == role]


def _snapshots_of(players: Sequence[Player], parent: str) -> list[Player]:
    return [player for player in players if player.role == HISTORICAL and player.parent == parent]
