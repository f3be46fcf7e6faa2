"""Proxy costs kept up to date while single macros move.

A move touches only the nets of the moved macro and its footprint on the grid, so `IncrementalCost`
subtracts those contributions at the old position and adds them back at the new one: per-net HPWL,
the density grid and (when tracked) the raw routing demand and macro blockage. `costs()` then only has
to reduce small arrays, which is what makes annealing and greedy search affordable on Ariane.
"""

from __future__ import annotations

import numpy as np

from menger.apps.chip import costs as C
from menger.apps.chip.netlist import HARD_MACRO


class IncrementalCost:
    """Loop: `move(node, x, y)` any number of times, read `costs()`; equals `proxy_cost` on `layout`."""

    def __init__(self, model: C.CostModel, layout: C.Layout, track_congestion: bool = True):
        self.model = model
        self.layout = layout.copy()
        self.track_congestion = track_congestion
        self.hpwl = C.all_net_hpwl(model, self.layout)
        self.density = C.density_grid(model, self.layout)
        self._touched: dict[int, tuple] = {}
        if track_congestion:
            all_entries = np.arange(len(model.entry_owner))
            self.h_raw, self.v_raw = C.accumulate(model, C.route_segments(model, self.layout, all_entries))
            hard = model.hard_macros[self.layout.active[model.hard_macros]]
            self.h_macro, self.v_macro = C.macro_blockage(model, self.layout, hard)

    def nets_and_entries(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The node's nets, their entries and each net's start inside them (cached per node)."""
        if node in self._touched:
            return self._touched[node]
        nets = self.model.nets_of_owner.get(node, np.zeros(0, dtype=np.int64))
        lengths = np.diff(self.model.netlist.net_ptr)[nets]
        starts = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64)
        self._touched[node] = (nets, self.model.entries_of_nets(nets), starts)
        return self._touched[node]

    def _contribution(self, node: int, nets, entries, sign: float) -> None:
        """Add (sign=+1) or remove (sign=-1) the node's density and routing terms at its current place."""
        model, layout = self.model, self.layout
        if layout.active[node] and model.is_area_node[node]:
            one = np.array([node])
            self.density += sign * C.density_grid(model, layout, one)
            if self.track_congestion and model.netlist.kind[node] == HARD_MACRO:
                h, v = C.macro_blockage(model, layout, one)
                self.h_macro += sign * h
                self.v_macro += sign * v
        if self.track_congestion and len(nets):
            h, v = C.accumulate(model, C.route_segments(model, layout, entries), sign)
            self.h_raw += h
            self.v_raw += v

    def move(self, node: int, x: float, y: float, orientation: int | None = None, active: bool = True) -> None:
        """Put `node` at centre (x, y) (optionally re-oriented, or switched off with active=False)."""
        nets, entries, starts = self.nets_and_entries(int(node))
        self._contribution(node, nets, entries, -1.0)
        layout = self.layout
        layout.x[node], layout.y[node], layout.active[node] = x, y, active
        if orientation is not None:
            layout.orientation[node] = orientation
        self._contribution(node, nets, entries, +1.0)
        if len(nets):
            px, py, on = self.model.entry_positions(layout, entries)
            self.hpwl[nets] = C.net_hpwl(px, py, on, starts)

    def wirelength(self) -> float:
        return C.wirelength_cost_from_hpwl(self.model, self.hpwl)

    def density_cost(self) -> float:
        return C.density_cost_from_grid(self.density)

    def congestion_maps(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.track_congestion:
            raise RuntimeError("congestion is not tracked: build IncrementalCost(..., track_congestion=True)")
        return C.congestion_from_demand(self.model, self.h_raw, self.v_raw, self.h_macro, self.v_macro)

    def costs(self) -> C.ProxyCost:
        congestion = C.congestion_cost_from_maps(*self.congestion_maps()) if self.track_congestion else float("nan")
        return C.ProxyCost(self.wirelength(), self.density_cost(), congestion)
