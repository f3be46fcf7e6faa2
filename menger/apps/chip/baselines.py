"""Non-learning placers, used as yardsticks for the RL agent: random legal, greedy, simulated annealing.

Each returns a Layout with every movable hard macro on a grid-cell centre; `finish` then places the soft
macros (force-directed, as the environment does at the end of an episode, then analytically) and reports the
proxy cost.
"""

from __future__ import annotations

import time

import numpy as np

from menger.apps.chip import costs as C
from menger.apps.chip.analytic import AnalyticSettings, place_soft_macros_analytic
from menger.apps.chip.candidates import candidate_costs
from menger.apps.chip.canvas import rectangles_overlap
from menger.apps.chip.incremental import IncrementalCost
from menger.apps.chip.problem import ChipProblem
from menger.apps.chip.softplace import place_soft_macros

FLIPS = (0, 1, 4, 5)  # N, S, FN, FS: orientations that keep the footprint


def unplaced_layout(problem: ChipProblem) -> C.Layout:
    layout = problem.initial.copy()
    layout.active[problem.movable] = False
    return layout


def legal_cells(problem: ChipProblem, layout: C.Layout, macro: int) -> np.ndarray:
    """Cells where `macro` fits given the other active hard macros (itself excluded)."""
    w, h = problem.model.footprint(layout, np.array([macro]))
    hard = problem.model.hard_macros
    others = hard[layout.active[hard] & (hard != macro)]
    ow, oh = problem.model.footprint(layout, others)
    return problem.grid.legal_mask(w[0], h[0], (layout.x[others], layout.y[others], ow, oh))


def fits_at(problem: ChipProblem, layout: C.Layout, macro: int, cell: int, ignore: tuple = ()) -> bool:
    """Whether `macro` may sit at `cell` (canvas, blockages, other active hard macros except `ignore`)."""
    w, h = problem.model.footprint(layout, np.array([macro]))
    if not problem.grid.static_mask(w[0], h[0])[cell]:
        return False
    hard = problem.model.hard_macros
    others = hard[layout.active[hard] & (hard != macro) & ~np.isin(hard, ignore)]
    ow, oh = problem.model.footprint(layout, others)
    x, y = problem.grid.cell_centre(cell)
    return not rectangles_overlap(x, y, w[0], h[0], layout.x[others], layout.y[others], ow, oh).any()


def random_placement(problem: ChipProblem, rng: np.random.Generator, attempts: int = 50) -> C.Layout:
    """Each macro, largest first, on a uniformly random legal cell; restart when one has none left."""
    for _ in range(attempts):
        layout = unplaced_layout(problem)
        for macro in problem.movable:
            legal = np.flatnonzero(legal_cells(problem, layout, macro))
            if len(legal) == 0:
                break
            layout.x[macro], layout.y[macro] = problem.grid.cell_centre(rng.choice(legal))
            layout.active[macro] = True
        else:
            return layout
    raise RuntimeError(f"no random legal placement found in {attempts} attempts: the macros barely fit the grid; "
                       "try the greedy placer")


def greedy_placement(problem: ChipProblem, w_density: float = 1.0) -> C.Layout:
    """Each macro, largest first, on the legal cell that adds the least wirelength + density (congestion is
    left out: it would need a routing pass per candidate cell)."""
    cost = IncrementalCost(problem.model, unplaced_layout(problem), track_congestion=False)
    for macro in problem.movable:
        legal = np.flatnonzero(legal_cells(problem, cost.layout, macro))
        if len(legal) == 0:
            raise RuntimeError(f"greedy placement ran out of legal cells at macro {problem.netlist.names[macro]!r}")
        best = legal[np.argmin(candidate_costs(cost, int(macro), legal, w_density))]
        cost.move(int(macro), *map(float, problem.grid.cell_centre(best)), active=True)
    return cost.layout.copy()


def _propose(problem: ChipProblem, layout: C.Layout, rng: np.random.Generator, radius: int) -> list[tuple] | None:
    """A legal move as a list of (macro, x, y, orientation), or None: swap two macros, shift one to a
    nearby cell, or flip one."""
    movable, grid = problem.movable, problem.grid
    macro = int(rng.choice(movable))
    kind = rng.integers(3)
    if kind == 0 and len(movable) > 1:
        other = int(rng.choice(movable))
        cell_a = int(grid.cell_of(layout.x[macro], layout.y[macro]))
        cell_b = int(grid.cell_of(layout.x[other], layout.y[other]))
        if other == macro or not (fits_at(problem, layout, macro, cell_b, (other,))
                                  and fits_at(problem, layout, other, cell_a, (macro,))):
            return None
        return [(macro, layout.x[other], layout.y[other], None), (other, layout.x[macro], layout.y[macro], None)]
    if kind == 1:
        cell = int(grid.cell_of(layout.x[macro], layout.y[macro]))
        row, col = divmod(cell, grid.columns)
        row = int(np.clip(row + rng.integers(-radius, radius + 1), 0, grid.rows - 1))
        col = int(np.clip(col + rng.integers(-radius, radius + 1), 0, grid.columns - 1))
        target = row * grid.columns + col
        if target == cell or not fits_at(problem, layout, macro, target):
            return None
        x, y = grid.cell_centre(target)
        return [(macro, float(x), float(y), None)]
    return [(macro, layout.x[macro], layout.y[macro], int(rng.choice(FLIPS)))]


def simulated_annealing(problem: ChipProblem, budget_s: float, rng: np.random.Generator,
                        start: C.Layout | None = None, weights: dict | None = None,
                        track_congestion: bool = True, snapshots: list | None = None,
                        snapshot_every_s: float | None = None) -> C.Layout:
    """Metropolis search over swap / shift / flip moves with incremental costs, cooling geometrically from
    a temperature set by the typical cost change to 1/1000 of it over `budget_s` seconds. Returns the best.
    With `snapshots` (a list) and `snapshot_every_s`, appends (seconds, best layout so far) at each multiple
    of `snapshot_every_s` and at the end: the anytime curve of one run."""
    weights = weights or {}
    layout = start.copy() if start is not None else random_placement(problem, rng)
    cost = IncrementalCost(problem.model, layout, track_congestion=track_congestion)

    def value() -> float:
        c = cost.costs()
        return c.weighted(w_wirelength=weights.get("w_wirelength", 1.0),
                          w_congestion=weights.get("w_congestion", 0.5) if track_congestion else 0.0,
                          w_density=weights.get("w_density", 1.0)) if track_congestion else \
            weights.get("w_wirelength", 1.0) * c.wirelength + weights.get("w_density", 1.0) * c.density

    current = value()
    best, best_layout = current, cost.layout.copy()
    radius_max = max(problem.grid.columns, problem.grid.rows) // 2
    temperature0 = None
    began = time.perf_counter()
    next_snapshot = snapshot_every_s if snapshots is not None and snapshot_every_s else float("inf")
    while (elapsed := (time.perf_counter() - began) / max(budget_s, 1e-9)) < 1.0:
        if elapsed * budget_s >= next_snapshot:
            snapshots.append((elapsed * budget_s, best_layout.copy()))
            next_snapshot += snapshot_every_s
        radius = max(1, int(round(radius_max * (1 - elapsed))))
        move = _propose(problem, cost.layout, rng, radius)
        if move is None:
            continue
        undo = [(m, cost.layout.x[m], cost.layout.y[m], int(cost.layout.orientation[m])) for m, *_ in move]
        for macro, x, y, orientation in move:
            cost.move(macro, float(x), float(y), orientation)
        candidate = value()
        delta = candidate - current
        if temperature0 is None:
            temperature0 = max(abs(delta), 1e-6)
        temperature = temperature0 * 1e-3 ** elapsed
        if delta <= 0 or rng.random() < np.exp(-delta / temperature):
            current = candidate
            if current < best:
                best, best_layout = current, cost.layout.copy()
        else:
            for macro, x, y, orientation in reversed(undo):
                cost.move(macro, float(x), float(y), orientation)
    if snapshots is not None:
        snapshots.append((time.perf_counter() - began, best_layout.copy()))
    return best_layout


SOFT_PLACERS = ("analytic", "fd")


def finish(problem: ChipProblem, layout: C.Layout, soft_macro_steps: int = 100, soft: str = "analytic",
           weights: dict | None = None) -> tuple[C.Layout, C.ProxyCost]:
    """Place the soft macros and evaluate all three costs from scratch: `soft_macro_steps` force-directed
    steps (what the environment scores an episode with), then, with soft="analytic", the analytical placer
    from there (analytic.py), which keeps the cheaper of the two under `weights`."""
    if soft not in SOFT_PLACERS:
        raise ValueError(f"soft placer {soft!r} is not one of {SOFT_PLACERS}")
    final = place_soft_macros(problem.model, layout, soft_macro_steps)
    if soft == "fd":
        return final, C.proxy_cost(problem.model, final)
    result = place_soft_macros_analytic(problem.model, final, AnalyticSettings(), weights)
    return result.layout, result.cost
