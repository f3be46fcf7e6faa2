"""`ChipPlacement-v0`: place hard macros one per step on the grid, largest first (Circuit Training's CircuitEnv).

Action: a grid cell index `row * B_c + col`, where the action grid is the design's C × R grid, or a fixed
B × B bound when `grid_bound=B` is given (cells beyond the design's grid are always masked). The macro's
centre goes to the cell centre. Reward is 0 per step; after the last hard macro the soft macros are placed
force-directed and the reward is -(w_wl·WL + w_cong·Cong + w_den·Den); -4.0 if a macro has no legal cell.

With `dense_reward=True` each step instead pays the drop of the partial cost w_wl·WL + w_den·Den of the
macros placed so far (counted from 0 before the first step) and the last step pays the rest down to the
final cost, so an episode's undiscounted return is unchanged; the per-step signal tells the learner which
macro raised the cost.

`grid_maps` also holds, per cell, what putting the current macro there would cost (its nets' wirelength,
and wirelength + density as the greedy placer weighs them), min-max scaled over the legal cells: the
policy sees the greedy ranking as an input and learns where to depart from it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from menger.apps.chip.candidates import candidate_density, candidate_wirelength, normalised_over_legal
from menger.apps.chip.costs import ProxyCost, proxy_cost
from menger.apps.chip.incremental import IncrementalCost
from menger.apps.chip.problem import ChipProblem, load_problem
from menger.apps.chip.softplace import place_soft_macros

NO_LEGAL_CELL_REWARD = -4.0
MACRO_FEATURES = 4  # width / W, height / H, fraction of macros placed, pin count / largest pin count
GRID_MAPS = ("density", "net_heat", "mask", "wirelength_cost", "greedy_cost")


class MaskedDiscrete(spaces.Discrete):
    """Discrete(n) whose `sample()` draws among the actions legal right now, so random agents (and
    gymnasium's env checker) never pick a masked cell; an explicit mask or probability still wins."""

    def __init__(self, n: int, legal_actions, seed=None):
        super().__init__(n, seed=seed)
        self._legal_actions = legal_actions

    def sample(self, mask=None, probability=None):
        if mask is None and probability is None:
            legal = self._legal_actions()
            mask = legal if legal.any() else None
        return super().sample(mask=mask, probability=probability)


class ChipPlacementEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, netlist: str = "macro_tiles_10x10", plc: str | None = None, w_wirelength: float = 1.0,
                 w_congestion: float = 0.5, w_density: float = 1.0, grid_bound: int | None = None,
                 soft_macro_steps: int = 100, problem: ChipProblem | None = None,
                 dense_reward: bool = False):
        self.problem = problem if problem is not None else load_problem(netlist, plc)
        self.weights = dict(w_wirelength=w_wirelength, w_congestion=w_congestion, w_density=w_density)
        self.soft_macro_steps = soft_macro_steps
        self.dense_reward = dense_reward
        grid = self.problem.grid
        self.map_cols = grid.columns if grid_bound is None else int(grid_bound)
        self.map_rows = grid.rows if grid_bound is None else int(grid_bound)
        if self.map_cols < grid.columns or self.map_rows < grid.rows:
            raise ValueError(f"grid_bound={grid_bound} is smaller than the design's {grid.columns}x{grid.rows} grid; "
                             f"use at least {max(grid.columns, grid.rows)}")
        cells = np.arange(grid.num_cells)
        self._action_of_cell = (cells // grid.columns) * self.map_cols + cells % grid.columns
        self._cell_of_action = np.full(self.map_cols * self.map_rows, -1)
        self._cell_of_action[self._action_of_cell] = cells
        movable = self.problem.movable
        self._degree = np.array([len(self.problem.model.nets_of_owner.get(int(m), ())) for m in movable], float)
        count = len(movable)
        self._mask = np.zeros(grid.num_cells, dtype=bool)
        self.action_space = MaskedDiscrete(self.map_cols * self.map_rows, self.action_mask)
        self.observation_space = spaces.Dict({
            "action_mask": spaces.Box(0, 1, (self.action_space.n,), np.int8),
            "macro_features": spaces.Box(0.0, 1.0, (MACRO_FEATURES,), np.float32),
            "placed": spaces.Box(0, 1, (count,), np.int8),
            "positions": spaces.Box(0.0, 1.0, (count, 2), np.float32),
            "grid_maps": spaces.Box(0.0, 1.0, (len(GRID_MAPS), self.map_rows, self.map_cols), np.float32),
        })

    # ------------------------------------------------------------------------------------------- episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        problem = self.problem
        layout = problem.initial.copy()
        layout.active[problem.movable] = False
        self.cost = IncrementalCost(problem.model, layout, track_congestion=False)
        self.step_index = 0
        self.final_cost: ProxyCost | None = None
        self._paid = 0.0  # dense_reward: the partial cost already charged to earlier steps
        self._mask = self._legal_cells()
        return self._observation(), {}

    def step(self, action):
        action = int(action)
        if not 0 <= action < self.action_space.n:
            raise ValueError(f"action {action} is outside Discrete({self.action_space.n})")
        cell = self._cell_of_action[action]
        macro = int(self.problem.movable[self.step_index])
        if cell < 0 or not self._mask[cell]:
            raise ValueError(f"action {action} (cell {cell}) is masked for macro "
                             f"{self.problem.netlist.names[macro]!r}: it would leave the canvas, overlap a placed "
                             "macro or a blockage; choose an action where observation['action_mask'] is 1")
        x, y = self.problem.grid.cell_centre(cell)
        self.cost.move(macro, float(x), float(y), active=True)
        self.step_index += 1
        if self.step_index == len(self.problem.movable):
            return self._finish()
        self._mask = self._legal_cells()
        if not self._mask.any():
            return self._observation(), self._settle(-NO_LEGAL_CELL_REWARD), True, False, {"no_legal_cell": True}
        return self._observation(), self._settle(self.partial_cost()) if self.dense_reward else 0.0, False, False, {}

    def partial_cost(self) -> float:
        """w_wl·WL + w_den·Den of what is placed now (congestion is left out: it needs a routing pass)."""
        return (self.weights["w_wirelength"] * self.cost.wirelength()
                + self.weights["w_density"] * self.cost.density_cost())

    def _settle(self, cost_now: float) -> float:
        """The reward that charges the cost added since the last charge; with dense_reward off, everything
        is charged at the end. Either way the charges of an episode sum to its final cost."""
        if not self.dense_reward:
            return -cost_now
        reward, self._paid = self._paid - cost_now, cost_now
        return reward

    def _finish(self):
        layout = place_soft_macros(self.problem.model, self.cost.layout, self.soft_macro_steps)
        self.final_layout = layout
        self.final_cost = proxy_cost(self.problem.model, layout)
        self._mask = np.zeros(self.problem.grid.num_cells, dtype=bool)
        info = {"proxy_cost": self.final_cost.as_dict()}
        return self._observation(), self._settle(self.final_cost.weighted(**self.weights)), True, False, info

    # ------------------------------------------------------------------------------------------- helpers
    def action_mask(self) -> np.ndarray:
        """int8 [num_actions]: 1 where the current macro may go."""
        out = np.zeros(self.action_space.n, dtype=np.int8)
        out[self._action_of_cell] = self._mask
        return out

    @property
    def current_macro(self) -> int | None:
        movable = self.problem.movable
        return int(movable[self.step_index]) if self.step_index < len(movable) else None

    def _legal_cells(self) -> np.ndarray:
        """Legal cells for the current macro (the grid caches the canvas/blockage part per macro size)."""
        problem, layout = self.problem, self.cost.layout
        macro = self.current_macro
        w, h = problem.model.footprint(layout, np.array([macro]))
        key = (float(w[0]), float(h[0]))
        hard = problem.model.hard_macros
        placed = hard[layout.active[hard]]
        pw, ph = problem.model.footprint(layout, placed)
        obstacles = (layout.x[placed], layout.y[placed], pw, ph)
        return problem.grid.legal_mask(key[0], key[1], obstacles)

    def _to_map(self, cell_values: np.ndarray) -> np.ndarray:
        out = np.zeros(self.map_rows * self.map_cols, dtype=np.float32)
        out[self._action_of_cell] = cell_values
        return out.reshape(self.map_rows, self.map_cols)

    def _net_heat(self, macro: int | None) -> np.ndarray:
        """Where the current macro's nets already have placed pins, weighted by net weight, scaled to [0, 1]."""
        heat = np.zeros(self.problem.grid.num_cells)
        if macro is None:
            return heat
        model = self.problem.model
        nets, entries, _ = self.cost.nets_and_entries(macro)
        px, py, on = model.entry_positions(self.cost.layout, entries)
        on &= model.entry_owner[entries] != macro
        cells = self.problem.grid.cell_of(px[on], py[on])
        heat = np.bincount(cells, model.net_weight[model.entry_net[entries][on]], len(heat))
        return heat / heat.max() if heat.max() > 0 else heat

    def _cost_maps(self, macro: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Per cell, scaled to [0, 1] over the legal cells: the macro's wirelength there, and the greedy
        placer's wirelength + density (with the env's weights). Illegal cells read 1."""
        cells = np.flatnonzero(self._mask)
        wirelength = np.zeros(self.problem.grid.num_cells)
        greedy = np.zeros(self.problem.grid.num_cells)
        if macro is not None and len(cells):
            wirelength[cells] = candidate_wirelength(self.cost, macro, cells)
            greedy[cells] = (self.weights["w_wirelength"] * wirelength[cells]
                             + self.weights["w_density"] * candidate_density(self.cost, macro, cells))
        return normalised_over_legal(wirelength, self._mask), normalised_over_legal(greedy, self._mask)

    def _observation(self) -> dict:
        problem, layout = self.problem, self.cost.layout
        grid = problem.grid
        macro = self.current_macro
        features = np.zeros(MACRO_FEATURES, dtype=np.float32)
        if macro is not None:
            w, h = problem.model.footprint(layout, np.array([macro]))
            features[:] = (w[0] / grid.width, h[0] / grid.height, self.step_index / len(problem.movable),
                           self._degree[self.step_index] / max(self._degree.max(), 1.0))
        movable = problem.movable
        placed = layout.active[movable]
        positions = np.stack([layout.x[movable] / grid.width, layout.y[movable] / grid.height], axis=1)
        positions = np.where(placed[:, None], np.clip(positions, 0, 1), 0).astype(np.float32)
        mask_map = self._to_map(self._mask.astype(np.float32))
        wirelength, greedy = self._cost_maps(macro)
        maps = np.stack([self._to_map(np.clip(self.cost.density.ravel(), 0, 1)), self._to_map(self._net_heat(macro)),
                         mask_map, self._to_map(wirelength), self._to_map(greedy)])
        return {"action_mask": self.action_mask(), "macro_features": np.clip(features, 0, 1),
                "placed": placed.astype(np.int8), "positions": positions, "grid_maps": maps.astype(np.float32)}
