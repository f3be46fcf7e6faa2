"""The wargame's rules as one frozen, validated config, and the map it describes.

``WargameConfig`` holds every number of the game (map, units, sight, capture, rewards, time limit);
``GameMap`` is the map it builds once (walls, capture zones, spawn zones, line-of-sight and distance tables),
shared by every game of a batch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from menger.config import ConfigError, field, from_dict, validate

# '.' floor, '#' wall, 'C' capture point, 'r' / 'b' spawn cells of red / blue. Point-symmetric: the cell
# (row, col) is the same kind as (H-1-row, W-1-col) with r and b swapped, so neither side has the better map.
DEFAULT_LAYOUT = """\
rr..........
rr...#......
rr...#..##..
rr.......#..
rr..C.......
rr..##...#bb
rr#...##..bb
.......C..bb
..#.......bb
..##..#...bb
......#...bb
..........bb"""


@dataclass(frozen=True)
class UnitType:
    """One kind of unit: how much it takes, how far and how hard it hits, and how often."""

    name: str = field(doc="Name used in `WargameConfig.team` (for example 'tank').")
    hp: int = field(doc="Hit points at the start of a game.", min=1)
    attack_range: float = field(doc="Largest Euclidean distance, in cells, at which it can attack.", min=1.0)
    damage: int = field(doc="Hit points one attack takes from its target.", min=1)
    cooldown: int = field(doc="Steps from one attack to the next it may make (1: every step).", min=1)

    def __post_init__(self) -> None:
        validate(self)


DEFAULT_UNIT_TYPES = (
    UnitType("infantry", hp=12, attack_range=2.0, damage=2, cooldown=1),
    UnitType("tank", hp=24, attack_range=1.5, damage=4, cooldown=2),
    UnitType("sniper", hp=8, attack_range=4.0, damage=3, cooldown=2),
)


@dataclass(frozen=True)
class WargameConfig:
    """Every rule of a two-team wargame; ``make_config(**kwargs)`` builds one from keyword arguments."""

    layout: str | None = field(DEFAULT_LAYOUT, doc=(
        "The map, one text line per row: '.' floor, '#' wall, 'C' capture point, 'r'/'b' red/blue spawn cell. "
        "null: generate a point-symmetric map of `size` from `map_seed`."))
    size: tuple[int, int] = field((12, 12), doc="Rows and columns of a generated map (layout: null).")
    wall_density: float = field(0.12, doc="Fraction of a generated map's cells that are walls.", min=0.0, max=0.4)
    capture_points: int = field(2, doc="Capture points of a generated map (kept point-symmetric).", min=0, max=8)
    map_seed: int = field(0, doc="Seed of a generated map (the map stays the same for every game).", min=0)
    team: tuple[str, ...] = field(("infantry", "infantry", "tank", "sniper", "sniper"), doc=(
        "Unit types of each team's slots, in slot order (both teams get the same)."))
    unit_types: tuple[UnitType, ...] = field(DEFAULT_UNIT_TYPES, doc="The 1-3 unit types `team` names.")
    diagonal_moves: bool = field(False, doc="8 moves (with diagonals) instead of 4.")
    sight_range: float = field(6.0, doc="Distance a unit sees (through line of sight).", min=1.0)
    fog_of_war: bool = field(True, doc=(
        "Hide enemies that no living ally sees; false: every living enemy is in every observation."))
    capture_radius: int = field(1, doc="A capture zone is the cells within this Chebyshev distance of a point.",
                                min=0, max=3)
    capture_score_to_win: int = field(60, doc=(
        "A team that reaches this capture score wins (each step it adds the points it holds alone)."), min=1)
    max_steps: int = field(100, doc="Steps after which a game is truncated and judged.", min=1)
    reward_damage: float = field(0.02, doc="Reward to an attacker per hit point it takes from an enemy.")
    reward_kill: float = field(0.5, doc="Reward to the unit whose attack kills an enemy (each if several).")
    reward_capture: float = field(0.01, doc="Reward per step to each living unit of a team, per point it holds.")
    reward_win: float = field(1.0, doc=(
        "Reward at the end to each unit in that last step: +this won, -this lost, 0 draw."))
    rotate_blue: bool = field(False, doc=(
        "Blue sees the map turned half a turn, its moves turned with it (N is S, E is W): on a point-symmetric map "
        "each team then sees the game as red does, and one policy learns one game rather than two."))
    observe_planes: bool = field(True, doc=(
        "Observations start with the map as planes [C, H, W]; false: only the unit features (own, per ally and per "
        "enemy slot) and one row per capture point (who holds it, where it is), a twentieth the size (97 floats for "
        "5 v 5 on the default map), which an MLP learns from faster. The bots then read the map from the config, and "
        "the global state() drops its planes too (85 floats instead of 1,667)."))
    relative_positions: bool = field(False, doc=(
        "Each ally and enemy slot (and capture point, without the planes) also gets its row and column offsets from "
        "the observing unit and their distance, "
        "as SMAC's features are, so a policy need not work out from absolute cells who is near."))
    team_spirit: float = field(0.0, doc=(
        "OpenAI Five's team spirit: each unit in the game that step gets (1 - this) x its own reward + this x "
        "its team's mean reward over those units; 0: its own, 1: the team's mean."), min=0.0, max=1.0)

    def __post_init__(self) -> None:
        validate(self)
        names = [unit.name for unit in self.unit_types]
        problems = []
        if not 1 <= len(names) <= 3:
            problems.append(f"unit_types has {len(names)} types; give 1 to 3")
        if len(set(names)) != len(names):
            problems.append(f"unit_types names repeat: {names}; give each type its own name")
        if not 1 <= len(self.team) <= 16:
            problems.append(f"team has {len(self.team)} units; give 1 to 16")
        for name in self.team:
            if name not in names:
                problems.append(f"team names unit type {name!r}, which unit_types lacks; choose from {names}")
        if problems:
            raise ConfigError(problems)
        game_map(self.layout, self.size, self.wall_density, self.capture_points, self.map_seed,
                 self.diagonal_moves, self.capture_radius, len(self.team))  # raises on a bad map

    @property
    def num_units(self) -> int:
        return len(self.team)

    @property
    def unit_type_index(self) -> np.ndarray:
        """[2n] the type of each agent slot (red's n, then blue's n)."""
        names = [unit.name for unit in self.unit_types]
        one_team = [names.index(name) for name in self.team]
        return np.array(one_team + one_team, dtype=np.int64)

    @property
    def map(self) -> GameMap:
        return game_map(self.layout, self.size, self.wall_density, self.capture_points, self.map_seed,
                        self.diagonal_moves, self.capture_radius, len(self.team))


def make_config(config: WargameConfig | None = None, **kwargs) -> WargameConfig:
    """A config from keyword arguments (as `parallel_env(**kwargs)` takes them): unknown keys are refused with
    the closest valid one named; unit_types may be given as dicts."""
    if config is not None:
        if kwargs:
            raise ConfigError(f"give either config= or keyword arguments, not both (got {sorted(kwargs)})")
        return config
    return from_dict(WargameConfig, kwargs)


# --- the map ---------------------------------------------------------------------------------------------------

MOVES_4 = ((-1, 0), (0, 1), (1, 0), (0, -1))  # N E S W
MOVES_8 = ((-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1))  # N NE E SE S SW W NW


@dataclass(frozen=True, eq=False)
class GameMap:
    """A map and its tables, built once per config. Cells are numbered ``row * width + col``."""

    height: int
    width: int
    walls: np.ndarray          # [H, W] bool
    capture_cells: np.ndarray  # [P] cell of each capture point
    capture_zone: np.ndarray   # [P, H*W] bool: cells that count for point p
    spawn: tuple[np.ndarray, np.ndarray]  # cells red / blue spawn on
    moves: np.ndarray          # [M, 2] (d_row, d_col)
    move_target: np.ndarray    # [H*W, M] the cell a move leads to, -1 if off the map or into a wall
    distance: np.ndarray       # [H*W, H*W] float32 Euclidean distance between cell centres
    line_of_sight: np.ndarray  # [H*W, H*W] bool: no wall strictly between the two cells (both ways)
    path_length: np.ndarray    # [H*W, H*W] float32 moves on the shortest walkable path (inf: none)

    @property
    def cells(self) -> int:
        return self.height * self.width


@functools.lru_cache(maxsize=16)
def game_map(layout: str | None, size: tuple[int, int], wall_density: float, capture_points: int, map_seed: int,
             diagonal_moves: bool, capture_radius: int, team_size: int) -> GameMap:
    rows = _generated_layout(size, wall_density, capture_points, map_seed, team_size) if layout is None \
        else _layout_rows(layout)
    height, width = len(rows), len(rows[0])
    grid = np.array([list(row) for row in rows])
    walls = grid == "#"
    red, blue = (np.flatnonzero(grid.ravel() == mark) for mark in ("r", "b"))
    for name, cells in (("red ('r')", red), ("blue ('b')", blue)):
        if len(cells) < team_size:
            raise ConfigError(f"layout has {len(cells)} {name} spawn cells for a team of {team_size}; mark more")
    captures = np.flatnonzero(grid.ravel() == "C")
    rr, cc = np.divmod(np.arange(height * width), width)
    zone = np.zeros((len(captures), height * width), dtype=bool)
    for index, cell in enumerate(captures):
        near = (np.abs(rr - rr[cell]) <= capture_radius) & (np.abs(cc - cc[cell]) <= capture_radius)
        zone[index] = near & ~walls.ravel()
    moves = np.array(MOVES_8 if diagonal_moves else MOVES_4, dtype=np.int64)
    _, _, move_target = _move_targets(walls, moves)
    distance = np.hypot(rr[:, None] - rr[None, :], cc[:, None] - cc[None, :]).astype(np.float32)
    sight = _line_of_sight(walls)
    return GameMap(height, width, walls, captures, zone, (red, blue), moves, move_target, distance, sight,
                   _path_lengths(walls, move_target))


def _layout_rows(layout: str) -> list[str]:
    rows = [row.strip() for row in layout.strip().splitlines() if row.strip()]
    if not rows:
        raise ConfigError("layout is empty; give one text line per map row, or layout: null to generate one")
    widths = {len(row) for row in rows}
    if len(widths) != 1:
        raise ConfigError(f"layout rows have different lengths {sorted(widths)}; make every row as wide")
    bad = set("".join(rows)) - set(".#Crb")
    if bad:
        raise ConfigError(f"layout has unknown characters {sorted(bad)}; use '.', '#', 'C', 'r', 'b'")
    if len(rows) < 2 or len(rows[0]) < 2 or len(rows) * len(rows[0]) > 1024:
        raise ConfigError(f"layout is {len(rows)}x{len(rows[0])}; give at least 2x2 and at most 1024 cells")
    return rows


def _generated_layout(size: tuple[int, int], wall_density: float, capture_points: int, map_seed: int,
                      team_size: int) -> list[str]:
    """Point-symmetric walls and capture points; red spawns in the left columns, blue in the mirrored right.
    Redrawn (same seed stream) until every floor cell is reachable from every other."""
    height, width = size
    if height < 4 or width < 4 or height * width > 1024:
        raise ConfigError(f"size {size} is out of range; give at least (4, 4) and at most 1024 cells")
    spawn_cols = max(1, -(-team_size // height))
    if 2 * spawn_cols + 2 > width:
        raise ConfigError(f"size {size} is too narrow for two spawn zones of {team_size} units; widen it")
    rng = np.random.default_rng(map_seed)
    for _ in range(100):
        grid = np.full((height, width), ".")
        grid[:, :spawn_cols] = "r"
        grid[:, width - spawn_cols:] = "b"
        middle = [(r, c) for r in range(height) for c in range(spawn_cols, width - spawn_cols)]
        order = rng.permutation(len(middle))
        walls = int(round(wall_density * height * width / 2))
        points, placed = capture_points, 0
        for index in order:
            r, c = middle[index]
            mr, mc = height - 1 - r, width - 1 - c
            if grid[r, c] != "." or grid[mr, mc] != ".":
                continue
            if points > 0 and (r, c) != (mr, mc):
                grid[r, c] = grid[mr, mc] = "C"
                points -= 2 if points >= 2 else points
            elif points > 0:
                grid[r, c] = "C"
                points -= 1
            elif placed < walls and (r, c) != (mr, mc):
                grid[r, c] = grid[mr, mc] = "#"
                placed += 1
        rows = ["".join(row) for row in grid]
        walls_mask = grid == "#"
        _, _, target = _move_targets(walls_mask, MOVES_4)
        lengths = _path_lengths(walls_mask, target)
        floor = np.flatnonzero(~walls_mask.ravel())
        if np.isfinite(lengths[np.ix_(floor, floor)]).all():
            return rows
    raise ConfigError(f"could not generate a connected map of size {size} with wall_density {wall_density}; "
                      "lower wall_density")


def _move_targets(walls: np.ndarray, moves) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    height, width = walls.shape
    rr, cc = np.divmod(np.arange(height * width), width)
    moves = np.asarray(moves)
    tr, tc = rr[:, None] + moves[:, 0], cc[:, None] + moves[:, 1]
    inside = (tr >= 0) & (tr < height) & (tc >= 0) & (tc < width)
    target = np.where(inside, tr * width + tc, -1)
    target[inside] = np.where(walls.ravel()[target[inside]], -1, target[inside])
    return rr, cc, target


def _path_lengths(walls: np.ndarray, move_target: np.ndarray) -> np.ndarray:
    """All-pairs shortest walkable paths (in moves) by repeated relaxation over the move graph."""
    cells = walls.size
    length = np.full((cells, cells), np.inf, dtype=np.float32)
    floor = ~walls.ravel()
    length[np.flatnonzero(floor), np.flatnonzero(floor)] = 0.0
    frontier = np.eye(cells, dtype=bool) & floor[:, None]
    reached = frontier.copy()
    steps = 0
    while frontier.any():
        steps += 1
        grown = np.zeros_like(frontier)
        for move in range(move_target.shape[1]):
            target = move_target[:, move]
            ok = target >= 0
            # the move sets are symmetric (N/S, E/W, ...): cell k is reached when its neighbour target[k] was
            grown[:, ok] |= frontier[:, target[ok]]
        frontier = grown & ~reached
        reached |= frontier
        length[frontier] = steps
    return length


def _line_of_sight(walls: np.ndarray) -> np.ndarray:
    """[H*W, H*W] True where the Bresenham lines both ways between two floor cells cross no wall."""
    height, width = walls.shape
    cells = height * width
    sight = np.zeros((cells, cells), dtype=bool)
    floor = [cell for cell in range(cells) if not walls.flat[cell]]
    for i, a in enumerate(floor):
        sight[a, a] = True
        ar, ac = divmod(a, width)
        for b in floor[i + 1:]:
            br, bc = divmod(b, width)
            clear = _clear(walls, ar, ac, br, bc) and _clear(walls, br, bc, ar, ac)
            sight[a, b] = sight[b, a] = clear
    return sight


def _clear(walls: np.ndarray, r0: int, c0: int, r1: int, c1: int) -> bool:
    dr, dc = abs(r1 - r0), -abs(c1 - c0)
    sr, sc = (1 if r1 > r0 else -1), (1 if c1 > c0 else -1)
    error, r, c = dr + dc, r0, c0
    while (r, c) != (r1, c1):
        twice = 2 * error
        if twice >= dc:
            error += dc
            r += sr
        if twice <= dr:
            error += dr
            c += sc
        if (r, c) != (r1, c1) and walls[r, c]:
            return False
    return True
