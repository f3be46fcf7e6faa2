"""The league in the runtime: each learner's side of it, and the host's store of snapshots.

A multi-agent run with a league has one `LeagueHub` per host: the `League` (players, payoff, Elo, matchmaking;
`menger.league`), the `SnapshotStore` every actor on the host reads, and the newest parameters of each learner.
Each learner's Trainer holds a `LeagueKeeper` for its player::

    keeper.start(policy)                    # its first parameters: the table's "latest", and what a reset returns to
    keeper.record(meta.match_results)       # every unroll's finished games: payoff and Elo
    keeper.after_update(learner, frames)    # steps; a snapshot when due (and a reset for exploiters); the table
    hub.state() / hub.load_state()          # into and out of the checkpoints: the league resumes exactly

The keeper publishes its player's opponent table (`menger.league.opponents`) for the actors, who draw each game's
opponent from it and play frozen snapshots from the host's store without copying them. Everything the league
decides happens here, in the learner's process, under the hub's lock (several learners share it).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from pathlib import Path

import torch

from menger.league import League, write_state
from menger.league.opponents import write_table
from menger.league.snapshots import SnapshotStore

log = logging.getLogger("menger.league")

HUB_FILE = "hub.json"  # under the league's directory: the whole hub, what a league of several learners resumes


class LeagueHub:
    """What the learners of one league share on a host: the league, the snapshots, each learner's newest key."""

    def __init__(self, config, directory: str | Path, seed: int):
        self.dir = Path(directory)
        self.league = League(config, seed=seed)
        self.store = SnapshotStore(self.dir / "snapshots")
        self.lock = threading.RLock()
        self.current: dict[str, str] = {}  # learner -> key of its newest stored parameters
        self.initial: dict[str, str] = {}  # learner -> key of its first parameters (where a reset goes back to)
        self.table_version = 0
        self._recent: dict[str, deque] = {}  # learner -> its last current keys, deleted once no table can name them

    def set_current(self, player: str, policy: torch.nn.Module) -> None:
        """Store `player`'s parameters as they are now, and delete its current parameters of three refreshes ago
        unless the league keeps them (a snapshot, a first version): readers have had that long to open them."""
        key = self.store.put(policy)
        self.current[player] = key
        recent = self._recent.setdefault(player, deque())
        if key not in recent:
            recent.append(key)
        while len(recent) > 3:
            old = recent.popleft()
            kept = {p.snapshot_key for p in self.league.players()} | set(self.initial.values()) | \
                set(self.current.values())
            if old not in kept:
                self.store.delete(old)

    def table_path(self, player: str) -> Path:
        return self.dir / "tables" / f"{player}.json"

    def publish(self, player: str) -> None:
        """Write `player`'s opponent table: every entry names how an actor builds the opponent."""
        with self.lock:
            entries = []
            for row in self.league.opponents_table(player):
                if row.snapshot_key is not None:
                    spec = f"snapshot:{row.snapshot_key}"
                elif row.spec is not None:
                    spec = row.spec
                elif row.name in self.current:  # a learner, as it is now: its newest stored parameters
                    spec = f"snapshot:{self.current[row.name]}"
                else:  # a learner whose trainer has not started yet: in the table from the next refresh
                    continue
                entries.append({"name": row.name, "spec": spec, "weight": float(row.weight)})
            self.table_version += 1
            write_table(self.table_path(player), entries, self.table_version)

    def save_state(self) -> None:
        """`state.json` (the league, for `menger league RUN`) and `hub.json` (all of this, for a resume)."""
        with self.lock:
            write_state(self.league, self.dir / "state.json")
            write_json(self.dir / HUB_FILE, self.state())

    def state(self) -> dict:
        with self.lock:
            return {"league": self.league.state_dict(), "current": dict(self.current),
                    "initial": dict(self.initial), "table_version": self.table_version}

    def load_state(self, state: dict) -> None:
        with self.lock:
            self.league.load_state_dict(state["league"])
            self.current.update(state["current"])
            self.initial.update(state["initial"])
            self.table_version = int(state["table_version"])


class LeagueKeeper:
    """One learner's side of the league (module doc). `publish_s`: how often its table and newest parameters
    are refreshed for the actors (its snapshots are taken when the league says, whatever this is)."""

    def __init__(self, hub: LeagueHub, player: str, publish_s: float = 2.0):
        self.hub, self.player, self.publish_s = hub, player, publish_s
        self._published_at = 0.0
        self.snapshots_taken = 0
        self.resets = 0
        self.games = 0
        self.scores: deque[float] = deque(maxlen=200)  # the newest games' scores, for league/score_mean

    def link(self) -> tuple[str, str]:
        """What an actor needs to find its opponents: the table's path and the snapshots' directory."""
        return str(self.hub.table_path(self.player)), str(self.hub.store.dir)

    def start(self, policy: torch.nn.Module) -> None:
        with self.hub.lock:
            self.hub.set_current(self.player, policy)
            self.hub.initial.setdefault(self.player, self.hub.current[self.player])  # a resume keeps the first's
            self.hub.publish(self.player)
            self._published_at = time.monotonic()

    def record(self, results) -> None:
        if not results:
            return
        with self.hub.lock:
            league = self.hub.league
            for opponent, score in results:
                if not _member(league, opponent):
                    continue  # "random" before an actor read its first table: not a league member
                league.record(self.player, opponent, score)
                self.games += 1
                self.scores.append(score)

    def after_update(self, learner, frames: int) -> bool:
        """Steps, then a snapshot when the league says (True when the learner was reset to its first parameters)."""
        reset = False
        with self.hub.lock:
            league = self.hub.league
            league.update_steps(self.player, int(frames))
            if league.snapshot_due(self.player):
                key = self.hub.store.put(learner.policy)
                name, reset = league.snapshot(self.player, key)
                self.snapshots_taken += 1
                log.info("league: %s snapshotted as %s at %d frames%s", self.player, name, frames,
                         "; reset to its first parameters" if reset else "")
                if reset:
                    self._reset(learner)
                self._refresh(learner)
            elif time.monotonic() - self._published_at >= self.publish_s:
                self._refresh(learner)
        return reset

    def _refresh(self, learner) -> None:
        self.hub.set_current(self.player, learner.policy)
        self.hub.publish(self.player)
        self._published_at = time.monotonic()

    def _reset(self, learner) -> None:
        params = self.hub.store.open(self.hub.initial[self.player])
        with torch.no_grad():
            learner.policy.load_state_dict({name: t.clone() for name, t in params.items()})
        learner.optimizer = learner._make_optimizer()
        self.resets += 1

    def metrics(self) -> dict:
        with self.hub.lock:
            league = self.hub.league
            out = {"league/elo": league.rating(self.player), "league/members": len(league.players()),
                   "league/snapshots": sum(1 for p in league.players() if p.role == "historical"),
                   "league/games": self.games, "league/resets": self.resets}
            if self.scores:
                out["league/score_mean"] = sum(self.scores) / len(self.scores)
            return out


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _member(league: League, name: str) -> bool:
    try:
        league.player(name)
        return True
    except KeyError:
        return False
