"""``WargameBatch``: G wargames stepped together with array operations, deterministic given the seeds.

Agents are slots ``0..2n-1``: red's n units first, then blue's n. Each step is simultaneous and resolved in
this order: invalid actions (not allowed by the action mask) become no-ops; every attack lands at once
(from the positions at the start of the step); units at 0 hit points die; the survivors that chose a move
take it if the cell is free of units and no other unit moves into it the same step (otherwise they stay);
cooldowns tick; capture points are scored; the game ends on elimination, a capture score or the time limit.

    batch = WargameBatch(config, num_games=64)
    obs = batch.reset(seed=0).obs                    # game g plays as a single game reset with seed + g
    for _ in range(steps):
        out = batch.step(policy(obs["observation"], obs["action_mask"]))    # actions [G, A] ints
        learn(out)                                   # this step's rewards, ends and outcomes
        # finished games stay finished (rewards 0) until reset; here at once (same-step autoreset)
        obs = batch.reset(games=out.done).obs if out.done.any() else out.obs

``StepOutput`` (batch-first arrays): ``obs`` {"observation": [G, A, D] float32, "action_mask": [G, A, K] int8},
``reward`` [G, A] float32, ``alive`` [G, A] bool (after the step), ``done`` / ``terminated`` / ``truncated``
[G] bool, ``outcome`` [G, A] int8 (+1 the agent's team won, 0 draw, -1 lost; 0 while the game goes on) and
``winner`` [G] int8 (``RED``, ``BLUE``, ``DRAW``; ``ONGOING`` while it goes on). A dead agent's observation
is all zeros and its mask allows only the no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from menger.envs.wargame.config import WargameConfig

ONGOING, RED, BLUE, DRAW = -1, 0, 1, 2
WINNER_NAMES = {RED: "red", BLUE: "blue", DRAW: "draw"}
NOOP = 0


class StepOutput(NamedTuple):
    obs: dict[str, np.ndarray]
    reward: np.ndarray
    alive: np.ndarray
    done: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    outcome: np.ndarray
    winner: np.ndarray


@dataclass(frozen=True)
class ObservationLayout:
    """Where each part of an agent's flat observation vector lies (``split`` gives named views).

    ``planes`` [C, H, W] from the agent's team's view: walls, capture zones, capture owner (+1 own team, -1
    enemy), self, allies' hp fraction, enemies' hp fraction, ally type one-hot (T planes), enemy type one-hot
    (T), cells the team sees (none with ``observe_planes: false``). Then ``self`` (its own stats), ``allies``
    [n, ...] and ``enemies`` [n, ...] per slot: enemy slot j is the target of action ``attack_action(j)``. Without
    planes, ``points`` [P, ...] then says what they showed of the capture points: who holds each and where. With
    ``relative_positions`` each slot and point ends with its offsets from the observer and their distance.
    """

    height: int
    width: int
    num_units: int
    num_types: int
    num_moves: int
    plane_names: tuple[str, ...]
    self_names: tuple[str, ...]
    ally_names: tuple[str, ...]
    enemy_names: tuple[str, ...]
    num_points: int = 0
    point_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: WargameConfig) -> "ObservationLayout":
        types = tuple(unit.name for unit in config.unit_types)
        game_map = config.map
        planes = (("wall", "capture_zone", "capture_owner", "self", "ally_hp", "enemy_hp")
                  + tuple(f"ally_{name}" for name in types) + tuple(f"enemy_{name}" for name in types) + ("seen",))
        relative = ("d_row", "d_col", "distance") if config.relative_positions else ()
        return cls(
            game_map.height, game_map.width, config.num_units, len(types), len(game_map.moves),
            planes if config.observe_planes else (),
            ("hp", "cooldown", *(f"is_{name}" for name in types), "row", "col", "team", "time", "own_score",
             "enemy_score"),
            ("alive", "hp", *(f"is_{name}" for name in types), "row", "col", "ready", *relative),
            ("visible", "hp", *(f"is_{name}" for name in types), "row", "col", "attackable", *relative),
            # without planes, what they held of the capture points: one row per point
            0 if config.observe_planes else len(game_map.capture_cells),
            () if config.observe_planes else ("held", "row", "col", *relative),
        )

    @property
    def plane_size(self) -> int:
        return len(self.plane_names) * self.height * self.width

    @property
    def size(self) -> int:
        return (self.plane_size + len(self.self_names)
                + self.num_units * (len(self.ally_names) + len(self.enemy_names))
                + self.num_points * len(self.point_names))

    @property
    def num_actions(self) -> int:
        """No-op, the moves, one attack per enemy slot."""
        return 1 + self.num_moves + self.num_units

    def attack_action(self, enemy_slot: int) -> int:
        return 1 + self.num_moves + enemy_slot

    def split(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """Views of ``obs`` [..., D]: planes [..., C, H, W], self [..., S], allies / enemies [..., n, F], points
        [..., P, F] (P = 0 with the planes)."""
        lead = obs.shape[:-1]
        n, cut = self.num_units, self.plane_size
        ally_end = cut + len(self.self_names) + n * len(self.ally_names)
        enemy_end = ally_end + n * len(self.enemy_names)
        return {
            "planes": obs[..., :cut].reshape(*lead, len(self.plane_names), self.height, self.width),
            "self": obs[..., cut:cut + len(self.self_names)],
            "allies": obs[..., cut + len(self.self_names):ally_end].reshape(*lead, n, len(self.ally_names)),
            "enemies": obs[..., ally_end:enemy_end].reshape(*lead, n, len(self.enemy_names)),
            "points": obs[..., enemy_end:].reshape(*lead, self.num_points, len(self.point_names)),
        }


class WargameBatch:
    """G games of one config, stepped together. See the module docstring for the loop and the arrays."""

    def __init__(self, config: WargameConfig | None = None, num_games: int = 1):
        if num_games < 1:
            raise ValueError(f"num_games is {num_games}; give at least 1")
        self.config = config if config is not None else WargameConfig()
        self.map = self.config.map
        self.layout = ObservationLayout.of(self.config)
        self.num_games = num_games
        n = self.config.num_units
        self.num_units, self.num_agents = n, 2 * n
        self.team = np.repeat(np.arange(2), n)                       # [A] 0 red, 1 blue
        self.enemies = np.concatenate([np.arange(n, 2 * n)[None].repeat(n, 0),
                                       np.arange(n)[None].repeat(n, 0)])    # [A, n] enemy slot -> agent
        self.allies = np.concatenate([np.arange(n)[None].repeat(n, 0),
                                      np.arange(n, 2 * n)[None].repeat(n, 0)])  # [A, n]
        self.unit_type = self.config.unit_type_index
        units = self.config.unit_types
        self.max_hp = np.array([units[t].hp for t in self.unit_type], dtype=np.int32)
        self.attack_range = np.array([units[t].attack_range for t in self.unit_type], dtype=np.float32)
        self.damage = np.array([units[t].damage for t in self.unit_type], dtype=np.int32)
        self.cooldown_steps = np.array([units[t].cooldown for t in self.unit_type], dtype=np.int32)
        self.type_one_hot = np.eye(self.layout.num_types, dtype=np.float32)[self.unit_type]  # [A, T]
        self._capture_zone = self.map.capture_zone.any(0)
        self._diagonal = max(float(np.hypot(self.map.height - 1, self.map.width - 1)), 1.0)   # scales distances
        shape = (num_games, self.num_agents)
        self.position = np.zeros(shape, dtype=np.int64)
        self.hp = np.zeros(shape, dtype=np.int32)
        self.cooldown = np.zeros(shape, dtype=np.int32)
        self.alive = np.zeros(shape, dtype=bool)
        self.score = np.zeros((num_games, 2), dtype=np.int64)
        self.steps = np.zeros(num_games, dtype=np.int64)
        self.winner = np.full(num_games, ONGOING, dtype=np.int8)
        self._seeds = np.random.default_rng()
        self._mask = np.zeros((*shape, self.layout.num_actions), dtype=bool)
        # [A, K] the absolute action each agent's action k stands for: blue's moves turned half a turn (rotate_blue)
        self._action_view = np.tile(np.arange(self.layout.num_actions), (self.num_agents, 1))
        if self.config.rotate_blue:
            moves = self.layout.num_moves
            self._action_view[n:, 1:1 + moves] = 1 + (np.arange(moves) + moves // 2) % moves

    # --- reset ------------------------------------------------------------------------------------------------

    def reset(self, seed: int | Sequence[int] | None = None, games: np.ndarray | None = None) -> StepOutput:
        """Start new games: all of them, or those where the bool array ``games`` [G] is True.

        ``seed`` (an int) seeds game g with ``seed + g``; a sequence gives each reset game its own seed; None
        draws seeds from a stream that the last int seed started.
        """
        chosen = np.ones(self.num_games, dtype=bool) if games is None else np.asarray(games, dtype=bool)
        indices = np.flatnonzero(chosen)
        if seed is None:
            seeds = self._seeds.integers(0, 2**63 - 1, size=len(indices))
        elif isinstance(seed, (int, np.integer)):
            self._seeds = np.random.default_rng(int(seed) + 2**32)
            seeds = [int(seed) + int(g) for g in indices]
        else:
            seeds = list(seed)
            if len(seeds) != len(indices):
                raise ValueError(f"{len(seeds)} seeds for {len(indices)} games to reset; give one per game")
        n = self.num_units
        red_cells, blue_cells = self.map.spawn
        for g, game_seed in zip(indices, seeds):
            rng = np.random.default_rng(int(game_seed))
            self.position[g, :n] = rng.choice(red_cells, size=n, replace=False)
            self.position[g, n:] = rng.choice(blue_cells, size=n, replace=False)
        self.hp[indices] = self.max_hp
        self.cooldown[indices] = 0
        self.alive[indices] = True
        self.score[indices] = 0
        self.steps[indices] = 0
        self.winner[indices] = ONGOING
        self._mask = self._action_masks()
        zeros = np.zeros((self.num_games, self.num_agents), dtype=np.float32)
        nothing = np.zeros(self.num_games, dtype=bool)
        return StepOutput(self.observe(), zeros, self.alive.copy(), self.done, nothing, nothing.copy(),
                          np.zeros_like(zeros, dtype=np.int8), self.winner.copy())

    def set_units(self, game: int, position: Sequence[int], hp: Sequence[int] | None = None,
                  cooldown: Sequence[int] | None = None) -> StepOutput:
        """Put game ``game``'s units on the cells ``position`` [A] (``row * width + col``; -1: dead), with
        ``hp`` / ``cooldown`` [A] if given, to set up a scenario; the game restarts its clock and scores."""
        position = np.asarray(position, dtype=np.int64)
        if position.shape != (self.num_agents,):
            raise ValueError(f"position has shape {position.shape}; give one cell per agent ({self.num_agents})")
        alive = position >= 0
        cells = position[alive]
        if (cells >= self.map.cells).any() or self.map.walls.ravel()[cells].any() or len(set(cells)) < len(cells):
            raise ValueError(f"cells {cells.tolist()} must be distinct floor cells of the map")
        self.position[game] = np.where(alive, position, 0)
        self.alive[game] = alive
        self.hp[game] = np.where(alive, self.max_hp if hp is None else np.asarray(hp), 0)
        self.cooldown[game] = 0 if cooldown is None else np.asarray(cooldown)
        self.score[game], self.steps[game], self.winner[game] = 0, 0, ONGOING
        self._mask = self._action_masks()
        zeros = np.zeros((self.num_games, self.num_agents), dtype=np.float32)
        nothing = np.zeros(self.num_games, dtype=bool)
        return StepOutput(self.observe(), zeros, self.alive.copy(), self.done, nothing, nothing.copy(),
                          np.zeros_like(zeros, dtype=np.int8), self.winner.copy())

    @property
    def done(self) -> np.ndarray:
        return self.winner != ONGOING

    # --- step -------------------------------------------------------------------------------------------------

    def step(self, actions: np.ndarray) -> StepOutput:
        """Advance every unfinished game by one simultaneous step of ``actions`` [G, A] (see the module doc)."""
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.num_games, self.num_agents):
            raise ValueError(f"actions have shape {actions.shape}; give [num_games, num_agents] = "
                             f"[{self.num_games}, {self.num_agents}] ints in [0, {self.layout.num_actions})")
        cfg, game_map, moves = self.config, self.map, self.layout.num_moves
        active = ~self.done
        in_range = (actions >= 0) & (actions < self.layout.num_actions)
        safe = self._action_view[np.arange(self.num_agents), np.where(in_range, actions, NOOP)]
        legal = np.take_along_axis(self._mask, safe[..., None], axis=-1)[..., 0] & in_range & active[:, None]
        act = np.where(legal, safe, NOOP)
        present = self.alive & active[:, None]
        reward = np.zeros(act.shape, dtype=np.float32)

        # attacks, all at once
        attacking = act > moves
        target = np.take_along_axis(self.enemies[None].repeat(self.num_games, 0),
                                    np.clip(act - 1 - moves, 0, self.num_units - 1)[..., None], axis=-1)[..., 0]
        hits = attacking[..., None] & (target[..., None] == np.arange(self.num_agents))   # [G, attacker, target]
        hp_before = self.hp
        taken = hits.astype(np.int32).transpose(0, 2, 1) @ self.damage                  # [G, target]
        hp_after = np.maximum(hp_before - taken, 0)
        killed = self.alive & (hp_after == 0)
        dealt = np.minimum(self.damage[None], np.take_along_axis(hp_before, target, axis=1)) * attacking
        kills = (hits & killed[:, None, :]).any(-1)
        reward += cfg.reward_damage * dealt + cfg.reward_kill * kills
        self.hp = hp_after
        self.alive = self.alive & ~killed
        self.cooldown = np.maximum(self.cooldown - 1, 0)
        self.cooldown = np.where(attacking, self.cooldown_steps - 1, self.cooldown)

        # moves: into a free cell that no other unit enters
        moving = self.alive & (act >= 1) & (act <= moves)
        destination = game_map.move_target[self.position, np.clip(act - 1, 0, moves - 1)]
        moving &= destination >= 0
        cells = game_map.cells
        base = np.arange(self.num_games)[:, None] * cells
        occupied = np.bincount((base + self.position)[self.alive], minlength=self.num_games * cells)
        claims = np.bincount((base + destination)[moving], minlength=self.num_games * cells)
        flat = base + np.maximum(destination, 0)
        moved = moving & (occupied[flat] == 0) & (claims[flat] == 1)
        self.position = np.where(moved, destination, self.position)

        # capture points: a team holds a point while it alone has living units in its zone
        held = self.held_points()                                                       # [G, 2, P]
        held_count = held.sum(-1) * active[:, None]                                      # [G, 2]
        self.score += held_count
        reward += cfg.reward_capture * held_count[:, self.team] * self.alive
        self.steps += active

        # the end of a game, and who won
        team_alive = np.stack([self.alive[:, :self.num_units].any(1), self.alive[:, self.num_units:].any(1)], 1)
        eliminated = ~team_alive.all(1)
        captured = (self.score >= cfg.capture_score_to_win).any(1)
        timeout = self.steps >= cfg.max_steps
        ended = active & (eliminated | captured | timeout)
        self.winner = np.where(ended, self._judge(team_alive, eliminated, captured), self.winner).astype(np.int8)
        team_outcome = np.where(self.winner[:, None] == np.arange(2), 1,
                                np.where((self.winner[:, None] == DRAW) | ~ended[:, None], 0, -1))
        outcome = (team_outcome[:, self.team] * ended[:, None]).astype(np.int8)
        reward += cfg.reward_win * outcome * present
        if cfg.team_spirit:
            reward = self._share(reward, present, cfg.team_spirit)
        terminated = ended & (eliminated | captured)
        self._mask = self._action_masks()
        return StepOutput(self.observe(), reward, self.alive.copy(), self.done, terminated, ended & ~terminated,
                          outcome, self.winner.copy())

    def _share(self, reward: np.ndarray, present: np.ndarray, spirit: float) -> np.ndarray:
        """Team spirit: each present unit's reward moves `spirit` of the way to its team's mean over present units."""
        n = self.num_units
        teams = (reward * present).reshape(-1, 2, n).sum(-1) / np.maximum(present.reshape(-1, 2, n).sum(-1), 1)
        shared = (1.0 - spirit) * reward + spirit * teams[:, self.team]
        return np.where(present, shared, reward).astype(np.float32)

    def held_points(self) -> np.ndarray:
        """[G, 2, P] each team holds capture point p: it alone has living units in the point's zone."""
        in_zone = self.map.capture_zone[:, self.position] & self.alive[None]              # [P, G, A]
        red = in_zone[..., :self.num_units].any(-1)
        blue = in_zone[..., self.num_units:].any(-1)
        return np.stack([red & ~blue, blue & ~red], 0).transpose(2, 0, 1)                 # [G, 2, P]

    def _judge(self, team_alive, eliminated, captured) -> np.ndarray:
        """Winner by elimination, else by capture score, else (time limit) by score, then hp fraction left."""
        red_score, blue_score = self.score[:, 0], self.score[:, 1]
        by_score = np.where(red_score > blue_score, RED, np.where(blue_score > red_score, BLUE, DRAW))
        hp = self.hp * self.alive
        red_hp = hp[:, :self.num_units].sum(1) / self.max_hp[:self.num_units].sum()
        blue_hp = hp[:, self.num_units:].sum(1) / self.max_hp[self.num_units:].sum()
        by_hp = np.where(red_hp > blue_hp, RED, np.where(blue_hp > red_hp, BLUE, DRAW))
        by_elimination = np.where(team_alive[:, 0], RED, np.where(team_alive[:, 1], BLUE, DRAW))
        return np.where(eliminated, by_elimination, np.where(captured | (by_score != DRAW), by_score, by_hp))

    # --- masks and observations -------------------------------------------------------------------------------

    def _action_masks(self) -> np.ndarray:
        game_map, moves = self.map, self.layout.num_moves
        mask = np.zeros((self.num_games, self.num_agents, self.layout.num_actions), dtype=bool)
        mask[..., NOOP] = True
        cells = game_map.cells
        occupied = np.zeros((self.num_games, cells + 1), dtype=bool)   # the extra cell stands for "off the map"
        np.put_along_axis(occupied, np.where(self.alive, self.position, cells), True, axis=1)
        occupied[:, cells] = True
        destination = game_map.move_target[self.position]                               # [G, A, M]
        destination = np.where(destination >= 0, destination, cells)
        free = ~np.take_along_axis(occupied, destination.reshape(self.num_games, -1), axis=1)
        mask[..., 1:1 + moves] = free.reshape(destination.shape) & self.alive[..., None]
        mask[..., 1 + moves:] = self._attackable()
        if self.done.any():
            mask[self.done, :, 1:] = False
        return mask

    def _attackable(self) -> np.ndarray:
        """[G, A, n] agent a may attack its enemy slot j now."""
        enemy_position = self.position[:, self.enemies]                                   # [G, A, n]
        own = self.position[..., None]
        close = self.map.distance[own, enemy_position] <= self.attack_range[None, :, None]
        return (close & self.map.line_of_sight[own, enemy_position] & self.alive[..., None]
                & (self.cooldown == 0)[..., None] & self.alive[:, self.enemies] & self._visible_enemies())

    def seen_cells(self) -> np.ndarray:
        """[G, 2, cells] cells some living unit of each team sees."""
        sees = self.map.line_of_sight[self.position] & (self.map.distance[self.position] <= self.config.sight_range)
        sees &= self.alive[..., None]
        n = self.num_units
        return np.stack([sees[:, :n].any(1), sees[:, n:].any(1)], 1)

    def _visible_enemies(self) -> np.ndarray:
        """[G, A, n] enemy slot j of agent a is alive and in sight of a's team (always, without fog of war)."""
        alive = self.alive[:, self.enemies]
        if not self.config.fog_of_war:
            return alive
        seen = self.seen_cells()[:, self.team]                                            # [G, A, cells]
        return alive & np.take_along_axis(seen, self.position[:, self.enemies], axis=2)

    def action_masks(self) -> np.ndarray:
        """[G, A, K] int8: 1 where an action is allowed now (in the agent's own view of the moves)."""
        if not self.config.rotate_blue:
            return self._mask.astype(np.int8)
        view = np.broadcast_to(self._action_view, self._mask.shape)
        return np.take_along_axis(self._mask, view, axis=-1).astype(np.int8)

    def observe(self) -> dict[str, np.ndarray]:
        """Every agent's observation from its own team's view, and its action mask (see ObservationLayout)."""
        G, A, n = self.num_games, self.num_agents, self.num_units
        H, W = self.map.height, self.map.width
        T = self.layout.num_types
        hp_fraction = (self.hp / self.max_hp).astype(np.float32) * self.alive
        visible = self._visible_enemies()                                                   # [G, A, n]

        obs = np.zeros((G, A, self.layout.size), dtype=np.float32)
        if self.layout.plane_names:
            self._observe_planes(obs, hp_fraction)
        row, col = np.divmod(self.position, W)
        row_f, col_f = (row / max(H - 1, 1)).astype(np.float32), (col / max(W - 1, 1)).astype(np.float32)
        parts = self.layout.split(obs)
        own = parts["self"]
        own[..., 0] = hp_fraction
        own[..., 1] = self.cooldown / self.cooldown_steps
        own[..., 2:2 + T] = self.type_one_hot
        own[..., 2 + T], own[..., 3 + T], own[..., 4 + T] = row_f, col_f, self.team
        own[..., 5 + T] = (self.steps / self.config.max_steps)[:, None]
        score = np.minimum(self.score / self.config.capture_score_to_win, 1.0)
        own[..., 6 + T], own[..., 7 + T] = score[:, self.team], score[:, 1 - self.team]
        allies, enemies = parts["allies"], parts["enemies"]
        ally_alive = self.alive[:, self.allies]
        allies[..., 0] = ally_alive
        allies[..., 1] = hp_fraction[:, self.allies]
        allies[..., 2:2 + T] = self.type_one_hot[self.allies] * ally_alive[..., None]
        allies[..., 2 + T] = row_f[:, self.allies] * ally_alive
        allies[..., 3 + T] = col_f[:, self.allies] * ally_alive
        allies[..., 4 + T] = (self.cooldown == 0)[:, self.allies] & ally_alive
        enemies[..., 0] = visible
        enemies[..., 1] = hp_fraction[:, self.enemies] * visible
        enemies[..., 2:2 + T] = self.type_one_hot[self.enemies] * visible[..., None]
        enemies[..., 2 + T] = row_f[:, self.enemies] * visible
        enemies[..., 3 + T] = col_f[:, self.enemies] * visible
        enemies[..., 4 + T] = self._mask[..., 1 + self.layout.num_moves:]
        if self.config.relative_positions:
            for part, slots, shown in ((allies, self.allies, ally_alive), (enemies, self.enemies, visible)):
                d_row, d_col = row[:, slots] - row[..., None], col[:, slots] - col[..., None]    # whole cells
                part[..., 5 + T] = d_row / max(H - 1, 1) * shown
                part[..., 6 + T] = d_col / max(W - 1, 1) * shown
                part[..., 7 + T] = self.map.distance[self.position[..., None], self.position[:, slots]] \
                    / self._diagonal * shown
        if self.layout.num_points:
            self._observe_points(parts["points"], row, col)
        obs *= self.alive[..., None]
        if self.config.rotate_blue:
            self._turn_half(parts, n)
        return {"observation": obs, "action_mask": self.action_masks()}

    def _observe_points(self, points: np.ndarray, row: np.ndarray, col: np.ndarray) -> None:
        """Fill ``points`` [G, A, P, F]: who holds each capture point (+1 the agent's team, -1 the enemy, 0 no one),
        its row and column, and with ``relative_positions`` its offsets from the agent and their distance. The
        points come in the reading order of their cells (row by row), as the agent's view shows the map."""
        H, W = self.map.height, self.map.width
        held = self.held_points().astype(np.float32)                                       # [G, 2, P]
        owner = held[:, 0] - held[:, 1]                                                     # [G, P] red +1
        points[..., 0] = np.where((self.team == 0)[None, :, None], owner[:, None], -owner[:, None])
        point_row, point_col = np.divmod(self.map.capture_cells, W)
        points[..., 1] = point_row / max(H - 1, 1)
        points[..., 2] = point_col / max(W - 1, 1)
        if self.config.relative_positions:
            points[..., 3] = (point_row - row[..., None]) / max(H - 1, 1)
            points[..., 4] = (point_col - col[..., None]) / max(W - 1, 1)
            points[..., 5] = self.map.distance[self.position[..., None], self.map.capture_cells] / self._diagonal

    def _observe_planes(self, obs: np.ndarray, hp_fraction: np.ndarray) -> None:
        """Fill the planes at the front of ``obs`` [G, A, D]: the map from each agent's team's view."""
        G, A, n = self.num_games, self.num_agents, self.num_units
        cells, T = self.map.cells, self.layout.num_types
        seen = self.seen_cells() if self.config.fog_of_war else np.ones((G, 2, cells), dtype=bool)
        # team planes [G, 2, C, cells]: team 0 as red sees it, team 1 as blue sees it
        C = len(self.layout.plane_names)
        team_planes = np.zeros((G, 2, C, cells), dtype=np.float32)
        team_planes[:, :, 0] = self.map.walls.ravel()
        team_planes[:, :, 1] = self._capture_zone
        held = self.held_points().astype(np.float32)                                       # [G, 2, P]
        owner = (held[:, 0] - held[:, 1]) @ self.map.capture_zone.astype(np.float32)        # [G, cells] red +1
        team_planes[:, 0, 2], team_planes[:, 1, 2] = owner, -owner
        unit_planes = np.zeros((G, A, 1 + T, cells), dtype=np.float32)    # hp, type one-hot, at each unit's cell
        games = np.arange(G)[:, None]
        unit_planes[games, np.arange(A), 0, self.position] = hp_fraction
        for t in range(T):
            unit_planes[games, np.arange(A), 1 + t, self.position] = self.type_one_hot[:, t] * self.alive
        red_planes, blue_planes = unit_planes[:, :n].sum(1), unit_planes[:, n:].sum(1)      # [G, 1+T, cells]
        blue_hidden = red_planes * seen[:, 1, None]     # what blue sees of red
        red_hidden = blue_planes * seen[:, 0, None]
        ally_hp, enemy_hp, ally_types, enemy_types = 4, 5, slice(6, 6 + T), slice(6 + T, 6 + 2 * T)
        team_planes[:, 0, ally_hp], team_planes[:, 0, ally_types] = red_planes[:, 0], red_planes[:, 1:]
        team_planes[:, 0, enemy_hp], team_planes[:, 0, enemy_types] = red_hidden[:, 0], red_hidden[:, 1:]
        team_planes[:, 1, ally_hp], team_planes[:, 1, ally_types] = blue_planes[:, 0], blue_planes[:, 1:]
        team_planes[:, 1, enemy_hp], team_planes[:, 1, enemy_types] = blue_hidden[:, 0], blue_hidden[:, 1:]
        team_planes[:, :, -1] = seen
        planes = obs[..., :self.layout.plane_size].reshape(G, A, C, cells)
        planes[:] = team_planes[:, self.team]
        planes[games, np.arange(A), 3, self.position] = 1.0

    def _turn_half(self, parts: dict[str, np.ndarray], n: int) -> None:
        """Turn blue's observations [G, n:] half a turn in place: cell r * W + c is cell (H-1-r) * W + (W-1-c),
        the last cell counted from the end, and row r is row H-1-r, column c column W-1-c (where a unit is shown);
        row and column offsets change sign."""
        planes = parts["planes"]
        planes[:, n:] = planes[:, n:, :, ::-1, ::-1].copy()
        T = self.layout.num_types
        if self.config.relative_positions:
            for name in ("allies", "enemies"):
                parts[name][:, n:, :, 5 + T:7 + T] *= -1.0
        for column, size in ((2 + T, self.map.height), (3 + T, self.map.width)):
            last = max(size - 1, 1)
            for name in ("self", "allies", "enemies"):
                part = parts[name][:, n:]
                where = part[..., 0] > 0                      # its hp, ally alive, enemy visible: the unit is shown
                turned = ((size - 1 - np.rint(part[..., column] * last)) / last).astype(np.float32)
                part[..., column] = np.where(where, turned, 0.0)
        if self.layout.num_points:
            self._turn_points(parts["points"][:, n:], self.alive[:, n:, None])

    def _turn_points(self, points: np.ndarray, alive: np.ndarray) -> None:
        """Turn blue's capture-point rows [G, n, P, F] half a turn in place: the points come in the reading order
        of their cells as the turned view shows the map (the last first), rows and columns turn, offsets change
        sign. A point is shown to every living unit."""
        points[:] = points[:, :, ::-1].copy()
        for column, size in ((1, self.map.height), (2, self.map.width)):
            last = max(size - 1, 1)
            points[..., column] = np.where(alive, (size - 1 - np.rint(points[..., column] * last)) / last, 0.0)
        if self.config.relative_positions:
            points[..., 3:5] *= -1.0

    def state(self) -> np.ndarray:
        """[G, S] float32 global state for a centralised critic, red first, no fog: the map as planes (unless
        ``observe_planes`` is off), then a row per unit (alive, hit points, row, column, cooldown, type one-hot),
        then who holds each capture point (+1 red, -1 blue, 0 no one), the time and the two capture scores.

        Without the planes nothing is lost on a config's one fixed map: the walls and zones never change, and
        the units' rows and the points' holders say what the other planes showed, in a twentieth the floats."""
        G, A = self.num_games, self.num_agents
        held = self.held_points().astype(np.float32)
        hp_fraction = (self.hp / self.max_hp).astype(np.float32) * self.alive
        parts = [self._state_planes(held, hp_fraction).reshape(G, -1)] if self.config.observe_planes else []
        row, col = np.divmod(self.position, self.map.width)
        units = np.stack([self.alive, hp_fraction, row / max(self.map.height - 1, 1),
                          col / max(self.map.width - 1, 1), self.cooldown / self.cooldown_steps], -1)
        units = np.concatenate([units * self.alive[..., None], self.type_one_hot[None].repeat(G, 0)], -1)
        parts.append(units.reshape(G, -1))
        if not self.config.observe_planes:
            parts.append(held[:, 0] - held[:, 1])  # [G, P]: the holder of each point
        parts.append(np.concatenate([(self.steps / self.config.max_steps)[:, None],
                                     np.minimum(self.score / self.config.capture_score_to_win, 1.0)], 1))
        return np.concatenate(parts, 1).astype(np.float32)

    def _state_planes(self, held: np.ndarray, hp_fraction: np.ndarray) -> np.ndarray:
        """[G, 5 + 2T, H*W]: walls, capture zones, capture owner (+1 red, -1 blue), red's and blue's hit points,
        a type one-hot per team."""
        G, A, T = self.num_games, self.num_agents, self.layout.num_types
        planes = np.zeros((G, 5 + 2 * T, self.map.cells), dtype=np.float32)
        planes[:, 0] = self.map.walls.ravel()
        planes[:, 1] = self._capture_zone
        planes[:, 2] = (held[:, 0] - held[:, 1]) @ self.map.capture_zone.astype(np.float32)
        for a in range(A):
            team = int(self.team[a])
            planes[np.arange(G), 3 + team, self.position[:, a]] += hp_fraction[:, a]
            planes[np.arange(G), 5 + team * T + self.unit_type[a], self.position[:, a]] += self.alive[:, a]
        return planes

    @property
    def state_size(self) -> int:
        T, P = self.layout.num_types, len(self.map.capture_cells)
        map_part = (5 + 2 * T) * self.map.cells if self.config.observe_planes else P
        return map_part + self.num_agents * (5 + T) + 3
