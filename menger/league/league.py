"""The league: its members, their games, ratings and snapshots, and whom each learner plays next.

The league holds bookkeeping only, never parameters: a snapshot is a name and the opaque key the runtime saved
the parameters under. The runtime's loop, one learner at a time::

    league = League(config.league, seed=config.runtime.seed)     # the config's learners and fixed opponents
    for player in league.learners():
        publish(player, league.opponents_table(player))          # actors draw opponents from it themselves,
        ...                                                      # or: league.choose_opponent(player)
    # after each finished game, from the learner's view (1 win, 0.5 draw, 0 loss):
    league.record(player, opponent, outcome)                     # payoff table and Elo
    # after each update:
    league.update_steps(player, total_env_steps_of_that_learner)
    if league.snapshot_due(player):
        key = save_parameters(player)                            # e.g. a content hash of the parameters
        name, reset = league.snapshot(player, key)               # `name` is a new historical player
        if reset:
            restore_initial_parameters(player)
    # with every checkpoint:
    write_state(league, run_dir / STATE_FILE)                    # what `menger league RUN` reads
    ...
    league.load_state_dict(read_state(run_dir / STATE_FILE))    # a resume: the same choices from here on

``opponents_table`` is the distribution ``choose_opponent`` draws from (with the league's own seeded NumPy
generator), so matchmaking can run in the league or in each actor from a published table. The state
(``state_dict``) is plain JSON data: members, payoff counts, ratings, step counters and the generator's state,
and a league loaded from it makes exactly the choices the saved one would have made.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np

from menger.config import to_dict
from menger.league.config import LeagueConfig
from menger.league.elo import EloRatings
from menger.league.payoff import PayoffTable, check_outcome
from menger.league.players import (FIXED, HISTORICAL, LEARNER_ROLES, Player, opponent_distribution,
                                   snapshot_opponents)

__all__ = ["League", "Opponent", "STATE_FILE", "STATE_FORMAT", "read_state", "write_state"]

STATE_FILE = Path("league") / "state.json"  # under the run directory
STATE_FORMAT = "menger.league/1"


class Opponent(NamedTuple):
    """One row of a learner's opponent table."""

    name: str
    snapshot_key: Optional[str]  # the saved parameters; None: a learner's current ones, or a fixed opponent
    weight: float  # the probability of playing it next (the table's weights sum to 1)
    spec: Optional[str] = None  # a fixed opponent: what to build it from (e.g. "bot:random")


class League:
    """Learners of three roles, their frozen snapshots and fixed opponents; see the module's docstring.

    One owner calls it (the trainer's thread); it takes no locks. Actors get tables, never the league."""

    def __init__(self, config: Optional[LeagueConfig] = None, seed: int = 0):
        self.config = LeagueConfig() if config is None else config
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._players: dict[str, Player] = {}
        self._payoff = PayoffTable(self.config.payoff_decay, self.config.min_games)
        self._elo = EloRatings(self.config.elo_initial, self.config.elo_k)
        roles = (("main", self.config.main_agents), ("main_exploiter", self.config.main_exploiters),
                 ("league_exploiter", self.config.league_exploiters))
        for role, count in roles:
            for index in range(count):
                self.add_player(role, f"{role}_{index}")
        for spec in self.config.fixed_opponents:
            self.add_fixed(spec)

    # --- members ------------------------------------------------------------------------------------------

    def add_player(self, role: str, name: str) -> Player:
        """A new learner: ``main``, ``main_exploiter`` or ``league_exploiter``."""
        if role not in LEARNER_ROLES:
            raise ValueError(f"role {role!r} is not a learner's; choose one of {', '.join(LEARNER_ROLES)} (fixed "
                             "opponents: League.add_fixed)")
        if self.config.mode == "selfplay" and (role != "main" or self.learners()):
            raise ValueError(f"a selfplay league has one main agent; {name!r} ({role}) needs league.mode=league")
        return self._add(Player(name=self._new_name(name), role=role))

    def add_fixed(self, spec: str, name: Optional[str] = None) -> Player:
        """An opponent that never learns (a scripted bot), built by the runtime from ``spec``; named ``spec``."""
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError(f"a fixed opponent needs a non-empty spec such as 'bot:random', got {spec!r}")
        return self._add(Player(name=self._new_name(spec if name is None else name), role=FIXED, spec=spec))

    def players(self) -> list[Player]:
        """Every member in the order it joined (records are frozen copies)."""
        return list(self._players.values())

    def learners(self) -> list[str]:
        return [player.name for player in self._players.values() if player.learning]

    def player(self, name: str) -> Player:
        if name not in self._players:
            raise KeyError(f"no league member {name!r}; members: {', '.join(self._players) or '(none)'}")
        return self._players[name]

    def rating(self, name: str) -> float:
        return self._elo[self.player(name).name]

    def win_rate(self, player: str, opponent: str) -> float:
        return self._payoff.win_rate(self.player(player).name, self.player(opponent).name)

    # --- matchmaking --------------------------------------------------------------------------------------

    def opponents_table(self, player: str) -> list[Opponent]:
        """The distribution the learner ``player`` draws its next opponents from."""
        me = self._learner(player)
        distribution = opponent_distribution(me, self.players(), self._payoff.win_rate, self.config)
        return [Opponent(name, self._players[name].snapshot_key, weight, self._players[name].spec)
                for name, weight in distribution.items()]

    def choose_opponent(self, player: str) -> str:
        """One draw from ``opponents_table(player)`` with the league's generator."""
        table = self.opponents_table(player)
        weights = np.array([row.weight for row in table])
        return table[int(self._rng.choice(len(table), p=weights / weights.sum()))].name

    # --- results, steps, snapshots ------------------------------------------------------------------------

    def record(self, player: str, opponent: str, outcome: float) -> None:
        """One finished game, ``outcome`` from ``player``'s view (1 win, 0.5 draw, 0 loss): payoff and Elo."""
        score = check_outcome(outcome)
        first, second = self.player(player), self.player(opponent)
        self._payoff.record(first.name, second.name, score)
        self._elo.update(first.name, second.name, score)
        for name in dict.fromkeys((first.name, second.name)):
            self._players[name] = dataclasses.replace(self._players[name], games=self._players[name].games + 1)

    def update_steps(self, player: str, steps: int) -> None:
        """The learner's total steps so far (env steps it trained on); they never go down."""
        me = self._learner(player)
        if int(steps) != steps or steps < me.steps:
            raise ValueError(f"update_steps({player!r}, {steps!r}): give the learner's total steps, an integer "
                             f">= its last count {me.steps}")
        self._players[me.name] = dataclasses.replace(me, steps=int(steps))

    def snapshot_due(self, player: str) -> bool:
        """Whether the learner should be snapshotted now (the module docstring of menger.league.players)."""
        me = self._learner(player)
        passed = me.steps - me.snapshot_step
        if passed < self.config.min_snapshot_steps:
            return False
        if passed >= self.config.snapshot_steps:
            return True
        opponents = snapshot_opponents(me, self.players(), self.config)
        if not opponents:
            return True  # nothing to beat yet
        return bool(self._payoff.win_rates(me.name, [o.name for o in opponents]).min() > self.config.snapshot_win_rate)

    def snapshot(self, player: str, key: str) -> tuple[str, bool]:
        """Freeze the learner as a new historical player whose parameters the runtime saved under ``key``.

        Returns the snapshot's name and whether the learner must go back to its initial parameters (main
        exploiters always, league exploiters with ``reset_probability``). A reset learner starts over in the
        payoff table and at the initial Elo: its old games were played by parameters that no longer exist.
        """
        me = self._learner(player)
        if not isinstance(key, str) or not key:
            raise ValueError(f"snapshot({player!r}, {key!r}): the key is a non-empty string the runtime saved "
                             "the parameters under")
        count = me.snapshots + 1
        name = self._new_name(f"{me.name}@{count}", snapshot=True)
        self._add(Player(name=name, role=HISTORICAL, parent=me.name, snapshot_key=key, steps=me.steps),
                  rating=self._elo[me.name])
        if me.role == "main_exploiter":
            reset = True
        elif me.role == "league_exploiter":
            reset = bool(self._rng.random() < self.config.reset_probability)
        else:
            reset = False
        self._players[me.name] = dataclasses.replace(me, snapshots=count, snapshot_step=me.steps)
        if reset:
            self._payoff.forget(me.name)
            self._elo.reset(me.name)
        return name, reset

    # --- state --------------------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything the league knows, as JSON-able plain data (``json.dumps`` takes it as it is)."""
        return {"format": STATE_FORMAT, "mode": self.config.mode, "config": to_dict(self.config),
                "players": [dataclasses.asdict(player) for player in self._players.values()],
                "payoff": self._payoff.state_dict(), "elo": self._elo.state_dict(),
                "rng": _plain_rng_state(self._rng.bit_generator.state)}

    def load_state_dict(self, state: dict) -> None:
        """Replace everything with a saved state (the config stays this league's: its rules apply from here)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a league state (format {state.get('format')!r}, expected {STATE_FORMAT!r})")
        if state["mode"] != self.config.mode:
            raise ValueError(f"the saved league is mode {state['mode']!r}, this one {self.config.mode!r}; resume "
                             f"with league.mode={state['mode']}")
        fields = {field.name for field in dataclasses.fields(Player)}
        players = {}
        for record in state["players"]:
            unknown = set(record) - fields
            if unknown:
                raise ValueError(f"league state: player {record.get('name')!r} has unknown fields {sorted(unknown)}")
            players[record["name"]] = Player(**record)
        payoff = PayoffTable(self.config.payoff_decay, self.config.min_games)
        payoff.load_state_dict(state["payoff"])
        elo = EloRatings(self.config.elo_initial, self.config.elo_k)
        elo.load_state_dict(state["elo"])
        if set(elo) != set(players):
            raise ValueError(f"league state: the ratings ({sorted(elo)}) do not name the players ({sorted(players)})")
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state["rng"]
        self._players, self._payoff, self._elo, self._rng = players, payoff, elo, rng

    # --- helpers ------------------------------------------------------------------------------------------

    def _add(self, player: Player, rating: Optional[float] = None) -> Player:
        self._players[player.name] = player
        self._elo.add(player.name, rating)
        return player

    def _new_name(self, name: str, snapshot: bool = False) -> str:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a league member needs a non-empty name, got {name!r}")
        if "@" in name and not snapshot:
            raise ValueError(f"{name!r}: '@' is reserved for snapshot names (main_0@3); choose another name")
        if name in self._players:
            raise ValueError(f"the league already has a member named {name!r}")
        return name

    def _learner(self, name: str) -> Player:
        player = self.player(name)
        if not player.learning:
            raise ValueError(f"{name!r} is a {player.role} player, not a learner: it has no steps, snapshots or "
                             f"opponents of its own (learners: {', '.join(self.learners()) or '(none)'})")
        return player


def _plain_rng_state(state: dict) -> dict:
    return json.loads(json.dumps(state))  # plain dicts and ints, whatever NumPy hands out


def write_state(league: League, path: str | os.PathLike[str]) -> Path:
    """``league.state_dict()`` as JSON at ``path``, written next to it and renamed (never half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(league.state_dict(), indent=1))
    os.replace(partial, path)
    return path


def read_state(path: str | os.PathLike[str]) -> dict:
    """A league state written by ``write_state``; a missing file says what writes it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no league state at {path}: a run with a league writes it with each checkpoint "
                                f"(RUN_DIR/{STATE_FILE.as_posix()})")
    state = json.loads(path.read_text())
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"{path} is not a league state (expected format {STATE_FORMAT!r})")
    return state
