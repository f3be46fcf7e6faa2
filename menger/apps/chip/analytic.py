"""Analytical placement of soft macros (standard-cell clusters) once the hard macros are down, in torch.

The soft macros' centres are the variables; hard macros and ports stay where they are. Gradient steps
(Adam) lower a smooth stand-in for the proxy cost, in the manner of DREAMPlace's global placement:

  loss = Σ_n w_n·WA_n / ((W + H)·Σ_n w_n)  +  λ · 10 · mean over cells of density²

where WA_n is the weighted-average smooth HPWL of net n (Hsu et al., 2011), γ a fraction of a grid cell, and
density the grid cells' occupied fraction (hard macros included) with each soft macro stretched to at least
`stretch` cells per side at the same area, so that moving it inside a cell still changes the grid. λ grows
geometrically, so the soft macros first gather by their nets, then spread. Congestion is not in the loss; the
exact proxy cost (wirelength + density + congestion, `costs.proxy_cost`) of every `score_every`-th iterate
chooses which iterate is returned, so the result is never worse than where the soft macros started.

On Ariane133 (NanGate45) this takes the shipped placement's hard macros from 1.0129 (its own soft macros) to
0.89 (docs/chip.md, "What moved the cost").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from menger.apps.chip import costs as C


@dataclasses.dataclass(frozen=True)
class AnalyticSettings:
    """iterations: gradient steps; step_cells: Adam's step in grid-cell widths; gamma_cells: the smooth
    wirelength's γ in cell widths (smaller is closer to HPWL and less smooth); stretch: minimum soft-macro
    side in cells for the density term; density_weight and density_growth: λ's start and its factor per step;
    score_every: how often the exact proxy cost is computed to choose the iterate returned."""

    iterations: int = 300
    step_cells: float = 0.15
    gamma_cells: float = 1.0
    stretch: float = 1.2
    density_weight: float = 0.01
    density_growth: float = 1.03
    score_every: int = 5

    def __post_init__(self):
        for name in ("iterations", "score_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"AnalyticSettings.{name} must be at least 1, got {getattr(self, name)}")
        for name in ("step_cells", "gamma_cells", "stretch", "density_weight"):
            if not getattr(self, name) > 0:
                raise ValueError(f"AnalyticSettings.{name} must be positive, got {getattr(self, name)}")
        if self.density_growth < 1:
            raise ValueError(f"AnalyticSettings.density_growth must be at least 1 (λ never shrinks), "
                             f"got {self.density_growth}")


@dataclasses.dataclass(frozen=True)
class AnalyticResult:
    """The cheapest layout seen (the starting one included), its cost, the iteration it came from (-1: the
    start) and the exact weighted cost of every scored iterate, as (iteration, cost)."""

    layout: C.Layout
    cost: C.ProxyCost
    iteration: int
    trace: list[tuple[int, float]]


def weighted_average_wirelength(coord: torch.Tensor, net: torch.Tensor, nets: int, gamma: float) -> torch.Tensor:
    """Smooth per-net span of `coord` (entries grouped by `net`): the exp(±x/γ)-weighted means' difference,
    which tends to max − min as γ → 0. A net with one entry has span 0."""
    high = torch.full((nets,), -torch.inf, dtype=coord.dtype).scatter_reduce(0, net, coord, "amax")
    low = torch.full((nets,), torch.inf, dtype=coord.dtype).scatter_reduce(0, net, coord, "amin")
    up = torch.exp((coord - high[net]) / gamma)
    down = torch.exp((low[net] - coord) / gamma)

    def total(values: torch.Tensor) -> torch.Tensor:
        return torch.zeros(nets, dtype=coord.dtype).index_add(0, net, values)

    return total(coord * up) / total(up) - total(coord * down) / total(down)


def soft_density(x: torch.Tensor, y: torch.Tensor, width: torch.Tensor, height: torch.Tensor,
                 scale: torch.Tensor, x_edges: torch.Tensor, y_edges: torch.Tensor, cell_area: float) -> torch.Tensor:
    """[R, C] occupied fraction from rectangles centred at (x, y), each weighted by `scale`."""
    ox = (torch.minimum(x[:, None] + width[:, None] / 2, x_edges[None, 1:])
          - torch.maximum(x[:, None] - width[:, None] / 2, x_edges[None, :-1])).clamp(min=0)
    oy = (torch.minimum(y[:, None] + height[:, None] / 2, y_edges[None, 1:])
          - torch.maximum(y[:, None] - height[:, None] / 2, y_edges[None, :-1])).clamp(min=0)
    return torch.einsum("nr,nc->rc", oy * scale[:, None], ox) / cell_area


def place_soft_macros_analytic(model: C.CostModel, layout: C.Layout, settings: AnalyticSettings = AnalyticSettings(),
                               weights: dict | None = None) -> AnalyticResult:
    """Move the active soft macros of `layout` (a copy) as the module docstring says; return the iterate
    with the lowest exact proxy cost under `weights` (`ProxyCost.weighted`'s keywords)."""
    weights = weights or {}
    start_cost = C.proxy_cost(model, layout)
    soft = model.soft_macros[layout.active[model.soft_macros]]
    best = AnalyticResult(layout.copy(), start_cost, -1, [(-1, start_cost.weighted(**weights))])
    if len(soft) == 0:
        return best
    problem = _Problem(model, layout, soft, settings)
    x = torch.tensor(layout.x[soft], dtype=torch.float64, requires_grad=True)
    y = torch.tensor(layout.y[soft], dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([x, y], lr=settings.step_cells * model.cell_width)
    density_weight = settings.density_weight
    trace = list(best.trace)
    for iteration in range(settings.iterations):
        optimizer.zero_grad()
        problem.loss(x, y, density_weight).backward()
        optimizer.step()
        with torch.no_grad():
            x.clamp_(min=problem.half_width, max=model.header.width - problem.half_width)
            y.clamp_(min=problem.half_height, max=model.header.height - problem.half_height)
        density_weight *= settings.density_growth
        if (iteration + 1) % settings.score_every == 0 or iteration == settings.iterations - 1:
            candidate = layout.copy()
            candidate.x[soft], candidate.y[soft] = x.detach().numpy(), y.detach().numpy()
            cost = C.proxy_cost(model, candidate)
            trace.append((iteration, cost.weighted(**weights)))
            if trace[-1][1] < best.cost.weighted(**weights):
                best = AnalyticResult(candidate, cost, iteration, [])
    return dataclasses.replace(best, trace=trace)


class _Problem:
    """The loss's fixed tensors: net entries (a fixed position, or a soft macro's index), the density of
    everything but the soft macros, and the soft macros' stretched footprints."""

    def __init__(self, model: C.CostModel, layout: C.Layout, soft: np.ndarray, settings: AnalyticSettings):
        header = model.header
        px, py, active = model.entry_positions(layout)
        variable_of = np.full(model.netlist.num_nodes, -1)
        variable_of[soft] = np.arange(len(soft))
        # Only nets with two or more active entries have a span; they are renumbered 0..nets-1.
        entries_per_net = np.bincount(model.entry_net[active], minlength=model.netlist.num_nets)
        spanning = np.flatnonzero(entries_per_net >= 2)
        net_number = np.full(model.netlist.num_nets, -1)
        net_number[spanning] = np.arange(len(spanning))
        kept = active & (net_number[model.entry_net] >= 0)
        variable = variable_of[model.entry_owner][kept]
        moves = variable >= 0
        self.fixed_x = torch.tensor(np.where(moves, 0.0, px[kept]))
        self.fixed_y = torch.tensor(np.where(moves, 0.0, py[kept]))
        self.variable = torch.tensor(np.where(moves, variable, 0))
        self.moves = torch.tensor(moves, dtype=torch.float64)
        self.net = torch.tensor(net_number[model.entry_net[kept]])
        self.nets = len(spanning)
        self.net_weight = torch.tensor(model.net_weight[spanning], dtype=torch.float64)
        self.wirelength_norm = (header.width + header.height) * float(model.net_weight.sum())
        self.gamma = settings.gamma_cells * model.cell_width
        others = np.flatnonzero(model.is_area_node & layout.active & (variable_of < 0))
        self.fixed_density = torch.tensor(C.density_grid(model, layout, others))
        width, height = model.footprint(layout, soft)
        stretched_w = np.maximum(width, settings.stretch * model.cell_width)
        stretched_h = np.maximum(height, settings.stretch * model.cell_height)
        self.width, self.height = torch.tensor(stretched_w), torch.tensor(stretched_h)
        self.scale = torch.tensor(width * height / (stretched_w * stretched_h))
        self.half_width, self.half_height = torch.tensor(width / 2), torch.tensor(height / 2)
        self.x_edges = torch.arange(header.columns + 1, dtype=torch.float64) * model.cell_width
        self.y_edges = torch.arange(header.rows + 1, dtype=torch.float64) * model.cell_height
        self.cell_area = model.cell_width * model.cell_height

    def loss(self, x: torch.Tensor, y: torch.Tensor, density_weight: float) -> torch.Tensor:
        entry_x = self.fixed_x + self.moves * x[self.variable]
        entry_y = self.fixed_y + self.moves * y[self.variable]
        span = (weighted_average_wirelength(entry_x, self.net, self.nets, self.gamma)
                + weighted_average_wirelength(entry_y, self.net, self.nets, self.gamma))
        wirelength = (self.net_weight * span).sum() / self.wirelength_norm
        density = self.fixed_density + soft_density(x, y, self.width, self.height, self.scale, self.x_edges,
                                                    self.y_edges, self.cell_area)
        return wirelength + density_weight * 10 * (density ** 2).mean()
