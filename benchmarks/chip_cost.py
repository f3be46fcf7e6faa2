"""Cost evaluations per second on Ariane133 (NanGate45): full proxy cost, and incremental after one move.

Run: .venv/bin/python benchmarks/chip_cost.py [--seconds 3]
Targets: full (all three costs) >= 20/s; incremental wirelength + density >= 2,000/s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from menger.apps.chip import load_problem
from menger.apps.chip.costs import proxy_cost
from menger.apps.chip.incremental import IncrementalCost


def rate(step, seconds: float) -> float:
    """Calls per second of `step` over about `seconds` of wall-clock."""
    step()  # warm caches (per-macro net lists) outside the timing
    count, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    problem = load_problem("ariane133_ng45")
    rng = np.random.default_rng(0)
    grid = problem.grid

    def mover(cost: IncrementalCost, read):
        def step():
            macro = int(rng.choice(problem.movable))
            x, y = grid.cell_centre(int(rng.integers(grid.num_cells)))
            cost.move(macro, float(x), float(y))
            read(cost)
        return step

    fast = IncrementalCost(problem.model, problem.initial, track_congestion=False)
    tracked = IncrementalCost(problem.model, problem.initial, track_congestion=True)
    for cost in (fast, tracked):  # build the per-macro caches before timing
        for macro in problem.movable:
            cost.nets_and_entries(int(macro))
    results = {
        "full (wirelength + density + congestion)": rate(lambda: proxy_cost(problem.model, problem.initial),
                                                         args.seconds),
        "incremental wirelength + density": rate(mover(fast, lambda c: (c.wirelength(), c.density_cost())),
                                                 args.seconds),
        "incremental all three": rate(mover(tracked, lambda c: c.costs()), args.seconds),
    }
    print(f"ariane133_ng45: {len(problem.movable)} hard macros, {problem.netlist.num_nets} nets")
    for label, value in results.items():
        print(f"{label:<45}{value:>10.0f} evaluations/s")


if __name__ == "__main__":
    main()
