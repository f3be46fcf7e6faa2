"""Circuit Training netlists (protobuf text) read into NumPy arrays, one array per field.

The parser is hand-written so that Menger needs no protobuf dependency. Nodes become a struct of arrays
(kind, position, size, pin parent and offset) and nets become a CSR pair (`net_ptr`, `net_nodes`, driver
first), so that every cost can be computed with vectorised NumPy over all pins at once.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import pathlib
import re

import numpy as np

PORT, HARD_MACRO, SOFT_MACRO, MACRO_PIN, STDCELL = range(5)
KIND_NAMES = ("port", "hard macro", "soft macro", "macro pin", "stdcell")
ORIENTATIONS = ("N", "S", "E", "W", "FN", "FS", "FE", "FW")

# x' = a*ox + b*oy, y' = c*ox + d*oy for each orientation, in ORIENTATIONS order.
ORIENTATION_MATRICES = np.array(
    [
        (1, 0, 0, 1),  # N
        (-1, 0, 0, -1),  # S
        (0, 1, -1, 0),  # E
        (0, -1, 1, 0),  # W
        (-1, 0, 0, 1),  # FN
        (1, 0, 0, -1),  # FS
        (0, -1, -1, 0),  # FE
        (0, 1, 1, 0),  # FW
    ],
    dtype=np.float64,
)
ROTATED = np.array([name[-1] in "EW" for name in ORIENTATIONS])

_COMMENT = re.compile(r"(?m)^\s*#.*$")
_TOKEN = re.compile(r'(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|[^\s{}]+)|(\w+)\s*\{|(\})')


@dataclasses.dataclass(frozen=True, eq=False)
class Netlist:
    """All nodes (the optional `__metadata__` node excluded, so indices match `.plc` files) and nets."""

    names: tuple[str, ...]
    kind: np.ndarray  # int8, one of PORT..STDCELL
    x: np.ndarray  # centre (µm) as written in the netlist; NaN when absent
    y: np.ndarray
    width: np.ndarray
    height: np.ndarray
    orientation: np.ndarray  # int8 index into ORIENTATIONS
    parent: np.ndarray  # macro index of a macro pin, -1 otherwise
    x_offset: np.ndarray
    y_offset: np.ndarray
    net_ptr: np.ndarray  # net n owns net_nodes[net_ptr[n]:net_ptr[n+1]]
    net_nodes: np.ndarray  # driver first, then sinks
    net_weight: np.ndarray
    metadata: dict

    @property
    def num_nodes(self) -> int:
        return len(self.names)

    @property
    def num_nets(self) -> int:
        return len(self.net_weight)

    def indices_of(self, kind: int) -> np.ndarray:
        return np.flatnonzero(self.kind == kind)

    @functools.cached_property
    def index_of(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}


def _unquote(value: str) -> str | float:
    if value.startswith('"'):
        return bytes(value[1:-1], "utf-8").decode("unicode_escape")
    return float(value)


def _parse_nodes(text: str) -> list[dict]:
    """Turn protobuf text into a list of {'name', 'input': [...], 'attr': {key: value}} dicts."""
    text = _COMMENT.sub("", text)
    nodes: list[dict] = []
    stack: list[str] = []
    node: dict | None = None
    key = None
    for field, value, block, close in _TOKEN.findall(text):
        if block:
            stack.append(block)
            if block == "node" and len(stack) == 1:
                node = {"name": None, "input": [], "attr": {}}
        elif close:
            if not stack:
                raise ValueError("netlist has an unmatched '}': the protobuf text is malformed")
            if stack.pop() == "node" and not stack:
                nodes.append(node)
        elif node is not None:
            parsed = _unquote(value)
            if stack == ["node"] and field == "name":
                node["name"] = parsed
            elif stack == ["node"] and field == "input":
                node["input"].append(parsed)
            elif field == "key":
                key = parsed
            elif len(stack) == 3 and field in ("placeholder", "f", "i", "b"):
                node["attr"][key] = parsed
    if stack:
        raise ValueError(f"netlist ends inside an open block {stack}: the file is truncated")
    return nodes


def _node_kind(name: str, attr: dict) -> int:
    kind = str(attr.get("type", "")).lower()
    if kind == "macro":
        return SOFT_MACRO if name.startswith("Grp") else HARD_MACRO
    table = {"port": PORT, "macro_pin": MACRO_PIN, "stdcell": STDCELL}
    if kind not in table:
        raise ValueError(f"node {name!r} has unknown type {attr.get('type')!r}; expected macro, macro_pin, stdcell or port")
    return table[kind]


def parse_netlist_text(text: str) -> Netlist:
    """Build a Netlist from protobuf text; nets come from each driver's `input:` list."""
    parsed = _parse_nodes(text)
    raw = [n for n in parsed if n["name"] != "__metadata__"]
    metadata = next((n["attr"] for n in parsed if n["name"] == "__metadata__"), {})
    names = tuple(n["name"] for n in raw)
    index = {name: i for i, name in enumerate(names)}
    count = len(raw)
    kind = np.array([_node_kind(n["name"], n["attr"]) for n in raw], dtype=np.int8)

    def column(key: str, default: float) -> np.ndarray:
        return np.array([float(n["attr"].get(key, default)) for n in raw], dtype=np.float64)

    orientation = np.array([ORIENTATIONS.index(str(n["attr"].get("orientation", "N")).upper()) for n in raw], np.int8)
    parent = np.full(count, -1, dtype=np.int64)
    for i, n in enumerate(raw):
        if kind[i] == MACRO_PIN:
            parent[i] = _lookup(index, n["attr"].get("macro_name"), n["name"])
    net_ptr, net_nodes, net_weight = [0], [], []
    for i, n in enumerate(raw):
        if n["input"]:
            net_nodes.append(i)
            net_nodes.extend(_lookup(index, sink, n["name"]) for sink in n["input"])
            net_ptr.append(len(net_nodes))
            net_weight.append(float(n["attr"].get("weight", 1.0)))
    return Netlist(
        names=names,
        kind=kind,
        x=column("x", np.nan),
        y=column("y", np.nan),
        width=column("width", 0.0),
        height=column("height", 0.0),
        orientation=orientation,
        parent=parent,
        x_offset=column("x_offset", 0.0),
        y_offset=column("y_offset", 0.0),
        net_ptr=np.array(net_ptr, dtype=np.int64),
        net_nodes=np.array(net_nodes, dtype=np.int64),
        net_weight=np.array(net_weight, dtype=np.float64),
        metadata=metadata,
    )


def _lookup(index: dict[str, int], name, referrer: str) -> int:
    if name not in index:
        raise ValueError(f"node {referrer!r} refers to {name!r}, which is not a node of this netlist")
    return index[name]


def read_text(path: str | pathlib.Path) -> str:
    """Read a text file, gunzipping it when its name ends in .gz."""
    path = pathlib.Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=8)
def load_netlist(path: str | pathlib.Path) -> Netlist:
    """Parse a `.pb.txt` or `.pb.txt.gz` netlist (cached: Ariane takes about a second to parse)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"netlist {path} does not exist; pass a .pb.txt(.gz) path or a packaged name")
    return parse_netlist_text(read_text(path))
