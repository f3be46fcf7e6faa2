"""Where Ariane133's proxy cost is lost: the same hard-macro placements scored with the soft macros (a) where
the shipped initial.plc (the commercial flow) has them, (b) after the environment's force-directed pass, (c)
after the force-directed then the analytical pass (`baselines.finish`, what `menger place` writes).

Run: .venv/bin/python benchmarks/chip_soft_macros.py [--sa-seconds 60] [--runs DIR ...]
Rows: the shipped hard macros, greedy's, SA's (from greedy, one process, --sa-seconds), and the hard macros
of `menger place ... --out DIR` runs (their placement.plc) when given. Columns: proxy = WL + 0.5 Cong + Den,
and the TILOS weighting (density x 0.5) of the finished placement; each with its seconds.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import numpy as np

from menger.apps.chip import baselines, costs as C, load_problem
from menger.apps.chip.softplace import place_soft_macros


def with_shipped_soft_macros(problem, layout: C.Layout) -> C.Layout:
    """`layout`'s hard macros with every other node where initial.plc puts it."""
    mixed = problem.initial.copy()
    hard = problem.model.hard_macros
    mixed.x[hard], mixed.y[hard], mixed.orientation[hard] = layout.x[hard], layout.y[hard], layout.orientation[hard]
    return mixed


def row(problem, label: str, layout: C.Layout) -> None:
    model = problem.model
    layout = with_shipped_soft_macros(problem, layout)
    shipped = C.proxy_cost(model, layout).weighted()
    fd = C.proxy_cost(model, place_soft_macros(model, layout, 100)).weighted()
    began = time.perf_counter()
    _, final = baselines.finish(problem, layout)
    seconds = time.perf_counter() - began
    print(f"{label:<34}{shipped:>10.4f}{fd:>10.4f}{final.weighted():>12.4f}{final.weighted(w_density=0.5):>10.4f}"
          f"  (WL {final.wirelength:.4f}, Den {final.density:.4f}, Cong {final.congestion:.4f}; {seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sa-seconds", type=float, default=60.0)
    parser.add_argument("--runs", nargs="*", default=[])
    args = parser.parse_args()
    problem = load_problem("ariane133_ng45")
    print(f"ariane133_ng45, load {os.getloadavg()[0]:.2f}. Soft macros: shipped | force-directed | + analytical "
          "(proxy, and TILOS weighting of the last)")
    print(f"{'hard macros':<34}{'shipped':>10}{'fd':>10}{'fd+analytic':>12}{'TILOS':>10}")
    row(problem, "shipped (initial.plc)", problem.initial)
    greedy = baselines.greedy_placement(problem)
    row(problem, "greedy", greedy)
    if args.sa_seconds > 0:
        annealed = baselines.simulated_annealing(problem, args.sa_seconds, np.random.default_rng(0), start=greedy)
        row(problem, f"SA from greedy, {args.sa_seconds:.0f} s, seed 0", annealed)
    for run in args.runs:
        placed = load_problem("ariane133_ng45", pathlib.Path(run) / "placement.plc")
        row(problem, f"{run}", placed.initial)


if __name__ == "__main__":
    main()
