"""Time to quality on Ariane133: the best proxy cost reached against wall-clock, for the RL placer with 1, 2
and 4 actors and for simulated annealing given the same time.

Run (about (len(actors) x len(seeds) + len(seeds)) x budget seconds; leave the machine to itself):
    .venv/bin/python benchmarks/chip_time_to_cost.py --budget 600 --actors 1 2 4 --seeds 0 --out bench_out/chip_ttc
or, from runs already made with `menger place ... --method rl --out DIR` (their rl_rollouts.npz):
    .venv/bin/python benchmarks/chip_time_to_cost.py --runs DIR [DIR ...] --sa-seeds 0 --out bench_out/chip_ttc

Every point is a finished placement: the hard macros a checkpoint's deterministic rollout placed (RL) or the
best found so far (SA, sampled every budget/20 s of one run; the SA seeds run side by side, one process
per core), then the soft macros (`baselines.finish`:
force-directed, then analytical) and the full proxy cost. A curve is the cheapest of its points so far. The
RL runs are `menger place --method rl` (the `chip-ppo` preset, checkpoints every budget/20 s) with
`runtime.actors` set; SA runs in one process from the greedy placement, as `menger place --method sa` does.
Prints a table (rows: seconds; columns: method, the median over seeds) and writes curves.json and curves.png.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import statistics

import numpy as np
import torch

from menger.apps.chip import baselines, load_problem
from menger.apps.chip.commands import place_with_rl
from menger.apps.chip.plc import write_plc


def finished_cost(problem, x, y, orientation) -> float:
    layout = baselines.unplaced_layout(problem)
    movable = problem.movable
    layout.x[movable], layout.y[movable], layout.orientation[movable] = x, y, orientation
    layout.active[movable] = True
    return baselines.finish(problem, layout)[1].weighted()


def rl_points(problem, run: pathlib.Path) -> tuple[int, list[tuple[float, float]]]:
    """(actors, [(seconds, finished cost)]) from a run's rl_rollouts.npz."""
    saved = np.load(run / "rl_rollouts.npz")
    points = [(float(saved["elapsed_s"][i]), finished_cost(problem, saved["x"][i], saved["y"][i],
                                                          saved["orientation"][i]))
              for i in range(len(saved["step"]))]
    return int(saved["actors"]), sorted(points)


def sa_points(netlist: str, budget_s: float, seed: int, out: pathlib.Path) -> list[tuple[float, float]]:
    """One SA run's anytime curve; its final placement, finished, goes to out/sa_seedN/placement.plc."""
    torch.set_num_threads(1)  # one core per SA process
    problem = load_problem(netlist)
    snapshots: list = []
    baselines.simulated_annealing(problem, budget_s, np.random.default_rng(seed),
                                  start=baselines.greedy_placement(problem), snapshots=snapshots,
                                  snapshot_every_s=budget_s / 20)
    points = []
    for seconds, layout in snapshots:
        final, cost = baselines.finish(problem, layout)
        points.append((seconds, cost.weighted()))
    folder = out / f"sa_seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    write_plc(problem.to_placement(final, cost), folder / "placement.plc")
    return points


def best_by(points: list[tuple[float, float]], seconds: float) -> float:
    costs = [cost for at, cost in points if at <= seconds]
    return min(costs) if costs else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netlist", default="ariane133_ng45")
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--actors", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--runs", nargs="*", default=[], help="existing `menger place --method rl` output folders "
                        "(instead of training new ones)")
    parser.add_argument("--sa-seeds", type=int, nargs="*", default=None, help="default: --seeds")
    parser.add_argument("--out", default="bench_out/chip_ttc")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problem = load_problem(args.netlist)
    curves: dict[str, list[list[tuple[float, float]]]] = {}
    runs = [pathlib.Path(run) for run in args.runs]
    if not runs:
        for actors in args.actors:
            for seed in args.seeds:
                run = out / f"rl_actors{actors}_seed{seed}"
                place_with_rl(problem, args.netlist, args.budget, run, seed, (f"runtime.actors={actors}",))
                runs.append(run)
    for run in runs:
        actors, points = rl_points(problem, run)
        curves.setdefault(f"rl, {actors} actor{'s' if actors != 1 else ''}", []).append(points)
    sa_seeds = args.seeds if args.sa_seeds is None else args.sa_seeds
    if sa_seeds:  # one process per seed, at most one per core: each SA run is single-threaded
        workers = min(len(sa_seeds), os.cpu_count() or 1)
        with concurrent.futures.ProcessPoolExecutor(workers) as pool:
            curves["sa"] = list(pool.map(sa_points, *zip(*[(args.netlist, args.budget, seed, out)
                                                             for seed in sa_seeds])))

    marks = [args.budget * k / 10 for k in range(1, 11)]
    names = sorted(curves)
    print(f"{args.netlist}: best proxy cost (soft macros placed, full cost) by wall-clock; median over seeds "
          f"(count); load {os.getloadavg()[0]:.2f}")
    print(f"{'seconds':>8}" + "".join(f"{name + f' ({len(curves[name])})':>18}" for name in names))
    table = {name: [statistics.median(best_by(points, mark) for points in curves[name]) for mark in marks]
             for name in names}
    for i, mark in enumerate(marks):
        print(f"{mark:>8.0f}" + "".join(f"{table[name][i]:>18.4f}" for name in names))
    (out / "curves.json").write_text(json.dumps({"netlist": args.netlist, "budget_s": args.budget, "marks_s": marks,
                                                 "median": table, "points": curves}, indent=1) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: wrote curves.json only (pip install 'menger-rl[plot]')")
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    for name in names:
        axes.step(marks, table[name], where="post", label=f"{name} (median of {len(curves[name])})")
    axes.set_xlabel("wall-clock (s)")
    axes.set_ylabel("best proxy cost")
    axes.set_title(f"{args.netlist}: time to quality")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "curves.png", dpi=120)
    print(f"wrote {out / 'curves.json'} and {out / 'curves.png'}")


if __name__ == "__main__":
    main()
