"""What placing the current macro on each candidate cell would cost, vectorised over the cells.

Shared by the greedy placer (argmin of the sum) and the environment's observation (per-cell cost maps the
policy reads as input features), so both see exactly the same numbers.
"""

from __future__ import annotations

import numpy as np

from menger.apps.chip import costs as C
from menger.apps.chip.incremental import IncrementalCost


def cell_centres(model: C.CostModel, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    row, col = np.divmod(cells, model.header.columns)
    return (col + 0.5) * model.cell_width, (row + 0.5) * model.cell_height


def candidate_wirelength(cost: IncrementalCost, macro: int, cells: np.ndarray) -> np.ndarray:
    """Wirelength cost of the macro's own nets with the macro on each cell (the other nets add a constant,
    so the ranking of cells is that of the full wirelength cost)."""
    model, layout = cost.model, cost.layout
    grid_x, grid_y = cell_centres(model, cells)
    nets, entries, starts = cost.nets_and_entries(macro)
    total = np.zeros(len(cells))
    if not len(nets):
        return total
    px, py, on = model.entry_positions(layout, entries)
    own = model.entry_owner[entries] == macro
    others = on & ~own
    for coord, centre, cand in ((px, layout.x[macro], grid_x), (py, layout.y[macro], grid_y)):
        o_hi = np.maximum.reduceat(np.where(others, coord, -np.inf), starts)
        o_lo = np.minimum.reduceat(np.where(others, coord, np.inf), starts)
        d_hi = np.maximum.reduceat(np.where(own, coord - centre, -np.inf), starts)
        d_lo = np.minimum.reduceat(np.where(own, coord - centre, np.inf), starts)
        span = np.maximum(o_hi, cand[:, None] + d_hi) - np.minimum(o_lo, cand[:, None] + d_lo)
        total += np.einsum("kn,n->k", span, model.net_weight[nets])
    header = model.header
    return total / ((header.width + header.height) * model.net_weight.sum())


def candidate_density(cost: IncrementalCost, macro: int, cells: np.ndarray) -> np.ndarray:
    """Density cost (0.5 · mean of the top 10 % cells) with the macro added on each cell."""
    model, layout = cost.model, cost.layout
    grid_x, grid_y = cell_centres(model, cells)
    w, h = model.footprint(layout, np.array([macro]))
    ox = C.axis_overlaps(grid_x - w[0] / 2, grid_x + w[0] / 2, model.cell_width, model.header.columns)
    oy = C.axis_overlaps(grid_y - h[0] / 2, grid_y + h[0] / 2, model.cell_height, model.header.rows)
    density = cost.density[None] + oy[:, :, None] * ox[:, None, :] / (model.cell_width * model.cell_height)
    flat = density.reshape(len(cells), -1)
    k = max(1, int(0.1 * flat.shape[1]))
    return 0.5 * np.partition(flat, flat.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


def candidate_costs(cost: IncrementalCost, macro: int, cells: np.ndarray, w_density: float = 1.0) -> np.ndarray:
    """Wirelength + w_density·density if `macro` went to each of `cells` (see the two parts)."""
    return candidate_wirelength(cost, macro, cells) + w_density * candidate_density(cost, macro, cells)


def normalised_over_legal(values: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Min-max scale `values` to [0, 1] over the legal cells (0 = the cheapest legal cell); illegal cells
    get 1, so a map always lies in the observation box whatever the design's cost scale."""
    out = np.ones(len(values))
    if legal.any():
        low, high = values[legal].min(), values[legal].max()
        out[legal] = (values[legal] - low) / (high - low) if high > low else 0.0
    return out
