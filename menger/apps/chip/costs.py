"""Circuit Training's proxy costs (wirelength, density, congestion), vectorised over all pins with NumPy.

Definitions (shared/APPLICATIONS.md section 1; TILOS MacroPlacement's reverse-engineered description):
  wirelength = Σ_n w_n·HPWL_n / ((W + H)·Σ_n w_n)
  density    = 0.5 · mean of the top max(1, ⌊0.1·C·R⌋) grid-cell densities (overlap area / cell area)
  congestion = mean of the top 5 % of concat(H, V), where H and V are the grid-routed net demand (L/T
               patterns, star beyond three cells), smoothed ±k cells, normalised by the cell's routing
               capacity, plus the routing capacity hard macros take away.
A `Layout` is a placement state (centres, orientations, which nodes count); `CostModel` holds everything
that does not change while macros move.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from menger.apps.chip.netlist import HARD_MACRO, MACRO_PIN, ORIENTATION_MATRICES, ROTATED, SOFT_MACRO, STDCELL, Netlist
from menger.apps.chip.plc import PlcHeader


@dataclasses.dataclass(frozen=True)
class ProxyCost:
    wirelength: float
    density: float
    congestion: float

    def weighted(self, w_wirelength: float = 1.0, w_congestion: float = 0.5, w_density: float = 1.0) -> float:
        return w_wirelength * self.wirelength + w_congestion * self.congestion + w_density * self.density

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Layout:
    """Mutable placement: centre and orientation of every node, and whether it counts yet (an unplaced
    hard macro does not: its pins leave their nets and it adds no density)."""

    x: np.ndarray
    y: np.ndarray
    orientation: np.ndarray
    active: np.ndarray

    def copy(self) -> "Layout":
        return Layout(self.x.copy(), self.y.copy(), self.orientation.copy(), self.active.copy())


class CostModel:
    """Static data for cost evaluation: the netlist's pins flattened in net order and the grid."""

    def __init__(self, netlist: Netlist, header: PlcHeader):
        self.netlist = netlist
        self.header = header
        self.cell_width = header.width / header.columns
        self.cell_height = header.height / header.rows
        kind = netlist.kind
        nodes = netlist.net_nodes
        is_pin = kind[nodes] == MACRO_PIN
        # Each net entry sits at its owner's centre plus an offset; only hard-macro pins keep their offset.
        self.entry_owner = np.where(is_pin, netlist.parent[nodes], nodes)
        keeps_offset = is_pin & (kind[self.entry_owner] == HARD_MACRO)
        self.entry_dx = np.where(keeps_offset, netlist.x_offset[nodes], 0.0)
        self.entry_dy = np.where(keeps_offset, netlist.y_offset[nodes], 0.0)
        self.entry_net = np.repeat(np.arange(netlist.num_nets), np.diff(netlist.net_ptr))
        self.net_weight = netlist.net_weight
        self.is_area_node = np.isin(kind, (HARD_MACRO, SOFT_MACRO, STDCELL))
        self.hard_macros = netlist.indices_of(HARD_MACRO)
        self.soft_macros = netlist.indices_of(SOFT_MACRO)

    @functools.cached_property
    def entries_of_owner(self) -> dict[int, np.ndarray]:
        """Entry indices grouped by the node that carries them (a macro carries its pins' entries)."""
        order = np.argsort(self.entry_owner, kind="stable")
        owners, starts = np.unique(self.entry_owner[order], return_index=True)
        return dict(zip(owners.tolist(), np.split(order, starts[1:])))

    @functools.cached_property
    def nets_of_owner(self) -> dict[int, np.ndarray]:
        return {owner: np.unique(self.entry_net[entries]) for owner, entries in self.entries_of_owner.items()}

    def entries_of_nets(self, nets: np.ndarray) -> np.ndarray:
        """All entry indices of the given nets, in net order (driver first within each net)."""
        ptr = self.netlist.net_ptr
        lengths = ptr[nets + 1] - ptr[nets]
        starts = np.repeat(ptr[nets] - np.cumsum(lengths) + lengths, lengths)
        return starts + np.arange(lengths.sum())

    def initial_layout(self, placement=None) -> Layout:
        """Netlist coordinates, overridden by a `.plc` placement when given; everything active."""
        net = self.netlist
        x, y = np.nan_to_num(net.x.copy()), np.nan_to_num(net.y.copy())
        orientation = net.orientation.copy()
        if placement is not None:
            x[placement.node_index], y[placement.node_index] = placement.x, placement.y
            has = placement.orientation >= 0
            orientation[placement.node_index[has]] = placement.orientation[has]
        return Layout(x, y, orientation, np.ones(net.num_nodes, dtype=bool))

    def footprint(self, layout: Layout, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Width and height of nodes as placed: E/W orientations swap the two."""
        rotated = ROTATED[layout.orientation[nodes]]
        w, h = self.netlist.width[nodes], self.netlist.height[nodes]
        return np.where(rotated, h, w), np.where(rotated, w, h)

    def entry_positions(self, layout: Layout, entries: np.ndarray | slice = slice(None)):
        """(x, y, active) of net entries: owner centre plus the orientation-transformed pin offset."""
        owner = self.entry_owner[entries]
        a, b, c, d = ORIENTATION_MATRICES[layout.orientation[owner]].T
        dx, dy = self.entry_dx[entries], self.entry_dy[entries]
        return layout.x[owner] + a * dx + b * dy, layout.y[owner] + c * dx + d * dy, layout.active[owner]


# ----------------------------------------------------------------------------------------------- wirelength
def net_hpwl(px: np.ndarray, py: np.ndarray, active: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Half-perimeter of each net's bounding box over its active entries (0 for a net with none).
    `starts` are the offsets of consecutive nets inside px/py."""
    if len(px) == 0:
        return np.zeros(0)
    spans = []
    for coord in (px, py):
        high = np.maximum.reduceat(np.where(active, coord, -np.inf), starts)
        low = np.minimum.reduceat(np.where(active, coord, np.inf), starts)
        spans.append(np.where(np.isfinite(high), high - low, 0.0))
    return spans[0] + spans[1]


def wirelength_cost_from_hpwl(model: CostModel, hpwl: np.ndarray) -> float:
    header = model.header
    return float(np.einsum("n,n->", model.net_weight, hpwl) / ((header.width + header.height) * model.net_weight.sum()))


def all_net_hpwl(model: CostModel, layout: Layout) -> np.ndarray:
    px, py, active = model.entry_positions(layout)
    return net_hpwl(px, py, active, model.netlist.net_ptr[:-1])


def wirelength_cost(model: CostModel, layout: Layout) -> float:
    return wirelength_cost_from_hpwl(model, all_net_hpwl(model, layout))


# ----------------------------------------------------------------------------------------------- density
def axis_overlaps(low: np.ndarray, high: np.ndarray, cell: float, count: int) -> np.ndarray:
    """Overlap length of intervals [low, high] with each of `count` cells of size `cell`: shape [N, count]."""
    edges = np.arange(count + 1) * cell
    return np.clip(np.minimum(high[:, None], edges[None, 1:]) - np.maximum(low[:, None], edges[None, :-1]), 0, None)


def node_overlaps(model: CostModel, layout: Layout, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-node overlap lengths with each column ([N, C]) and each row ([N, R])."""
    w, h = model.footprint(layout, nodes)
    x, y = layout.x[nodes], layout.y[nodes]
    header = model.header
    return (axis_overlaps(x - w / 2, x + w / 2, model.cell_width, header.columns),
            axis_overlaps(y - h / 2, y + h / 2, model.cell_height, header.rows))


def density_grid(model: CostModel, layout: Layout, nodes: np.ndarray | None = None) -> np.ndarray:
    """Occupied fraction of each grid cell, shape [R, C]; overlapping macros count twice."""
    if nodes is None:
        nodes = np.flatnonzero(model.is_area_node & layout.active)
    ox, oy = node_overlaps(model, layout, nodes)
    return _outer_sum(oy, ox) / (model.cell_width * model.cell_height)


def _outer_sum(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Σ_n rows[n] ⊗ cols[n]. einsum rather than `@`: these products are tiny, and a threaded BLAS
    on a busy machine made them ten times slower."""
    return np.einsum("nr,nc->rc", rows, cols)


def density_cost_from_grid(grid: np.ndarray) -> float:
    flat = grid.ravel()
    k = max(1, int(0.1 * flat.size))
    return float(0.5 * np.partition(flat, flat.size - k)[-k:].mean())


def density_cost(model: CostModel, layout: Layout) -> float:
    return density_cost_from_grid(density_grid(model, layout))


# ----------------------------------------------------------------------------------------------- congestion
@dataclasses.dataclass(frozen=True)
class Segments:
    """Routing segments: H segments run along `row` over columns [low, high); V along `col` over rows."""

    h_row: np.ndarray
    h_low: np.ndarray
    h_high: np.ndarray
    h_weight: np.ndarray
    v_col: np.ndarray
    v_low: np.ndarray
    v_high: np.ndarray
    v_weight: np.ndarray


def _segments(parts: list[tuple]) -> Segments:
    """Concatenate ("h"|"v", line, from, to, weight) parts into Segments, ordering each span low to high."""
    def gather(direction: str) -> tuple:
        chosen = [part[1:] for part in parts if part[0] == direction]
        if not chosen:
            return np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), np.zeros(0)
        line, start, stop, weight = (np.concatenate(items) for items in zip(*chosen))
        return (line.astype(int), np.minimum(start, stop).astype(int), np.maximum(start, stop).astype(int),
                weight.astype(float))

    return Segments(*gather("h"), *gather("v"))


def two_cell_parts(src_c, src_r, dst_c, dst_r, w) -> list[tuple]:
    """L-route: horizontal along the source row, then vertical along the sink column."""
    return [("h", src_r, src_c, dst_c, w), ("v", dst_c, src_r, dst_r, w)]


def three_cell_parts(c: np.ndarray, r: np.ndarray, w: np.ndarray) -> list[tuple]:
    """The L / T patterns for nets on three cells; c and r are [N, 3] sorted by (column, row)."""
    c1, c2, c3 = c.T
    r1, r2, r3 = r.T
    l_route = (c1 < c2) & (c2 < c3) & (np.minimum(r1, r3) < r2) & (np.maximum(r1, r3) > r2)
    corner = ~l_route & (c2 == c3) & (c1 < c2) & (r1 < np.minimum(r2, r3))
    flat = ~l_route & ~corner & (r2 == r3)
    tee = ~(l_route | corner | flat)
    parts = []
    m = l_route
    parts += [("h", r1[m], c1[m], c2[m], w[m]), ("h", r2[m], c2[m], c3[m], w[m]),
              ("v", c2[m], r1[m], r2[m], w[m]), ("v", c3[m], r2[m], r3[m], w[m])]
    m = corner
    parts += [("h", r1[m], c1[m], c2[m], w[m]), ("v", c2[m], r1[m], np.maximum(r2[m], r3[m]), w[m])]
    m = flat
    parts += [("h", r1[m], c1[m], c2[m], w[m]), ("h", r2[m], c2[m], c3[m], w[m]), ("v", c2[m], r1[m], r2[m], w[m])]
    # T: a horizontal trunk on the middle row, with vertical branches from the other two cells.
    rt, ct, wt = r[tee], c[tee], w[tee]
    by_row = np.argsort(rt * (ct.max(initial=0) + 1) + ct, axis=1)
    rt, ct = np.take_along_axis(rt, by_row, 1), np.take_along_axis(ct, by_row, 1)
    parts += [("h", rt[:, 1], ct.min(axis=1), ct.max(axis=1), wt),
              ("v", ct[:, 0], rt[:, 0], rt[:, 1], wt), ("v", ct[:, 2], rt[:, 1], rt[:, 2], wt)]
    return parts


def route_segments(model: CostModel, layout: Layout, entries: np.ndarray) -> Segments:
    """Grid-route the nets whose entries (complete nets, in net order) are given."""
    header = model.header
    px, py, active = model.entry_positions(layout, entries)
    col = np.clip((px // model.cell_width).astype(np.int64), 0, header.columns - 1)[active]
    row = np.clip((py // model.cell_height).astype(np.int64), 0, header.rows - 1)[active]
    net = model.entry_net[entries][active]
    if len(net) == 0:
        return _segments([])
    first = np.flatnonzero(np.r_[True, net[1:] != net[:-1]])  # the source is the first active entry
    source_of = np.zeros(model.netlist.num_nets, dtype=np.int64)
    source_of[net[first]] = first
    cell = row * header.columns + col
    order = np.lexsort((cell, net))
    keep = np.r_[True, (net[order][1:] != net[order][:-1]) | (cell[order][1:] != cell[order][:-1])]
    u = order[keep]  # one entry per distinct (net, cell)
    u_net = net[u]
    nets, counts = np.unique(u_net, return_counts=True)
    count_of = np.zeros(model.netlist.num_nets, dtype=np.int64)
    count_of[nets] = counts
    weight = model.net_weight
    parts = []
    star = (count_of[u_net] == 2) | (count_of[u_net] > 3)
    src = source_of[u_net[star]]
    sinks = u[star]
    not_source = cell[sinks] != cell[src]
    src, sinks = src[not_source], sinks[not_source]
    parts += two_cell_parts(col[src], row[src], col[sinks], row[sinks], weight[net[sinks]])
    three = u[count_of[u_net] == 3]
    if len(three):
        three = three[np.lexsort((row[three], col[three], net[three]))].reshape(-1, 3)
        parts += three_cell_parts(col[three], row[three], weight[net[three[:, 0]]])
    return _segments(parts)


def accumulate(model: CostModel, segments: Segments, sign: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Raw (unnormalised, unsmoothed) H and V demand [R, C] from segments, via difference arrays."""
    rows, cols = model.header.rows, model.header.columns
    h = np.bincount(segments.h_row * (cols + 1) + segments.h_low, segments.h_weight, rows * (cols + 1))
    h -= np.bincount(segments.h_row * (cols + 1) + segments.h_high, segments.h_weight, rows * (cols + 1))
    v = np.bincount(segments.v_low * cols + segments.v_col, segments.v_weight, (rows + 1) * cols)
    v -= np.bincount(segments.v_high * cols + segments.v_col, segments.v_weight, (rows + 1) * cols)
    h_grid = np.cumsum(h.reshape(rows, cols + 1), axis=1)[:, :cols]
    v_grid = np.cumsum(v.reshape(rows + 1, cols), axis=0)[:rows]
    return sign * h_grid, sign * v_grid


def smooth(grid: np.ndarray, k: int, axis: int) -> np.ndarray:
    """Spread each cell's value evenly over the ±k cells around it along `axis` (clipped at the edge)."""
    if k <= 0:
        return grid
    grid = np.moveaxis(grid, axis, -1)
    n = grid.shape[-1]
    idx = np.arange(n)
    share = grid / (np.minimum(idx + k, n - 1) - np.maximum(idx - k, 0) + 1)
    cum = np.concatenate([np.zeros(grid.shape[:-1] + (1,)), np.cumsum(share, axis=-1)], axis=-1)
    out = cum[..., np.minimum(idx + k, n - 1) + 1] - cum[..., np.maximum(idx - k, 0)]
    return np.moveaxis(out, -1, axis)


def macro_blockage(model: CostModel, layout: Layout, macros: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Routing demand hard macros add: overlap height × H allocation in each covered cell (overlap width ×
    V allocation). A macro that covers its cells only partly drops its top row (and right column) from both
    maps; this reproduces the recorded Ariane congestion to 0.02 %."""
    header = model.header
    ox, oy = node_overlaps(model, layout, macros)
    oy_kept = _drop_partial_last(oy, model.cell_height)
    ox_kept = _drop_partial_last(ox, model.cell_width)
    h = _outer_sum(oy_kept, (ox_kept > 0).astype(float)) * header.macro_routing_alloc_h
    v = _outer_sum((oy_kept > 0).astype(float), ox_kept) * header.macro_routing_alloc_v
    return h, v


def _drop_partial_last(overlap: np.ndarray, cell: float) -> np.ndarray:
    """Zero the last covered cell of each macro that spans several cells without covering them all fully."""
    covered = overlap > 0
    partial = (covered.sum(axis=1) > 1) & ~(np.isclose(overlap, cell) | ~covered).all(axis=1)
    last = overlap.shape[1] - 1 - np.argmax(covered[:, ::-1], axis=1)
    kept = overlap.copy()
    kept[np.flatnonzero(partial), last[partial]] = 0.0
    return kept


def congestion_from_demand(model: CostModel, h_raw, v_raw, h_macro, v_macro) -> tuple[np.ndarray, np.ndarray]:
    header = model.header
    h_capacity = model.cell_height * header.routes_per_micron_h
    v_capacity = model.cell_width * header.routes_per_micron_v
    h = smooth(h_raw, int(header.smoothing), axis=1) / h_capacity + h_macro / h_capacity
    v = smooth(v_raw, int(header.smoothing), axis=0) / v_capacity + v_macro / v_capacity
    return h, v


def congestion_cost_from_maps(h: np.ndarray, v: np.ndarray) -> float:
    flat = np.concatenate([h.ravel(), v.ravel()])
    k = max(1, int(0.05 * flat.size))
    return float(np.partition(flat, flat.size - k)[-k:].mean())


def congestion_maps(model: CostModel, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    h_raw, v_raw = accumulate(model, route_segments(model, layout, np.arange(len(model.entry_owner))))
    macros = model.hard_macros[layout.active[model.hard_macros]]
    return congestion_from_demand(model, h_raw, v_raw, *macro_blockage(model, layout, macros))


def congestion_cost(model: CostModel, layout: Layout) -> float:
    return congestion_cost_from_maps(*congestion_maps(model, layout))


def proxy_cost(model: CostModel, layout: Layout) -> ProxyCost:
    """All three costs from scratch."""
    return ProxyCost(wirelength_cost(model, layout), density_cost(model, layout), congestion_cost(model, layout))
