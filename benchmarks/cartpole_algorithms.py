"""CartPole-v1 to a return of 475 with several algorithms' presets in one sitting: `cartpole-pqn` beside
`cartpole-ppo` and `cartpole-apex` by default.

Every run is the command a user types (`menger train PRESET --seed S`), one after another, seed by seed (each
seed runs every preset before the next seed starts, so they share the machine's load), and reports, from the
run's `metrics.jsonl`:

* **criterion**: what the preset's own stop rule reads: the greedy evaluation's 10-episode mean
  (`eval/return_mean`) for the algorithms whose actors explore (apex, pqn), the last 20 training episodes'
  mean (`episode/return_mean`) for those that act as their policy does (ppo);
* **training s** and **frames**: `time/wall_s` and `time/env_frames` of the first record that meets it
  (evaluation time included for apex and pqn: their trainer evaluates in its loop);
* **command s**: the whole command, start-up and the closing checkpoint included; **load**: the 1-minute load
  average when it ended.

    python benchmarks/cartpole_algorithms.py [--presets cartpole-pqn cartpole-ppo cartpole-apex] [--seeds 1 2 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cartpole_time import median_or_none, menger_command, read_records

from menger.experiment import load_experiment


@dataclass(frozen=True)
class Cell:
    preset: str
    seed: int
    metric: str
    training_s: float | None
    frames: int | None
    final: float | None  # the metric's last value
    command_s: float
    load: float


def criterion(preset: str) -> str:
    """The metric the preset's stop rule reads (its algorithm's registry entry says which)."""
    config = load_experiment(preset)
    return "eval/return_mean" if config.algorithm.evaluation == "greedy" else "episode/return_mean"


def run(preset: str, seed: int, target: float, root: Path, overrides: list[str]) -> Cell:
    run_dir = root / f"{preset}-seed{seed}"
    command = menger_command(preset, seed, run_dir, overrides)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    command_s = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")
    metric = criterion(preset)
    records = read_records(run_dir / "metrics.jsonl")
    reached = next((r for r in records if r.get(metric) is not None and r[metric] >= target), None)
    values = [r[metric] for r in records if r.get(metric) is not None]
    return Cell(preset, seed, metric, None if reached is None else float(reached["time/wall_s"]),
                None if reached is None else int(reached["time/env_frames"]), values[-1] if values else None,
                command_s, os.getloadavg()[0])


def table(cells: list[Cell], presets: list[str], target: float) -> str:
    lines = [f"CartPole-v1 to {target:g}, one sitting (each preset's own criterion)", "",
             "| preset | criterion | seed | training s | frames | final | command s | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell in cells:
        seconds = "not reached" if cell.training_s is None else f"{cell.training_s:.1f}"
        frames = "-" if cell.frames is None else f"{cell.frames:,}"
        final = "-" if cell.final is None else f"{cell.final:.0f}"
        lines.append(f"| {cell.preset} | {cell.metric} | {cell.seed} | {seconds} | {frames} | {final} | "
                     f"{cell.command_s:.1f} | {cell.load:.2f} |")
    lines += ["", "| preset | seeds reaching | median training s | median frames | median command s |",
              "| --- | --- | --- | --- | --- |"]
    for preset in presets:
        mine = [c for c in cells if c.preset == preset]
        seconds, frames = median_or_none([c.training_s for c in mine]), median_or_none([c.frames for c in mine])
        lines.append(f"| {preset} | {sum(c.training_s is not None for c in mine)}/{len(mine)} | "
                     f"{'-' if seconds is None else f'{seconds:.1f}'} | {'-' if frames is None else f'{frames:,.0f}'} | "
                     f"{statistics.median(c.command_s for c in mine):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["cartpole-pqn", "cartpole-ppo", "cartpole-apex"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="passed on to every run's `menger train --set` (repeatable)")
    parser.add_argument("--keep", help="keep the run directories under this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    cells = []
    with tempfile.TemporaryDirectory(prefix="menger-cartpole-algorithms-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        for seed in args.seeds:
            for preset in args.presets:
                cells.append(run(preset, seed, args.target, root, args.overrides))
                cell = cells[-1]
                print(f"{preset} seed {seed}: {cell.training_s} s, {cell.frames} frames", flush=True)
    text = table(cells, args.presets, args.target)
    print("\n" + text)
    return text


if __name__ == "__main__":
    main()
    sys.exit(0)
