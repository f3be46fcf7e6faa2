"""Command-line entry points: `place_main` (place a design, write .plc + PNG + cost report) and
`cost_main` (evaluate a .plc against a netlist, compared with the costs its header records)."""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

from menger.apps.chip import baselines
from menger.apps.chip.costs import Layout, ProxyCost, proxy_cost
from menger.apps.chip.plc import write_plc
from menger.apps.chip.problem import ChipProblem, legality_problems, load_problem
from menger.apps.chip.render import PURPOSE as PLACE_PURPOSE, draw_placement
from menger.apps.chip.selection import CheckpointRollouts, Rollout, summary
from menger.extras import require

METHODS = ("rl", "sa", "greedy", "random")
RL_PRESET = "chip-ppo"


# The run is scored by its cheapest checkpoint's deterministic rollout (selection.py): checkpoints every
# budget / ROLLOUTS_PER_RUN seconds; the FINISHED_ROLLOUTS cheapest (as the environment scores an episode)
# get the force-directed and analytical soft-macro passes and the cheapest after it is kept. Training stops at
# TRAIN_SHARE of the budget so that start-up, the final checkpoint's rollout and those passes fit inside it
# (a few seconds each on Ariane).
ROLLOUTS_PER_RUN = 20
FINISHED_ROLLOUTS = 3
TRAIN_SHARE = 0.955


def place_with_rl(problem: ChipProblem, netlist: str, budget_s: float, out: pathlib.Path, seed: int,
                  overrides: tuple[str, ...] = ()) -> list[Rollout]:
    """Train the `chip-ppo` preset on this netlist within the budget, rolling out each checkpoint's policy
    deterministically as it is saved; return the FINISHED_ROLLOUTS cheapest of those placements (all are
    listed in out/rl_rollouts.json, their hard macros kept in out/rl_rollouts.npz). `overrides` (`key=value`)
    go after the netlist, budget and seed ones."""
    from menger import api
    from menger.experiment import load_experiment

    settings = [f"env.kwargs.netlist={netlist}", f"stop.wall_clock_s={budget_s * TRAIN_SHARE}",
                f"checkpoint.interval_s={budget_s / ROLLOUTS_PER_RUN}", f"runtime.seed={seed}", *overrides]
    config = load_experiment(RL_PRESET, settings)
    run_dir = out / "rl_run"
    watcher = CheckpointRollouts(run_dir, problem, config)
    watcher.start()
    try:
        api.train(config, run_dir=str(run_dir), observers=[watcher])
    except BaseException:
        watcher.stop()
        raise
    watcher.finish()
    (out / "rl_rollouts.json").write_text(json.dumps(summary(watcher.history), indent=2) + "\n")
    actors = config.runtime.actors if isinstance(config.runtime.actors, int) else 0  # 0: "auto"
    save_rollouts(problem, watcher.history, out / "rl_rollouts.npz", actors=actors)
    return watcher.tracker.cheapest(FINISHED_ROLLOUTS)


def save_rollouts(problem: ChipProblem, history: list[Rollout], path: pathlib.Path, actors: int = 0) -> None:
    """The movable hard macros of each rollout that placed them all (x, y, orientation in `problem.movable`
    order), with its checkpoint step, seconds into the run and proxy cost, and the run's actor count: enough
    to finish any of them later (benchmarks/chip_time_to_cost.py)."""
    placed = [r for r in history if r.layout is not None]
    movable = problem.movable
    np.savez(path, movable=movable, actors=actors, step=np.array([r.step for r in placed], dtype=np.int64),
             elapsed_s=np.array([r.elapsed_s for r in placed]), proxy=np.array([r.proxy for r in placed]),
             x=np.array([r.layout.x[movable] for r in placed]).reshape(len(placed), len(movable)),
             y=np.array([r.layout.y[movable] for r in placed]).reshape(len(placed), len(movable)),
             orientation=np.array([r.layout.orientation[movable] for r in placed]).reshape(len(placed), len(movable)))


def place(problem: ChipProblem, method: str, budget_s: float, seed: int, netlist: str,
          out: pathlib.Path) -> list[tuple[Layout, dict]]:
    """Hard-macro placements to finish, each with what the report says of it, for `method`: one, or for rl
    the cheapest few of the run's rollouts (with their checkpoint step and episode score)."""
    rng = np.random.default_rng(seed)
    if method == "random":
        return [(baselines.random_placement(problem, rng), {})]
    if method == "greedy":
        return [(baselines.greedy_placement(problem), {})]
    if method == "sa":
        return [(baselines.simulated_annealing(problem, budget_s, rng, start=baselines.greedy_placement(problem)), {})]
    return [(rollout.layout, {"checkpoint_step": rollout.step, "episode_score": rollout.proxy})
            for rollout in place_with_rl(problem, netlist, budget_s, out, seed)]


def finish_cheapest(problem: ChipProblem, candidates: list[tuple[Layout, dict]],
                    soft: str) -> tuple[Layout, ProxyCost, list[dict]]:
    """Place the soft macros of each hard-macro placement (`baselines.finish`) and keep the cheapest; the
    list says what each candidate cost once finished."""
    finished = [baselines.finish(problem, layout, soft=soft) for layout, _ in candidates]
    listed = [{**info, "proxy_cost": cost.weighted()} for (_, info), (_, cost) in zip(candidates, finished)]
    final, costs = min(finished, key=lambda pair: pair[1].weighted())
    return final, costs, listed


def cost_table(rows: dict[str, ProxyCost], weights: dict | None = None) -> str:
    lines = [f"{'':<10}{'wirelength':>12}{'density':>10}{'congestion':>12}{'proxy':>10}"]
    for label, c in rows.items():
        lines.append(f"{label:<10}{c.wirelength:>12.4f}{c.density:>10.4f}{c.congestion:>12.4f}"
                     f"{c.weighted(**(weights or {})):>10.4f}")
    return "\n".join(lines)


def place_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="menger place", description="Place the hard macros of a netlist.")
    parser.add_argument("netlist", help="netlist .pb.txt(.gz) path, its folder, or a packaged name (macro_tiles_10x10)")
    parser.add_argument("--plc", help="initial .plc (grid header and fixed nodes); default: initial.plc beside it")
    parser.add_argument("--method", choices=METHODS, default="sa")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds for sa / rl")
    parser.add_argument("--out", default="chip_out", help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--soft", choices=baselines.SOFT_PLACERS, default="analytic",
                        help="soft-macro placer after the hard macros: force-directed then analytical (default), "
                             "or force-directed only (fd), as the environment scores episodes")
    args = parser.parse_args(argv)
    require("matplotlib", "plot", PLACE_PURPOSE)  # before the placement's budget is spent, not after
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problem = load_problem(args.netlist, args.plc)
    began = time.perf_counter()
    candidates = place(problem, args.method, args.budget, args.seed, args.netlist, out)
    final, costs, finished = finish_cheapest(problem, candidates, args.soft)
    seconds = time.perf_counter() - began
    plc_path = write_plc(problem.to_placement(final, costs), out / "placement.plc")
    png_path = draw_placement(problem, final, out / "placement.png", title=f"{problem.netlist_path.parent.name}: "
                              f"{args.method}, proxy {costs.weighted():.4f}")
    report = {"netlist": str(problem.netlist_path), "method": args.method, "seed": args.seed, "soft": args.soft,
              "wall_clock_s": seconds, "proxy_cost": costs.weighted(), "tilos_proxy_cost": costs.weighted(w_density=0.5),
              **costs.as_dict(), "legality_problems": legality_problems(problem, final), "candidates": finished}
    (out / "cost_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(cost_table({args.method: costs}))
    print(f"TILOS weighting (density x 0.5): {report['tilos_proxy_cost']:.4f}")
    print(f"wall-clock {seconds:.1f} s; wrote {plc_path}, {png_path}, {out / 'cost_report.json'}")
    return 0


def cost_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="menger cost", description="Proxy costs of a .plc placement.")
    parser.add_argument("netlist", help="netlist path, its folder, or a packaged name")
    parser.add_argument("plc", help=".plc placement to evaluate")
    args = parser.parse_args(argv)
    problem = load_problem(args.netlist, args.plc)
    costs = proxy_cost(problem.model, problem.initial)
    print(cost_table({"computed": costs}))
    print(f"TILOS weighting (density x 0.5): {costs.weighted(w_density=0.5):.4f}")
    illegal = legality_problems(problem, problem.initial)
    print("legal: hard macros inside the canvas, off blockages, not overlapping; soft macros inside the canvas"
          if not illegal else f"not legal ({len(illegal)} problems; the first {min(5, len(illegal))}): "
          + "; ".join(illegal[:5]))
    recorded = problem.header.recorded
    names = {"wirelength": "wirelength_cost", "density": "density_cost", "congestion": "congestion_cost"}
    for label, key in names.items():
        if key in recorded:
            ours, theirs = getattr(costs, label), recorded[key]
            error = abs(ours - theirs) / abs(theirs) if theirs else float("nan")
            print(f"{label:<11} computed {ours:.4f}  recorded {theirs:.4f}  relative error {error:.2%}")
    return 0
