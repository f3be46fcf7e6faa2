"""Gradient modes: three ways of applying A3C's actor-critic gradients on CartPole, at 1, 2, 4 workers, in one run.

All three train `cartpole-a3c` (the A3C loss, 16 envs an actor, unrolls of 16) with N workers:

* **all-reduce** (A2C): ``menger train cartpole-a3c --set runtime.learner.mode=allreduce --learners N
  --actors N``. Actors only act; each round (sync) the N learner ranks take a share of the batch of one unroll
  per actor, compute the loss's gradient on it and all-reduce: one update averages N gradients;
* **sync PS**: ``menger train cartpole-a3c --set runtime.parameter_server.update=sync --actors N``. Each actor
  is an actor-learner that computes the gradient of its own unroll; the parameter server averages one gradient
  per actor and steps: one update averages N gradients;
* **async PS**: ``menger train cartpole-a3c --actors N``, the preset: each gradient is applied alone as it
  arrives, and one computed on parameters more than 4 versions old (``max_staleness``) is dropped.

Each run is the `menger` command as a subprocess with ``--seed S --no-progress``, no TensorBoard, no periodic
checkpoints and a wall-clock cap (``stop.wall_clock_s``). It stops at the preset's target (a mean return of 475
over the last 20 episodes), at its 3M env frames, or at the cap. From the run's ``metrics.jsonl``:

* **updates/s**: learner updates over training wall time (``time/wall_s`` of the closing record: the trainer's
  clock, from starting the actors to the stop, before the closing checkpoint and shutdown);
* **gradients/s**: gradients applied per second: updates/s x N for all-reduce and sync PS, updates/s for async PS;
* **frames/s**: env frames learned from (``time/env_frames``) over the same training wall time;
* **frames to 475**, **s to 475**: ``time/env_frames`` and ``time/wall_s`` of the first record that reached the
  target; ``not reached`` when the run stopped at the frame budget or the cap first;
* **lag**: ``learner/policy_lag_mean`` (versions between the parameters an unroll was acted or differentiated
  with and the learner's), averaged over the run's records;
* **stale dropped**: ``transport/frames_dropped/policy_lag``, env frames whose unroll was thrown away as too stale.

The table gives medians over the seeds (an unreached target counts as infinitely slow) and the 1-minute load
average at the end of each run. Runs alternate between the modes, so each sees about the same load.

    python benchmarks/gradient_modes.py [--workers 1 2 4] [--seeds 3] [--wall-clock-s 60]
                                        [--launcher processes|threads] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from cartpole_time import first_reaching, median_or_none, menger_command, read_records

PRESET = "cartpole-a3c"
TARGET = 475.0  # the preset's stop.target_return
MODES = ("all-reduce", "sync PS", "async PS")


def mode_flags(mode: str, workers: int) -> list[str]:
    """The `menger train` flags that select `mode` with `workers` workers."""
    actors = ["--actors", str(workers)]
    if mode == "all-reduce":
        return ["--set", "runtime.learner.mode=allreduce", "--learners", str(workers), *actors]
    if mode == "sync PS":
        return ["--set", "runtime.parameter_server.update=sync", *actors]
    return actors  # async PS: the preset


def gradients_per_update(mode: str, workers: int) -> int:
    """All-reduce and sync PS average one gradient per worker in an update; async PS applies each alone."""
    return 1 if mode == "async PS" else workers


@dataclass(frozen=True)
class Run:
    mode: str
    workers: int
    seed: int
    wall_s: float  # training wall time
    updates_per_s: float
    gradients_per_s: float
    frames_per_s: float
    frames_to_target: int | None  # None: not reached
    seconds_to_target: float | None
    policy_lag_mean: float
    stale_frames_dropped: int
    load: float  # 1-minute load average when the run ended


def run_once(mode: str, workers: int, seed: int, wall_clock_s: float, launcher: str, root: Path) -> Run:
    run_dir = root / f"{mode.replace(' ', '-')}-{workers}-seed{seed}"
    settings = [f"stop.wall_clock_s={wall_clock_s}", "log.tensorboard=false", "checkpoint.interval_s=0"]
    command = menger_command(PRESET, seed, run_dir, settings) + mode_flags(mode, workers) + ["--launcher", launcher]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {done.returncode}:\n{done.stderr[-3000:]}")
    return read_run(read_records(run_dir / "metrics.jsonl"), mode, workers, seed, load=os.getloadavg()[0])


def read_run(records: list[dict], mode: str, workers: int, seed: int, load: float) -> Run:
    """One run's figures from its metrics records (the last one is the closing record)."""
    closing, reached = records[-1], first_reaching(records, TARGET)
    wall_s = max(float(closing["time/wall_s"]), 1e-9)
    updates_per_s = closing["learner/updates"] / wall_s
    return Run(mode, workers, seed, wall_s, updates_per_s, updates_per_s * gradients_per_update(mode, workers),
               closing["time/env_frames"] / wall_s,
               None if reached is None else int(reached["time/env_frames"]),
               None if reached is None else float(reached["time/wall_s"]),
               statistics.fmean(r.get("learner/policy_lag_mean", 0.0) for r in records),
               int(closing.get("transport/frames_dropped/policy_lag", 0)), load)


# ----- the table --------------------------------------------------------------------------------
COLUMNS = ("mode", "workers", "updates/s", "gradients/s", "frames/s", "frames to 475", "s to 475", "lag",
           "stale dropped", "load (each run)")
WIDTHS = (10, 7, 9, 11, 9, 13, 11, 5, 13, 0)  # the loads run on as long as they are


def _row(cells) -> str:
    return "  ".join(f"{cell:<{w}}" if i < 2 else f"{cell:>{w}}" for i, (cell, w) in enumerate(zip(cells, WIDTHS)))


def _or_not_reached(value: float | None, spec: str) -> str:
    return "not reached" if value is None else format(value, spec)


def summary(runs: list[Run]) -> dict:
    """The medians over the seeds of one (mode, workers) cell's runs."""
    rates = ("updates_per_s", "gradients_per_s", "frames_per_s", "policy_lag_mean", "stale_frames_dropped")
    return {"mode": runs[0].mode, "workers": runs[0].workers, "seeds": [r.seed for r in runs],
            **{name: statistics.median(getattr(r, name) for r in runs) for name in rates},
            "frames_to_target": median_or_none([r.frames_to_target for r in runs]),
            "seconds_to_target": median_or_none([r.seconds_to_target for r in runs]),
            "loads": [r.load for r in runs]}


def format_table(rows: list[dict]) -> str:
    lines = [_row(COLUMNS)]
    lines.append("-" * len(lines[0]))
    for s in rows:
        lines.append(_row((s["mode"], s["workers"], f"{s['updates_per_s']:,.0f}", f"{s['gradients_per_s']:,.0f}",
                           f"{s['frames_per_s']:,.0f}", _or_not_reached(s["frames_to_target"], ",.0f"),
                           _or_not_reached(s["seconds_to_target"], ".1f"), f"{s['policy_lag_mean']:.2f}",
                           f"{s['stale_frames_dropped']:,.0f}", ", ".join(f"{x:.1f}" for x in s["loads"]))))
    seeds = len(rows[0]["seeds"]) if rows else 0
    lines.append(f"{PRESET}, medians of {seeds} seed(s); rates over training wall time; load: 1-minute load "
                 f"average at the end of each run, on {os.cpu_count()} cores")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="N: actors (and learner ranks)")
    parser.add_argument("--seeds", type=int, default=3, help="runs per (mode, workers), seeds 1..K")
    parser.add_argument("--wall-clock-s", type=float, default=60.0, help="stop.wall_clock_s of every run")
    parser.add_argument("--launcher", choices=("processes", "threads"), default="processes")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's figures to this JSON file")
    args = parser.parse_args(argv)
    if args.seeds < 1 or min(args.workers) < 1:
        parser.error("--seeds and --workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    """Run every (mode, workers, seed), print the table, write --json; returns the table's rows."""
    args = parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="menger-gradient-modes-") as root:
        for seed in range(1, args.seeds + 1):
            for workers in args.workers:
                for mode in MODES:
                    runs.append(run_once(mode, workers, seed, args.wall_clock_s, args.launcher, Path(root)))
                    reached = "not reached" if runs[-1].seconds_to_target is None else "reached"
                    print(f"{mode}, {workers} worker(s), seed {seed}: {runs[-1].wall_s:.1f} s, 475 {reached}",
                          file=sys.stderr, flush=True)
    rows = [summary([r for r in runs if (r.mode, r.workers) == (mode, workers)])
            for mode in MODES for workers in args.workers]
    print(format_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "runs": [asdict(r) for r in runs]}, indent=2))
    return rows


if __name__ == "__main__":
    main()
