"""Scripted wargame bots, a ladder of three, and ``play`` to pit two of them against each other.

A bot is anything with ``act(observation, action_mask) -> action`` over ONE agent's PettingZoo observation
(its flat ``observation`` vector and its ``action_mask``), so a bot of your own plugs in the same way; a bot
may add ``act_batch(observations [N, D], masks [N, K]) -> actions [N]`` for many agents at once, which
``play`` uses when it is there. The ladder, weakest first:

* ``random``: a uniformly random allowed action.
* ``attack-nearest``: attack the nearest enemy in range; else walk (shortest path round walls) towards the
  nearest visible enemy; else towards the nearest capture zone, and hold it.
* ``focus-fire``: the team shares its attacks out so that each lands on the weakest enemy in range that
  the allies before it (in slot order) do not already kill; a unit at or below ``retreat_hp`` of its hit
  points that cannot attack steps away from the enemies it sees; one waiting for its cooldown with an enemy
  in its range holds its ground; otherwise it moves as attack-nearest does.

    red, blue = make_bot("focus-fire", seed=0), make_bot("attack-nearest", seed=1)
    red_wins, draws, blue_wins = play(red, blue, games=50, seed=0)
"""

from __future__ import annotations

import abc
from typing import Callable, Protocol

import numpy as np

from menger.envs.wargame.config import WargameConfig, _path_lengths, make_config
from menger.envs.wargame.core import BLUE, DRAW, RED, ObservationLayout, WargameBatch


class Bot(Protocol):
    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int: ...


class RandomBot:
    """A uniformly random allowed action."""

    def __init__(self, config: WargameConfig | None = None, seed: int | None = None):
        self.rng = np.random.default_rng(seed)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.act_batch(np.asarray(observation)[None], np.asarray(action_mask)[None])[0])

    def act_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        scores = self.rng.random(masks.shape) * (np.asarray(masks) > 0)
        return scores.argmax(-1)


class _Decoded:
    """The parts of a batch of observations the scripted bots read."""

    def __init__(self, layout: ObservationLayout, observations: np.ndarray, config: WargameConfig):
        parts = layout.split(np.asarray(observations, dtype=np.float32))
        T, H, W = layout.num_types, layout.height, layout.width
        names = list(layout.self_names)
        own = parts["self"]
        if layout.plane_names:
            self.walls = parts["planes"][:, 0] > 0.5                                    # [N, H, W]
            self.zone = parts["planes"][:, 1] > 0.5
        else:                         # no planes: the map from the config, turned for blue as its view is
            turned = config.rotate_blue & (own[:, names.index("team")] > 0.5)
            walls = config.map.walls.reshape(H, W)
            zone = config.map.capture_zone.any(0).reshape(H, W)
            self.walls = np.where(turned[:, None, None], walls[::-1, ::-1], walls)
            self.zone = np.where(turned[:, None, None], zone[::-1, ::-1], zone)
        self.hp = own[:, names.index("hp")]
        self.cell = self._cell(own[:, 2 + T], own[:, 3 + T], H, W)                     # [N]
        enemies = parts["enemies"]
        self.visible = enemies[..., 0] > 0.5                                            # [N, n]
        self.enemy_hp = enemies[..., 1]                                                 # fraction of its full hp
        self.enemy_type = enemies[..., 2:2 + T].argmax(-1)
        self.enemy_cell = self._cell(enemies[..., 2 + T], enemies[..., 3 + T], H, W)    # [N, n]
        self.attackable = enemies[..., 4 + T] > 0.5
        allies = parts["allies"]
        self.ally_alive = allies[..., 0] > 0.5                                          # [N, n]
        self.ally_type = allies[..., 2:2 + T].argmax(-1)
        self.ally_cell = self._cell(allies[..., 2 + T], allies[..., 3 + T], H, W)
        self.ally_ready = allies[..., 4 + T] > 0.5

    @staticmethod
    def _cell(row: np.ndarray, col: np.ndarray, height: int, width: int) -> np.ndarray:
        rows = np.rint(row * max(height - 1, 1)).astype(np.int64)
        cols = np.rint(col * max(width - 1, 1)).astype(np.int64)
        return rows * width + cols


class _ScriptedBot(abc.ABC):
    """Shared machinery: decoding, shortest paths (from the observation's own wall plane) and moves."""

    retreat_hp = 0.0

    def __init__(self, config: WargameConfig | None = None, seed: int | None = None):
        self.config = config if config is not None else WargameConfig()
        self.layout = ObservationLayout.of(self.config)
        self.moves = self.config.map.moves
        self.rng = np.random.default_rng(seed)
        self._paths: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.act_batch(np.asarray(observation)[None], np.asarray(action_mask)[None])[0])

    def act_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        observations, masks = np.asarray(observations), np.asarray(masks) > 0
        if observations.shape[-1] != self.layout.size or masks.shape[-1] != self.layout.num_actions:
            raise ValueError(f"observations of size {observations.shape[-1]} and masks of {masks.shape[-1]} "
                             f"actions do not fit this bot's game ({self.layout.size}, {self.layout.num_actions}); "
                             "build the bot with the config of the game it plays (make_bot(name, config=...))")
        seen = _Decoded(self.layout, observations, self.config)
        actions = np.zeros(len(observations), dtype=np.int64)
        alive = seen.hp > 0
        if not alive.any():
            return actions
        move_target, path = self._tables(seen.walls[np.flatnonzero(alive)[0]])
        chosen = self._choose(seen, masks, move_target, path)
        return np.where(alive & masks[np.arange(len(masks)), chosen], chosen, 0)

    def _tables(self, walls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = walls.tobytes()
        if key not in self._paths:
            height, width = walls.shape
            rr, cc = np.divmod(np.arange(height * width), width)
            tr, tc = rr[:, None] + self.moves[:, 0], cc[:, None] + self.moves[:, 1]
            inside = (tr >= 0) & (tr < height) & (tc >= 0) & (tc < width)
            target = np.where(inside, tr * width + tc, -1)
            target[inside] = np.where(walls.ravel()[target[inside]], -1, target[inside])
            self._paths[key] = (target, _path_lengths(walls, target))
        return self._paths[key]

    @abc.abstractmethod
    def _choose(self, seen: _Decoded, masks, move_target, path) -> np.ndarray:
        """Each unit's action [N]: what makes one scripted bot differ from another."""

    def _attack(self, seen: _Decoded, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(can attack [N], action [N]): the attackable enemy slot with the smallest ``key`` [N, n]."""
        key = np.where(seen.attackable, key, np.inf)
        slot = key.argmin(1)
        return seen.attackable.any(1), self.layout.attack_action(0) + slot

    def _advance(self, seen: _Decoded, masks, move_target, path) -> np.ndarray:
        """Towards the nearest visible enemy, else the nearest capture zone cell (then hold), else across."""
        N = len(seen.cell)
        enemy_path = np.where(seen.visible, path[seen.cell[:, None], seen.enemy_cell], np.inf)
        target = seen.enemy_cell[np.arange(N), enemy_path.argmin(1)]
        zone = seen.zone.reshape(N, -1)
        zone_path = np.where(zone, path[seen.cell], np.inf)                           # [N, cells]
        to_zone = zone_path.argmin(1)
        height, width = self.layout.height, self.layout.width
        row, col = np.divmod(seen.cell, width)
        across = (height - 1 - row) * width + (width - 1 - col)
        fallback = np.where(zone.any(1), to_zone, across)
        target = np.where(seen.visible.any(1), target, fallback)
        holding = ~seen.visible.any(1) & zone[np.arange(N), seen.cell]
        return np.where(holding, 0, self._step(seen.cell, path[:, target].T, masks, move_target))

    def _step(self, cell: np.ndarray, distance_to_goal: np.ndarray, masks, move_target) -> np.ndarray:
        """The allowed move that most lowers ``distance_to_goal`` [N, cells] (ties broken at random); the no-op
        when none lowers it."""
        N, M = len(cell), len(self.moves)
        destination = move_target[cell]                                                 # [N, M]
        allowed = masks[:, 1:1 + M] & (destination >= 0)
        after = np.take_along_axis(distance_to_goal, np.maximum(destination, 0), axis=1)
        after = np.where(allowed, after + 0.1 * self.rng.random((N, M)), np.inf)
        best = after.argmin(1)
        now = distance_to_goal[np.arange(N), cell]
        return np.where(after[np.arange(N), best] < now, 1 + best, 0)


class AttackNearestBot(_ScriptedBot):
    """Attack the nearest enemy in range; else walk towards the nearest enemy seen, else a capture zone."""

    def _choose(self, seen, masks, move_target, path):
        distance = self.config.map.distance[seen.cell[:, None], seen.enemy_cell]
        can_attack, attack = self._attack(seen, distance)
        return np.where(can_attack, attack, self._advance(seen, masks, move_target, path))


class FocusFireBot(_ScriptedBot):
    """Focus fire: the team's attacks are shared out so each lands on the weakest enemy that is not already
    dealt its death blow (no overkill); hurt units that cannot attack step back; units on cooldown with an
    enemy in reach hold; else they move as attack-nearest does.

    Every unit works out the same plan from what its team sees (allies' positions, types and cooldowns, the
    visible enemies): allies in slot order each take the in-range enemy with the fewest hit points still
    left after the damage of the allies before them, and the unit attacks its own share.
    """

    def __init__(self, config: WargameConfig | None = None, seed: int | None = None, retreat_hp: float = 0.3):
        super().__init__(config, seed)
        self.retreat_hp = retreat_hp
        units = self.config.unit_types
        self.full_hp = np.array([unit.hp for unit in units], dtype=np.float32)
        self.damage = np.array([unit.damage for unit in units], dtype=np.float32)
        self.reach = np.array([unit.attack_range for unit in units], dtype=np.float32)

    def _choose(self, seen, masks, move_target, path):
        N, n = seen.enemy_hp.shape
        rows = np.arange(N)
        hp_left = np.where(seen.visible, np.rint(seen.enemy_hp * self.full_hp[seen.enemy_type]), np.inf)
        share = self._plan(seen, hp_left.copy())
        weakest_ok, weakest = self._attack(seen, hp_left + 1e-3 * np.arange(n))
        mine = (share >= 0) & seen.attackable[rows, np.maximum(share, 0)]
        attack = np.where(mine, self.layout.attack_action(0) + share, weakest)
        advance = self._advance(seen, masks, move_target, path)
        threat = np.where(seen.visible[:, :, None], path[seen.enemy_cell], np.inf).min(1)  # [N, cells]
        threat = np.where(np.isfinite(threat), threat, 1e3)
        away = self._step(seen.cell, -threat, masks, move_target)
        hurt = (seen.hp <= self.retreat_hp) & seen.visible.any(1)
        # a unit waiting for its cooldown with an enemy in its range holds its ground instead of walking in
        me = (seen.ally_cell == seen.cell[:, None]) & seen.ally_alive
        my_type = (seen.ally_type * me).sum(1)
        waiting = ~(seen.ally_ready & me).any(1)
        game_map = self.config.map
        in_reach = (seen.visible & game_map.line_of_sight[seen.cell[:, None], seen.enemy_cell]
                    & (game_map.distance[seen.cell[:, None], seen.enemy_cell] <= self.reach[my_type][:, None]))
        advance = np.where(waiting & in_reach.any(1), 0, advance)
        return np.where(weakest_ok, attack, np.where(hurt, away, advance))

    def _plan(self, seen, remaining: np.ndarray) -> np.ndarray:
        """[N] the enemy slot this unit's share of the team's plan attacks (-1: none)."""
        N, n = remaining.shape
        rows = np.arange(N)
        game_map = self.config.map
        share = np.full(N, -1)
        for ally in range(seen.ally_alive.shape[1]):
            cell = seen.ally_cell[:, ally]
            can = (seen.ally_alive[:, ally] & seen.ally_ready[:, ally])[:, None] & seen.visible
            can &= game_map.distance[cell[:, None], seen.enemy_cell] <= self.reach[seen.ally_type[:, ally]][:, None]
            can &= game_map.line_of_sight[cell[:, None], seen.enemy_cell]
            can &= remaining > 0
            key = np.where(can, remaining + 1e-3 * np.arange(n), np.inf)
            target = key.argmin(1)
            hits = can.any(1)
            remaining[rows[hits], target[hits]] -= self.damage[seen.ally_type[hits, ally]]
            is_me = hits & (cell == seen.cell)
            share = np.where(is_me, target, share)
        return share


BOTS: dict[str, Callable[..., Bot]] = {
    "random": RandomBot,
    "attack-nearest": AttackNearestBot,
    "focus-fire": FocusFireBot,
}


def make_bot(name: str, seed: int | None = 0, config: WargameConfig | None = None, render_mode: str | None = None,
             **env_config) -> Bot:
    """The bot ``name`` of ``BOTS`` for games of ``config`` (or of the keyword arguments' config: the env's own,
    ``render_mode`` too, which a bot does not need)."""
    if name not in BOTS:
        raise ValueError(f"unknown wargame bot {name!r}; choose one of {sorted(BOTS)}")
    return BOTS[name](make_config(config, **env_config), seed)


def play(bot_red: Bot | str, bot_blue: Bot | str, games: int = 50, seed: int = 0,
         config: WargameConfig | None = None, **env_config) -> tuple[int, int, int]:
    """Play ``games`` games at once on the vectorised core: (red wins, draws, blue wins). Bots given by name
    are built for this config, seeded from ``seed``."""
    cfg = make_config(config, **env_config)
    red = make_bot(bot_red, seed, cfg) if isinstance(bot_red, str) else bot_red
    blue = make_bot(bot_blue, seed + 1, cfg) if isinstance(bot_blue, str) else bot_blue
    batch = WargameBatch(cfg, games)
    out = batch.reset(seed=seed)
    n = batch.num_units
    while not out.done.all():
        obs, masks = out.obs["observation"], out.obs["action_mask"]
        actions = np.concatenate([_act(red, obs[:, :n], masks[:, :n]), _act(blue, obs[:, n:], masks[:, n:])], 1)
        out = batch.step(actions)
    winners = np.bincount(out.winner, minlength=3)
    return int(winners[RED]), int(winners[DRAW]), int(winners[BLUE])


def _act(bot: Bot, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
    games, units = observations.shape[:2]
    flat_obs, flat_masks = observations.reshape(games * units, -1), masks.reshape(games * units, -1)
    if hasattr(bot, "act_batch"):
        actions = np.asarray(bot.act_batch(flat_obs, flat_masks))
    else:
        actions = np.array([bot.act(o, m) for o, m in zip(flat_obs, flat_masks)])
    return actions.reshape(games, units)
