"""The opponents an actor's multi-agent envs play against, from the table the league publishes.

    opponents = TableOpponents(table_path, store, template_policy, env_id, seed)
    envs.set_opponents(opponents)
    # in the envs, at each game start and step (`menger.envs.multiagent.Opponents`):
    name = opponents.assign(game)                   # drawn from the table's weights; the table is re-read when it moves
    actions = opponents.act(name, raw, encoded)     # a frozen snapshot (batched), or a scripted bot

The table (`League.publish`: `RUN_DIR/league/tables/<player>.json`) lists `{name, spec, weight}` entries: `spec` is
`snapshot:<key>` (a frozen copy of a learner in the host's `SnapshotStore`), or a bot (`random`, `alphabeta:D`,
`bot:NAME`). It is written whole and renamed, so a reader sees the old table or the new one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from menger.envs.bots import act_all, make_bot
from menger.envs.multiagent import MASK_KEY, random_legal
from menger.league.snapshots import FrozenPolicy, SnapshotStore


def write_table(path: str | Path, entries: list[dict], version: int) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": version, "entries": entries}))
    os.replace(tmp, path)


def read_table(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


class FixedOpponents:
    """One opponent for every game (`env.multiagent.opponent`), when no league chooses: `random`, a bot, or
    `run:PATH`, the newest policy of another run (e.g. the main agent an exploiter is trained against), played
    frozen; its network must be the one this run builds (`template`)."""

    def __init__(self, spec: str, env_id: str, seed: int, template=None, env_kwargs: dict | None = None):
        self.spec = spec
        self.rng = np.random.default_rng(seed)
        self.bot, self.frozen = None, None
        if spec.startswith("run:"):
            if template is None:
                raise ValueError(f"opponent {spec!r}: a run's policy needs the network to play it with")
            self.frozen = FrozenPolicy(template, run_parameters(spec[4:], template), torch.Generator().manual_seed(seed))
        elif spec != "random":
            self.bot = make_bot(spec, env_id, seed, env_kwargs)

    def assign(self, game: int) -> str:
        return self.spec

    def act(self, name: str, raw: list, encoded: dict) -> np.ndarray:
        if self.frozen is not None:
            return self.frozen.act(encoded)
        if self.bot is None:
            return random_legal(encoded, self.rng)
        return act_all(self.bot, raw, encoded.get(MASK_KEY))


def run_parameters(run_dir: str, template) -> dict:
    """The newest checkpoint's policy parameters of the run in `run_dir`, checked against `template`'s."""
    from menger.checkpoint import CheckpointManager, unflatten_state

    checkpoint = CheckpointManager(Path(run_dir) / "checkpoints").load_latest()
    if checkpoint is None:
        raise FileNotFoundError(f"opponent run:{run_dir}: no checkpoint there (a league's learner is "
                                f"RUN/players/NAME)")
    params = unflatten_state(checkpoint.tensors, checkpoint.metadata)["learner"]["model"]
    mine = template.state_dict()
    if set(params) != set(mine) or any(params[k].shape != mine[k].shape for k in mine):
        raise ValueError(f"opponent run:{run_dir} has another network than this run (model.hidden, model.agents, "
                         "the env's spaces): train with the same model settings to play it")
    return params


class TableOpponents:
    """Opponents drawn from the league's published table (module doc); frozen players are built once and kept."""

    def __init__(self, table_path: str | Path, store: SnapshotStore, template, env_id: str, seed: int,
                 env_kwargs: dict | None = None):
        self.path, self.store, self.template, self.env_id = Path(table_path), store, template, env_id
        self.env_kwargs = env_kwargs or {}
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)
        self._stamp: tuple | None = None
        self.names: list[str] = []
        self.weights = np.zeros(0)
        self._spec: dict[str, str] = {}
        self._players: dict[str, object] = {}
        self.version = -1

    def refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self._stamp:
            return
        table = read_table(self.path)
        self._stamp, self.version = stamp, int(table["version"])
        entries = [e for e in table["entries"] if float(e["weight"]) > 0]
        self.names = [e["name"] for e in entries]
        weights = np.array([float(e["weight"]) for e in entries], np.float64)
        self.weights = weights / weights.sum() if len(weights) else weights
        for e in table["entries"]:  # games under way keep their opponent: an entry's name is never forgotten
            self._spec[e["name"]] = e["spec"]

    def assign(self, game: int) -> str:
        self.refresh()
        if not self.names:
            return "random"
        return self.names[int(self.rng.choice(len(self.names), p=self.weights))]

    def act(self, name: str, raw: list, encoded: dict) -> np.ndarray:
        player = self._player(self._spec.get(name, name))
        if player is None:
            return random_legal(encoded, self.rng)
        if isinstance(player, FrozenPolicy):
            return player.act(encoded)
        return act_all(player, raw, encoded.get(MASK_KEY))

    def _player(self, spec: str):
        """The player a spec names, built once. A learner's entry names its newest parameters, so it moves from
        spec to spec; the league deletes parameters no table names any more, so one gone since this table was read
        sends us to the newer table."""
        if spec not in self._players:
            if spec == "random":
                self._players[spec] = None
            elif spec.startswith("snapshot:"):
                try:
                    params = self.store.open(spec[9:])
                except FileNotFoundError:
                    self._stamp = None
                    self.refresh()
                    return self._player(self._newer(spec))
                self._players[spec] = FrozenPolicy(self.template, params, self.generator)
                self._evict()
            else:
                self._players[spec] = make_bot(spec, self.env_id, int(self.rng.integers(2**31)), self.env_kwargs)
        return self._players[spec]

    def _newer(self, spec: str) -> str:
        """What the newest table says for the entry that named `spec` (random when it is gone)."""
        names = [name for name, known in self._spec.items() if known == spec]
        return next((self._spec[n] for n in names if self._spec[n] != spec), "random")

    def _evict(self, keep: int = 64) -> None:
        """Frozen players the table no longer names go (a learner's past parameters); at most `keep` are kept."""
        named = set(self._spec.values())
        frozen = [s for s in self._players if s.startswith("snapshot:")]
        for spec in frozen[:max(0, len(frozen) - keep)]:
            if spec not in named:
                del self._players[spec]
