"""The state of a PettingZoo AEC game, cloned and stepped for search.

PettingZoo's classic envs keep their whole position in plain attributes of the raw env (Connect Four's `board`,
the agent selector, the rewards and terminations), so a clone is a new raw env object with those attributes
copied and the spaces shared: about 10 µs, where `copy.deepcopy` of the env goes through its pickling support
(EzPickle) and builds a fresh, empty game. The games that qualify are the perfect-information turn-based ones whose state
is that plain (`SEARCHABLE`); a card game's hidden hands would let search see what the player cannot.
"""
from __future__ import annotations

import pickle
from typing import Any, Hashable

import numpy as np

# raw env classes known to keep their position in copyable attributes (tested in tests/search)
SEARCHABLE = {
    "pettingzoo.classic.connect_four.connect_four": "Connect Four",
    "pettingzoo.classic.tictactoe.tictactoe": "Tic-Tac-Toe",
}
# attributes that describe the game rather than the position: shared between clones
_SHARED = frozenset({"action_spaces", "observation_spaces", "possible_agents", "screen", "render_mode",
                     "_ezpickle_args", "_ezpickle_kwargs", "metadata"})


def searchable_games() -> str:
    """The games search can clone, for messages: 'Connect Four (pettingzoo.classic.connect_four), ...'."""
    return ", ".join(f"{name} ({module.rsplit('.', 1)[0]})" for module, name in SEARCHABLE.items())


def searchable(env: Any) -> bool:
    """True for an AEC env (wrapped or raw) of a game `PettingZooState` can clone."""
    return type(getattr(env, "unwrapped", env)).__module__ in SEARCHABLE


def search_state(env: Any):
    """The position of a searchable game's env for search: Connect Four's own bitboards
    (`menger.search.connect_four`, the same game move for move, cloned and stepped an order of magnitude faster),
    any other game's `PettingZooState`."""
    raw = getattr(env, "unwrapped", env)
    if type(raw).__module__ == "pettingzoo.classic.connect_four.connect_four":
        from menger.search.connect_four import ConnectFourState

        return ConnectFourState.from_env(raw)
    return PettingZooState(env)


class PettingZooState:
    """A position of a PettingZoo AEC game: `PettingZooState(env)` copies the env's current position (the env is
    never stepped by search)."""

    def __init__(self, env: Any, *, _raw: Any = None):
        self._observed = None  # the seat to move's observation, read once per position
        if _raw is not None:
            self.raw = _raw
            return
        raw = getattr(env, "unwrapped", env)
        if not searchable(raw):
            raise ValueError(f"search cannot clone {type(raw).__module__}.{type(raw).__name__}: it searches the "
                             f"perfect-information games whose state it can copy: {searchable_games()}")
        self.raw = _copy_raw(raw)

    def clone(self) -> "PettingZooState":
        return PettingZooState(None, _raw=_copy_raw(self.raw))

    def step(self, action: int) -> None:
        self.raw.step(int(action))
        self._observed = None

    def to_move(self) -> Hashable:
        return self.raw.agent_selection

    def observe(self) -> dict:
        """The seat to move's observation, as PettingZoo gives it ({"observation", "action_mask"})."""
        if self._observed is None:
            self._observed = self.raw.observe(self.raw.agent_selection)
        return self._observed

    def legal(self) -> np.ndarray:
        return np.asarray(self.observe()["action_mask"])

    def terminal(self) -> bool:
        raw = self.raw
        return any(raw.terminations.values()) or any(raw.truncations.values())

    def outcome(self, seat: Hashable) -> float:
        return float(np.sign(self.raw.rewards[seat]))


def _copy_raw(raw: Any) -> Any:
    """A new raw env with the position copied deep (one pickle round trip: 10 µs for Connect Four here, against
    34 µs for `copy.deepcopy` of the same attributes) and the descriptive attributes shared."""
    clone = object.__new__(type(raw))
    position = {key: value for key, value in vars(raw).items() if key not in _SHARED}
    clone.__dict__.update({key: value for key, value in vars(raw).items() if key in _SHARED})
    clone.__dict__.update(pickle.loads(pickle.dumps(position, pickle.HIGHEST_PROTOCOL)))
    return clone
