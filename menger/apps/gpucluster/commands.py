"""``menger schedule-gpus``: GPU-sharing schedulers on a production trace, as the FGD paper evaluates them.

Each policy runs ``--seeds`` Monte-Carlo inflation runs (``evaluate.py``) from the same seeds, so every policy
sees the same arrival orders. The table gives, per policy, the mean GPU allocation ratio over seeds at each
arrived-workload level with its 95 % interval, and the GPUs left unallocated at 100 %. The figure plots the
allocation against the arrived workload, the median over seeds with the interquartile band.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from menger.apps.gpucluster.cluster import ClusterState, task_list
from menger.apps.gpucluster.evaluate import CURVE_PERCENTS, INFLATION_RATIO, RunRecord, evaluate
from menger.apps.gpucluster.frag import target_workload
from menger.apps.gpucluster.learned import learned_factory
from menger.apps.gpucluster.policies import HEURISTICS
from menger.apps.gpucluster.trace import WHERE_TO_GET, TraceError, check_fits, read_nodes, read_tasks
from menger.extras import require

FIRST_SEED = 42
LEVELS = (80, 90, 100, 110, 120, 130)
PLOT_PURPOSE = "`menger schedule-gpus` (it draws allocation_vs_workload.png)"


def schedule_gpus_main(argv: list[str]) -> int:
    """Entry point of ``menger schedule-gpus``; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        _check(args)
        nodes = read_nodes(args.nodes)
        trace = read_tasks(args.trace)
        check_fits(nodes, trace, args.trace)
        _compare(args, ClusterState(nodes), task_list(trace, nodes.models))
    except (ValueError, FileNotFoundError) as error:
        kind = "trace error" if isinstance(error, TraceError) else "error"
        print(f"menger schedule-gpus: {kind}: {error}", file=sys.stderr)
        return 2
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="menger schedule-gpus",
        description="Compare GPU-sharing schedulers on a cluster trace in the format of the Alibaba GPU cluster "
                    "trace 2023 (Weng et al., ATC 2023): Monte-Carlo workload inflation to --ratio of the GPUs, "
                    f"GPU allocation against arrived workload. Note: {WHERE_TO_GET}.")
    parser.add_argument("--nodes", required=True, metavar="NODES.csv",
                        help="the node file (sn,cpu_milli,memory_mib,gpu,model), e.g. openb_node_list_gpu_node.csv")
    parser.add_argument("--trace", required=True, metavar="TASKS.csv",
                        help="the task file (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]), e.g. "
                             "openb_pod_list_default.csv")
    parser.add_argument("--policy", action="append", metavar="NAME|RUN_DIR",
                        help=f"a heuristic ({', '.join(HEURISTICS)}) or the run directory of a GpuSharing-v0 "
                             "policy (menger train gpushare-ppo); repeat for several (default: the heuristics)")
    parser.add_argument("--seeds", type=int, default=10, help="inflation runs per policy (default 10)")
    parser.add_argument("--seed", type=int, default=FIRST_SEED, help=f"first seed (default {FIRST_SEED})")
    parser.add_argument("--ratio", type=float, default=INFLATION_RATIO,
                        help=f"inflate the workload to this multiple of the GPUs (default {INFLATION_RATIO})")
    parser.add_argument("--out", default="./schedule-gpus-out", help="where the CSV, JSON and PNG go")
    parser.add_argument("--no-plot", action="store_true", help="write no figure (needs no matplotlib)")
    return parser


def _check(args: argparse.Namespace) -> None:
    if args.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {args.seeds}.")
    if not 0 < args.ratio <= 3:
        raise ValueError(f"--ratio must lie in (0, 3], got {args.ratio}.")
    for name in args.policy or ():
        if name not in HEURISTICS and not Path(name).is_dir():
            raise ValueError(f"unknown policy {name!r}: use one of {', '.join(HEURISTICS)} or a training run "
                             "directory.")
    if not args.no_plot:
        require("matplotlib", "plot", PLOT_PURPOSE)


def _compare(args: argparse.Namespace, state: ClusterState, tasks: list) -> None:
    names = args.policy or list(HEURISTICS)
    if any(name not in HEURISTICS for name in names):
        import torch

        torch.set_num_threads(1)  # one small forward per task: a second thread only waits for the first
    workload = target_workload(tasks)
    seeds = range(args.seed, args.seed + args.seeds)
    print(f"{len(state)} nodes, {state.nodes.total_gpus} GPUs; {len(tasks)} tasks in the trace; target workload "
          f"of {len(workload)} task shapes; {args.seeds} seeds from {args.seed}, inflation to {args.ratio:g}x")
    curves: dict[str, np.ndarray] = {}
    rates: dict[str, float] = {}
    for name in names:
        records: list[RunRecord] = []
        start = time.perf_counter()
        scheduler = name if name in HEURISTICS else learned_factory(name)
        for seed in seeds:
            records.append(evaluate(state, tasks, workload, scheduler, seed, args.ratio))
        curves[name] = np.stack([record.allocation_at() for record in records])
        rates[name] = sum(len(r.placed) for r in records) / sum(r.seconds for r in records)
        print(f"  {name}: {args.seeds} runs in {time.perf_counter() - start:.1f} s ({rates[name]:,.0f} tasks/s)",
              flush=True)
    table = summary(curves, state.nodes.total_gpus)
    print_table(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_curves(curves, seeds, out / "allocation.csv")
    (out / "summary.json").write_text(json.dumps({"nodes": args.nodes, "trace": args.trace, "seeds": list(seeds),
                                                  "ratio": args.ratio, "tasks_per_second": rates,
                                                  "policies": table}, indent=2))
    written = [out / "allocation.csv", out / "summary.json"]
    if not args.no_plot:
        plot_allocation(curves, out / "allocation_vs_workload.png", Path(args.trace).stem)
        written.append(out / "allocation_vs_workload.png")
    print("wrote " + ", ".join(str(path) for path in written))


def summary(curves: dict[str, np.ndarray], total_gpus: int) -> dict[str, dict]:
    """Per policy: mean allocation (%) and 95 % interval half-width at each level, and unallocated GPUs at 100 %."""
    table: dict[str, dict] = {}
    for name, runs in curves.items():
        row: dict = {}
        for level in LEVELS:
            values = runs[:, level][~np.isnan(runs[:, level])]
            half = 1.96 * values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
            row[str(level)] = {"mean": round(float(values.mean()), 3) if len(values) else None,
                               "ci95": round(float(half), 3) if len(values) > 1 else None}
        at_100 = row["100"]["mean"]
        row["unallocated_gpus_at_100"] = None if at_100 is None else round(total_gpus * (1 - at_100 / 100), 1)
        table[name] = row
    return table


def print_table(table: dict[str, dict]) -> None:
    header = f"{'policy':<16}" + "".join(f"{f'{level} %':>16}" for level in LEVELS) + f"{'unalloc@100':>13}"
    print("GPU allocation ratio (%) at each arrived workload, mean ± 95 % interval over seeds")
    print(header)
    for name, row in table.items():
        cells = "".join(f"{_cell(row[str(level)]):>16}" for level in LEVELS)
        unallocated = row["unallocated_gpus_at_100"]
        print(f"{name:<16}{cells}{'-' if unallocated is None else f'{unallocated:.1f}':>13}")


def _cell(entry: dict) -> str:
    if entry["mean"] is None:
        return "-"
    return f"{entry['mean']:.2f}" + ("" if entry["ci95"] is None else f" ± {entry['ci95']:.2f}")


def write_curves(curves: dict[str, np.ndarray], seeds: range, path: Path) -> None:
    """One row per policy and seed: the allocation ratio (%) at arrived workload 0..130 %."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["policy", "seed", *CURVE_PERCENTS.tolist()])
        for name, runs in curves.items():
            for seed, curve in zip(seeds, runs):
                writer.writerow([name, seed, *("" if np.isnan(v) else f"{v:.2f}" for v in curve)])


def plot_allocation(curves: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Allocation against arrived workload (70-130 %): median over seeds, interquartile band."""
    matplotlib = require("matplotlib", "plot", PLOT_PURPOSE)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = CURVE_PERCENTS >= 70
    figure, axes = plt.subplots(figsize=(6.5, 4.2))
    for name, runs in curves.items():
        low, mid, high = np.nanpercentile(runs[:, shown], [25, 50, 75], axis=0)
        axes.plot(CURVE_PERCENTS[shown], mid, label=name)
        axes.fill_between(CURVE_PERCENTS[shown], low, high, alpha=0.25)
    axes.plot(CURVE_PERCENTS[shown], np.minimum(CURVE_PERCENTS[shown], 100), color="grey", lw=0.8, ls=":",
              label="all arrived placed")
    axes.set_xlabel("arrived workload (% of the cluster's GPUs)")
    axes.set_ylabel("GPUs allocated (%)")
    axes.set_title(f"{title}: GPU allocation, median and IQR over seeds")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
