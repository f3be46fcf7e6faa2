"""Shared checks and tiny designs for the chip tests."""

from __future__ import annotations

import pathlib

import numpy as np

from menger.apps.chip.canvas import rectangles_overlap
from menger.apps.chip.problem import ChipProblem

SHARED_DATA = pathlib.Path(__file__).resolve().parents[4] / "shared" / "data"


def assert_legal(problem: ChipProblem, layout) -> None:
    """Every movable hard macro is active, inside the canvas, off blockages and overlaps no other hard macro."""
    hard = problem.model.hard_macros
    assert layout.active[problem.movable].all()
    w, h = problem.model.footprint(layout, hard)
    x, y = layout.x[hard], layout.y[hard]
    grid = problem.grid
    assert (x - w / 2 >= -1e-6).all() and (x + w / 2 <= grid.width + 1e-6).all()
    assert (y - h / 2 >= -1e-6).all() and (y + h / 2 <= grid.height + 1e-6).all()
    pairs = rectangles_overlap(x[:, None], y[:, None], w[:, None], h[:, None], x[None], y[None], w[None], h[None])
    np.fill_diagonal(pairs, False)
    assert not pairs.any(), "two hard macros overlap"
    for b in grid.blockages:
        cx, cy = (b.x_min + b.x_max) / 2, (b.y_min + b.y_max) / 2
        assert not rectangles_overlap(x, y, w, h, cx, cy, b.x_max - b.x_min, b.y_max - b.y_min).any()


def macro(name: str, w: float, h: float, x: float, y: float, orientation: str = "N") -> str:
    return (f'node {{ name: "{name}" attr {{ key: "type" value {{ placeholder: "MACRO" }} }} '
            f'attr {{ key: "width" value {{ f: {w} }} }} attr {{ key: "height" value {{ f: {h} }} }} '
            f'attr {{ key: "x" value {{ f: {x} }} }} attr {{ key: "y" value {{ f: {y} }} }} '
            f'attr {{ key: "orientation" value {{ placeholder: "{orientation}" }} }} }}\n')


def pin(name: str, parent: str, dx: float, dy: float, inputs=(), weight: float | None = None) -> str:
    text = "".join(f' input: "{i}"' for i in inputs)
    extra = f' attr {{ key: "weight" value {{ f: {weight} }} }}' if weight is not None else ""
    return (f'node {{ name: "{name}"{text} attr {{ key: "type" value {{ placeholder: "MACRO_PIN" }} }} '
            f'attr {{ key: "macro_name" value {{ placeholder: "{parent}" }} }} '
            f'attr {{ key: "x_offset" value {{ f: {dx} }} }} attr {{ key: "y_offset" value {{ f: {dy} }} }}{extra} }}\n')


def port(name: str, x: float, y: float, inputs=()) -> str:
    text = "".join(f' input: "{i}"' for i in inputs)
    return (f'node {{ name: "{name}"{text} attr {{ key: "type" value {{ placeholder: "PORT" }} }} '
            f'attr {{ key: "x" value {{ f: {x} }} }} attr {{ key: "y" value {{ f: {y} }} }} }}\n')


def plc_header(columns: int, rows: int, width: float, height: float, extra: str = "") -> str:
    return (f"# Columns : {columns}  Rows : {rows}\n# Width : {width}  Height : {height}\n"
            "# Routes per micron, hor : 10  ver : 20\n# Routes used by macros, hor : 5  ver : 4\n"
            f"# Smoothing factor : 0\n{extra}")


def write_design(folder: pathlib.Path, netlist: str, plc: str) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "netlist.pb.txt").write_text(netlist)
    (folder / "initial.plc").write_text(plc)
    return folder / "netlist.pb.txt"
