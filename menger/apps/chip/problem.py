"""A placement problem: netlist + grid + initial placement, resolved from a path or a packaged name."""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from menger.apps.chip.canvas import Grid, rectangles_overlap
from menger.apps.chip.costs import CostModel, Layout, ProxyCost
from menger.apps.chip.netlist import HARD_MACRO, KIND_NAMES, PORT, SOFT_MACRO, STDCELL, Netlist, load_netlist
from menger.apps.chip.plc import Placement, PlcHeader, load_plc

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"


def packaged_names() -> list[str]:
    return sorted(p.name for p in DATA_DIR.iterdir() if p.is_dir())


def data_path(name: str) -> pathlib.Path:
    """Folder of a packaged design (e.g. "macro_tiles_10x10", "ariane133_ng45")."""
    path = DATA_DIR / name
    if not path.is_dir():
        raise FileNotFoundError(f"no packaged design {name!r}; choose one of {packaged_names()}")
    return path


def resolve_netlist(netlist: str | pathlib.Path) -> pathlib.Path:
    """A netlist file, a folder holding netlist.pb.txt(.gz), or a packaged design name."""
    path = pathlib.Path(netlist)
    if not path.exists() and (DATA_DIR / str(netlist)).is_dir():
        path = DATA_DIR / str(netlist)
    if path.is_dir():
        for candidate in ("netlist.pb.txt", "netlist.pb.txt.gz"):
            if (path / candidate).is_file():
                return path / candidate
    if path.is_file():
        return path
    raise FileNotFoundError(f"netlist {netlist!r} is neither a file, a folder with netlist.pb.txt(.gz), nor a "
                            f"packaged design ({', '.join(packaged_names())})")


@dataclasses.dataclass(frozen=True, eq=False)
class ChipProblem:
    """Everything fixed about one design. `movable` lists the hard macros to place, largest area first."""

    netlist_path: pathlib.Path
    netlist: Netlist
    placement: Placement | None
    header: PlcHeader
    grid: Grid
    model: CostModel
    initial: Layout
    movable: np.ndarray

    def to_placement(self, layout: Layout, costs: ProxyCost | None = None) -> Placement:
        """A `.plc` body for the layout: the initial file's nodes, or every macro, port and stdcell."""
        if self.placement is not None and len(self.placement.node_index):
            nodes, fixed = self.placement.node_index, self.placement.fixed
        else:
            nodes = np.flatnonzero(np.isin(self.netlist.kind, (HARD_MACRO, SOFT_MACRO, PORT, STDCELL)))
            fixed = (self.netlist.kind[nodes] == PORT).astype(np.int8)
        orientation = np.where(self.netlist.kind[nodes] == PORT, -1, layout.orientation[nodes]).astype(np.int8)
        recorded = {}
        if costs is not None:
            recorded = {"wirelength_cost": costs.wirelength, "congestion_cost": costs.congestion,
                        "density_cost": costs.density}
        header = dataclasses.replace(self.header, recorded=recorded)
        return Placement(header, nodes.copy(), layout.x[nodes].copy(), layout.y[nodes].copy(), orientation, fixed.copy())


PLACEABLE = (HARD_MACRO, SOFT_MACRO, PORT, STDCELL)


def legality_problems(problem: ChipProblem, layout: Layout) -> list[str]:
    """What makes a layout illegal, empty when it is legal: a hard macro that overlaps another one, reaches
    outside the canvas or onto a blockage, or a soft macro outside the canvas. (Soft macros may overlap
    anything: they are clusters of standard cells, and the density cost counts what they share.)"""
    model, header, names = problem.model, problem.header, problem.netlist.names
    found = []
    hard = model.hard_macros
    w, h = model.footprint(layout, hard)
    x, y = layout.x[hard], layout.y[hard]
    overlap = rectangles_overlap(x[:, None], y[:, None], w[:, None], h[:, None], x[None], y[None], w[None], h[None])
    first, second = np.nonzero(np.triu(overlap, k=1))
    found += [f"hard macros {names[hard[a]]!r} and {names[hard[b]]!r} overlap" for a, b in zip(first, second)]
    for kind, nodes in (("hard macro", hard), ("soft macro", model.soft_macros)):
        nw, nh = model.footprint(layout, nodes)
        nx, ny = layout.x[nodes], layout.y[nodes]
        outside = ((nx - nw / 2 < -1e-6) | (nx + nw / 2 > header.width + 1e-6)
                   | (ny - nh / 2 < -1e-6) | (ny + nh / 2 > header.height + 1e-6))
        found += [f"{kind} {names[node]!r} reaches outside the {header.width} x {header.height} canvas"
                  for node in nodes[outside]]
    for blockage in header.blockages:
        if blockage.rate <= 0:
            continue
        bx, by = (blockage.x_min + blockage.x_max) / 2, (blockage.y_min + blockage.y_max) / 2
        hits = rectangles_overlap(x, y, w, h, bx, by, blockage.x_max - blockage.x_min, blockage.y_max - blockage.y_min)
        found += [f"hard macro {names[node]!r} sits on the blockage {blockage}" for node in hard[hits]]
    return found


def check_placement_fits(placement: Placement, net: Netlist, plc: pathlib.Path, netlist: pathlib.Path) -> None:
    """Refuse, before anything is computed, a placement made for another netlist (e.g. another clustering of
    the same design): node counts in its header that differ from the netlist's, or body lines that name a
    node the netlist lacks, a pin, or one node twice. The message names both sides' counts."""
    ours = {KIND_NAMES[kind]: int((net.kind == kind).sum()) for kind in PLACEABLE}
    index = placement.node_index
    inside = index[(index >= 0) & (index < net.num_nodes)]
    problems = []
    theirs = placement.header.node_counts
    if any(ours[kind] != count for kind, count in theirs.items()):
        problems.append("its header says it was made for " + _counts({k: theirs[k] for k in ours if k in theirs}))
    if len(inside) < len(index):
        outside = np.setdiff1d(index, inside)
        problems.append(f"{len(outside)} of its {len(index)} body lines name nodes the netlist lacks (e.g. node "
                        f"{int(outside.max())}; the netlist's nodes are 0 to {net.num_nodes - 1})")
    pins = inside[~np.isin(net.kind[inside], PLACEABLE)]
    if len(pins):
        problems.append(f"{len(pins)} of its body lines name pins, which are not placed (e.g. node {int(pins[0])})")
    values, counts = np.unique(index, return_counts=True)
    if (counts > 1).any():
        problems.append(f"node {int(values[counts > 1][0])} has {int(counts.max())} body lines")
    if problems:
        body = _counts({KIND_NAMES[kind]: int((net.kind[inside] == kind).sum()) for kind in PLACEABLE})
        raise ValueError(f"placement {plc} does not match netlist {netlist}: " + "; ".join(problems)
                         + f"; its body places {body} of the netlist's {_counts(ours)}. Pass the netlist the placement "
                         "was made for (another clustering of the same design has other soft macros), or a placement "
                         "made for this one")


def _counts(by_kind: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}s" for kind, count in by_kind.items())


def load_problem(netlist: str | pathlib.Path, plc: str | pathlib.Path | None = None) -> ChipProblem:
    """Load a design; without `plc`, the initial.plc beside the netlist supplies grid and positions."""
    netlist_path = resolve_netlist(netlist)
    if plc is None:
        plc = netlist_path.parent / "initial.plc"
        if not plc.is_file():
            raise FileNotFoundError(f"no .plc given and none at {plc}; pass plc=... with the grid header")
    placement = load_plc(plc)
    net = load_netlist(str(netlist_path))
    check_placement_fits(placement, net, pathlib.Path(plc), netlist_path)
    model = CostModel(net, placement.header)
    initial = model.initial_layout(placement)
    hard = net.indices_of(HARD_MACRO)
    fixed = np.zeros(net.num_nodes, dtype=bool)
    fixed[placement.node_index[placement.fixed == 1]] = True
    movable = hard[~fixed[hard]]
    area = net.width[movable] * net.height[movable]
    movable = movable[np.argsort(-area, kind="stable")]
    return ChipProblem(netlist_path, net, placement, placement.header, Grid.from_header(placement.header), model,
                       initial, movable)
