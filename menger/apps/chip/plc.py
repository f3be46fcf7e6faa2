"""`.plc` placement files: a `#` header (grid, canvas, routing resources, blockages, recorded costs) and one
line per placed node. Reading then writing gives back the same header values and body."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np

from menger.apps.chip.netlist import ORIENTATIONS, read_text


@dataclasses.dataclass(frozen=True)
class Blockage:
    """A rectangle (µm) where macros may not go; `rate` is the fraction of the area blocked."""

    x_min: float
    y_min: float
    x_max: float
    y_max: float
    rate: float = 1.0


@dataclasses.dataclass(frozen=True)
class PlcHeader:
    """Grid and routing parameters. Defaults are Circuit Training's defaults for headers that omit a value."""

    columns: int
    rows: int
    width: float
    height: float
    routes_per_micron_h: float = 70.33
    routes_per_micron_v: float = 74.51
    macro_routing_alloc_h: float = 51.79
    macro_routing_alloc_v: float = 51.79
    smoothing: int = 2
    overlap_threshold: float = 0.004
    blockages: tuple[Blockage, ...] = ()
    recorded: dict = dataclasses.field(default_factory=dict)  # e.g. {"wirelength_cost": 0.0497}
    node_counts: dict = dataclasses.field(default_factory=dict)  # of the netlist it was made for: {"soft macro": 782}


@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """Body lines of a `.plc`: node indices and their centres, orientations (index into ORIENTATIONS,
    -1 for '-') and fixed flags."""

    header: PlcHeader
    node_index: np.ndarray
    x: np.ndarray
    y: np.ndarray
    orientation: np.ndarray
    fixed: np.ndarray


_NUMBER = r"([-+0-9.eE]+)"
_HEADER_PATTERNS = {
    ("columns", "rows"): re.compile(rf"Columns\s*:\s*{_NUMBER}\s+Rows\s*:\s*{_NUMBER}"),
    ("width", "height"): re.compile(rf"Width\s*:\s*{_NUMBER}\s+Height\s*:\s*{_NUMBER}"),
    ("routes_per_micron_h", "routes_per_micron_v"): re.compile(
        rf"Routes per micron, hor\s*:\s*{_NUMBER}\s+ver\s*:\s*{_NUMBER}"
    ),
    ("macro_routing_alloc_h", "macro_routing_alloc_v"): re.compile(
        rf"Routes used by macros, hor\s*:\s*{_NUMBER}\s+ver\s*:\s*{_NUMBER}"
    ),
    ("smoothing",): re.compile(rf"Smoothing factor\s*:\s*{_NUMBER}"),
    ("overlap_threshold",): re.compile(rf"Overlap threshold\s*:\s*{_NUMBER}"),
}
_RECORDED = {
    "wirelength": re.compile(rf"^Wirelength\s*:\s*{_NUMBER}"),
    "wirelength_cost": re.compile(rf"^Wirelength cost\s*:\s*{_NUMBER}"),
    "congestion_cost": re.compile(rf"^Congestion cost\s*:\s*{_NUMBER}"),
    "density_cost": re.compile(rf"^Density cost\s*:\s*{_NUMBER}"),
}
# "Counts of node types" in Circuit Training's headers: the netlist the placement was made for
_NODE_COUNTS = {"hard macro": re.compile(rf"^HARD_MACROs\s*:\s*{_NUMBER}"),
                "soft macro": re.compile(rf"^SOFT_MACROs\s*:\s*{_NUMBER}"),
                "port": re.compile(rf"^PORTs\s*:\s*{_NUMBER}"),
                "stdcell": re.compile(rf"^STDCELLs\s*:\s*{_NUMBER}")}
_COUNT_LABELS = {"hard macro": "HARD_MACROs", "soft macro": "SOFT_MACROs", "port": "PORTs", "stdcell": "STDCELLs"}
_BLOCKAGE = re.compile(rf"Blockage\s*:\s*{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}")


def parse_header(lines: list[str]) -> PlcHeader:
    """Read the `#` lines; a header without Columns/Rows or Width/Height cannot define the grid."""
    values: dict = {}
    recorded: dict = {}
    node_counts: dict = {}
    blockages = []
    for line in lines:
        text = line.lstrip("#").strip()
        for keys, pattern in _HEADER_PATTERNS.items():
            match = pattern.search(text)
            if match:
                values.update(zip(keys, (float(g) for g in match.groups())))
        for key, pattern in _RECORDED.items():
            match = pattern.search(text)
            if match:
                recorded[key] = float(match.group(1))
        for kind, pattern in _NODE_COUNTS.items():
            match = pattern.search(text)
            if match:
                node_counts[kind] = int(float(match.group(1)))
        match = _BLOCKAGE.search(text)
        if match:
            blockages.append(Blockage(*(float(g) for g in match.groups())))
    for needed in ("columns", "width"):
        if needed not in values:
            raise ValueError(f"the .plc header lacks '{needed.capitalize()}'; add '# Columns : C  Rows : R' and "
                             "'# Width : W  Height : H' lines")
    for integer in ("columns", "rows", "smoothing"):
        if integer in values:
            values[integer] = int(values[integer])
    return PlcHeader(**values, blockages=tuple(blockages), recorded=recorded, node_counts=node_counts)


def parse_plc_text(text: str) -> Placement:
    lines = text.splitlines()
    header = parse_header([line for line in lines if line.startswith("#")])
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    for fields in rows:
        if len(fields) != 5:
            raise ValueError(f".plc body line {' '.join(fields)!r} should read 'node_index x y orientation fixed'")
    return Placement(
        header=header,
        node_index=np.array([int(f[0]) for f in rows], dtype=np.int64),
        x=np.array([float(f[1]) for f in rows], dtype=np.float64),
        y=np.array([float(f[2]) for f in rows], dtype=np.float64),
        orientation=np.array([ORIENTATIONS.index(f[3]) if f[3] != "-" else -1 for f in rows], dtype=np.int8),
        fixed=np.array([int(f[4]) for f in rows], dtype=np.int8),
    )


def load_plc(path: str | pathlib.Path) -> Placement:
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f".plc file {path} does not exist")
    return parse_plc_text(read_text(path))


def format_header(header: PlcHeader) -> list[str]:
    lines = [
        "# Placement file for Circuit Training (written by menger.apps.chip)",
        f"# Columns : {header.columns}  Rows : {header.rows}",
        f"# Width : {header.width!r}  Height : {header.height!r}",
    ]
    labels = {"wirelength": "Wirelength", "wirelength_cost": "Wirelength cost",
              "congestion_cost": "Congestion cost", "density_cost": "Density cost"}
    lines += [f"# {labels[key]} : {value!r}" for key, value in header.recorded.items()]
    lines += [
        f"# Routes per micron, hor : {header.routes_per_micron_h!r}  ver : {header.routes_per_micron_v!r}",
        f"# Routes used by macros, hor : {header.macro_routing_alloc_h!r}  ver : {header.macro_routing_alloc_v!r}",
        f"# Smoothing factor : {header.smoothing}",
        f"# Overlap threshold : {header.overlap_threshold!r}",
    ]
    lines += [f"# Blockage : {b.x_min!r} {b.y_min!r} {b.x_max!r} {b.y_max!r} {b.rate!r}" for b in header.blockages]
    if header.node_counts:
        lines += ["# Counts of node types:"]
        lines += [f"# {_COUNT_LABELS[kind]} : {count}" for kind, count in header.node_counts.items()]
    return lines + ["# node_index x y orientation fixed"]


def format_plc(placement: Placement) -> str:
    body = [
        f"{i} {x!r} {y!r} {ORIENTATIONS[o] if o >= 0 else '-'} {f}"
        for i, x, y, o, f in zip(placement.node_index.tolist(), placement.x.tolist(), placement.y.tolist(),
                                 placement.orientation.tolist(), placement.fixed.tolist())
    ]
    return "\n".join(format_header(placement.header) + body) + "\n"


def write_plc(placement: Placement, path: str | pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_plc(placement), encoding="utf-8")
    return path
