"""Force-directed placement of soft macros (standard-cell clusters) once the hard macros are down.

Each step pulls every soft macro towards the weighted centroids of its nets, pushes it down the density
gradient (spreading crowded cells), and pushes it out of any hard macro it sits on; the step size shrinks
linearly so the layout settles. This mirrors Circuit Training's final FD pass in spirit, not in detail.
"""

from __future__ import annotations

import numpy as np

from menger.apps.chip.costs import CostModel, Layout, density_grid


def _net_pull(model: CostModel, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Mean pull (µm) on every node towards the centroids of the nets it belongs to."""
    px, py, on = model.entry_positions(layout)
    net = model.entry_net
    nets = model.netlist.num_nets
    count = np.bincount(net, on.astype(float), nets)
    safe = np.maximum(count, 1)
    cx = np.bincount(net, px * on, nets) / safe
    cy = np.bincount(net, py * on, nets) / safe
    weight = model.net_weight[net] * on
    size = model.netlist.num_nodes
    total = np.maximum(np.bincount(model.entry_owner, weight, size), 1e-9)
    pull_x = np.bincount(model.entry_owner, weight * (cx[net] - px), size) / total
    pull_y = np.bincount(model.entry_owner, weight * (cy[net] - py), size) / total
    return pull_x, pull_y


def _hard_macro_push(model: CostModel, layout: Layout, soft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shortest displacement taking each soft-macro centre out of the hard macros it lies on."""
    hard = model.hard_macros[layout.active[model.hard_macros]]
    hw, hh = model.footprint(layout, hard)
    dx = layout.x[soft][:, None] - layout.x[hard][None]
    dy = layout.y[soft][:, None] - layout.y[hard][None]
    depth_x = hw[None] / 2 - np.abs(dx)
    depth_y = hh[None] / 2 - np.abs(dy)
    inside = (depth_x > 0) & (depth_y > 0)
    along_x = inside & (depth_x <= depth_y)
    push_x = np.where(along_x, np.sign(dx + 1e-12) * depth_x, 0.0).sum(axis=1)
    push_y = np.where(inside & ~along_x, np.sign(dy + 1e-12) * depth_y, 0.0).sum(axis=1)
    return push_x, push_y


def place_soft_macros(model: CostModel, layout: Layout, steps: int = 100, spread: float = 0.5) -> Layout:
    """Return a copy of `layout` with its soft macros moved by `steps` force-directed iterations."""
    layout = layout.copy()
    soft = model.soft_macros[layout.active[model.soft_macros]]
    if len(soft) == 0 or steps <= 0:
        return layout
    header = model.header
    w, h = model.footprint(layout, soft)
    for step in range(steps):
        rate = 1.0 - step / steps
        pull_x, pull_y = _net_pull(model, layout)
        grad_y, grad_x = np.gradient(density_grid(model, layout))
        col = np.clip((layout.x[soft] // model.cell_width).astype(int), 0, header.columns - 1)
        row = np.clip((layout.y[soft] // model.cell_height).astype(int), 0, header.rows - 1)
        push_x, push_y = _hard_macro_push(model, layout, soft)
        move_x = 0.5 * pull_x[soft] - spread * grad_x[row, col] * model.cell_width + push_x
        move_y = 0.5 * pull_y[soft] - spread * grad_y[row, col] * model.cell_height + push_y
        layout.x[soft] = np.clip(layout.x[soft] + rate * move_x, w / 2, header.width - w / 2)
        layout.y[soft] = np.clip(layout.y[soft] + rate * move_y, h / 2, header.height - h / 2)
    return layout
