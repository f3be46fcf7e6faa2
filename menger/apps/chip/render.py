"""A PNG of a placement: congestion heat map under hard macros (blue), soft macros (orange) and blockages.
Drawn on an Agg canvas directly, so importing this never changes pyplot's global backend."""

from __future__ import annotations

import pathlib

import numpy as np

from menger.apps.chip import costs as C
from menger.apps.chip.problem import ChipProblem
from menger.extras import require

PURPOSE = "`menger place` (it draws placement.png)"


def draw_placement(problem: ChipProblem, layout: C.Layout, path: str | pathlib.Path, title: str = "") -> pathlib.Path:
    require("matplotlib", "plot", PURPOSE)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    header = problem.header
    h, v = C.congestion_maps(problem.model, layout)
    fig = Figure(figsize=(7, 7))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    image = ax.imshow(np.maximum(h, v), origin="lower", extent=(0, header.width, 0, header.height),
                      cmap="Reds", alpha=0.6)
    fig.colorbar(image, ax=ax, fraction=0.046, label="congestion (max of H, V)")
    for nodes, colour, alpha in ((problem.model.soft_macros, "tab:orange", 0.35),
                                 (problem.model.hard_macros, "tab:blue", 0.7)):
        nodes = nodes[layout.active[nodes]]
        w, hh = problem.model.footprint(layout, nodes)
        for x, y, ww, hgt in zip(layout.x[nodes] - w / 2, layout.y[nodes] - hh / 2, w, hh):
            ax.add_patch(Rectangle((x, y), ww, hgt, facecolor=colour, edgecolor="black", lw=0.3, alpha=alpha))
    for b in header.blockages:
        ax.add_patch(Rectangle((b.x_min, b.y_min), b.x_max - b.x_min, b.y_max - b.y_min, hatch="//", fill=False))
    ax.set(xlim=(0, header.width), ylim=(0, header.height), title=title, xlabel="µm", ylabel="µm")
    ax.set_aspect("equal")
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path
