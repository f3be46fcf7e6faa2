"""Gradient modes: all-reduce against a sync and an async parameter server on CartPole, at 1, 2, 4 workers.

`--family a3c` (actor-critic): all three train `cartpole-a3c` (the A3C loss, 16 envs an actor, unrolls of 16)
with N workers:

* **all-reduce** (A2C): ``menger train cartpole-a3c --set runtime.learner.mode=allreduce --learners N
  --actors N``. Actors only act; each round (sync) the N learner ranks take a share of the batch of one unroll
  per actor, compute the loss's gradient on it and all-reduce: one update averages N gradients;
* **sync PS**: ``menger train cartpole-a3c --set runtime.parameter_server.update=sync --actors N``. Each actor
  is an actor-learner that computes the gradient of its own unroll; the parameter server averages one gradient
  per actor and steps: one update averages N gradients;
* **async PS**: ``menger train cartpole-a3c --actors N``, the preset: each gradient is applied alone as it
  arrives, and one computed on parameters more than 4 versions old (``max_staleness``) is dropped.

`--family dqn` (from replay, `cartpole-apex`'s settings): **Ape-X** (`menger train cartpole-apex`: one learner
steps on its own samples, the baseline, at 1 worker only), **GORILA sync PS** (``menger train cartpole-gorila
--learners N --set runtime.parameter_server.update=sync``: N learner processes each sample a batch, the server
averages their N gradients) and **GORILA async PS** (``menger train cartpole-gorila --learners N``: each gradient
applied as it arrives, stale ones dropped). Their target is the deterministic evaluation's (10 greedy episodes),
and their seconds to 475 leave the evaluations' time out (``eval/time_s``). `--family both` (the default) runs
both families.

Each run is the `menger` command as a subprocess with ``--seed S --no-progress``, no TensorBoard, no periodic
checkpoints and a wall-clock cap (``stop.wall_clock_s``). It stops at the preset's target (a mean return of 475
over the last 20 episodes), at its 3M env frames, or at the cap. From the run's ``metrics.jsonl``:

* **updates/s**: learner updates over training wall time (``time/wall_s`` of the closing record: the trainer's
  clock, from starting the actors to the stop, before the closing checkpoint and shutdown);
* **gradients/s**: gradients applied per second: updates/s x N for all-reduce and sync PS, updates/s for async PS;
* **frames/s**: env frames learned from (``time/env_frames``) over the same training wall time;
* **frames to 475**, **s to 475**: ``time/env_frames`` and ``time/wall_s`` of the first record that reached the
  target; ``not reached`` when the run stopped at the frame budget or the cap first;
* **lag**: the gradients' staleness, averaged over the run's records: ``learner/policy_lag_mean`` for A3C
  (versions between the parameters an unroll was acted and differentiated with and the learner's),
  ``learner/staleness_mean`` for GORILA (versions between the parameters a learner read and the server's when
  its gradient arrived; 0 for Ape-X);
* **stale dropped**: ``transport/frames_dropped/policy_lag``, env frames whose unroll (A3C: and gradient) was
  thrown away as too stale; for GORILA, ``learner/gradients_dropped_stale``, gradients.

The table gives medians over the seeds (an unreached target counts as infinitely slow) and the 1-minute load
average at the end of each run. Runs alternate between the modes, so each sees about the same load.

    python benchmarks/gradient_modes.py [--family a3c|dqn|both] [--workers 1 2 4] [--seeds 3]
                                        [--wall-clock-s 60] [--launcher processes|threads] [--json out.json]
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

TARGET = 475.0  # both presets' stop.target_return


@dataclass(frozen=True)
class Mode:
    name: str
    family: str
    preset: str
    sync: bool              # one update averages one gradient of every worker
    target_key: str         # what the stop rule reads
    one_worker_only: bool = False

    @property
    def lag_key(self) -> str:
        """The gradients' staleness: an A3C gradient's is its unroll's policy lag; a GORILA gradient's is measured
        by the trainer (Ape-X, whose one learner steps on its own parameters, has none)."""
        return "learner/staleness_mean" if self.family == "dqn" else "learner/policy_lag_mean"

    def flags(self, workers: int) -> list[str]:
        """The `menger train` flags that select this mode with `workers` workers."""
        if self.preset == "cartpole-apex":
            return []
        if self.family == "dqn":
            sync = ["--set", "runtime.parameter_server.update=sync"] if self.sync else []
            return ["--learners", str(workers), *sync]
        actors = ["--actors", str(workers)]
        if self.name == "all-reduce":
            return ["--set", "runtime.learner.mode=allreduce", "--learners", str(workers), *actors]
        if self.sync:
            return ["--set", "runtime.parameter_server.update=sync", *actors]
        return actors  # async PS: the preset


MODES = (
    Mode("all-reduce", "a3c", "cartpole-a3c", True, "episode/return_mean"),
    Mode("sync PS", "a3c", "cartpole-a3c", True, "episode/return_mean"),
    Mode("async PS", "a3c", "cartpole-a3c", False, "episode/return_mean"),
    Mode("Ape-X", "dqn", "cartpole-apex", False, "eval/return_mean", one_worker_only=True),
    Mode("GORILA sync PS", "dqn", "cartpole-gorila", True, "eval/return_mean"),
    Mode("GORILA async PS", "dqn", "cartpole-gorila", False, "eval/return_mean"),
)


def gradients_per_update(mode: Mode, workers: int) -> int:
    """A sync update averages one gradient per worker; an async one (and Ape-X's) applies one."""
    return workers if mode.sync else 1


def first_at_target(records: list[dict], key: str) -> dict | None:
    if key == "episode/return_mean":
        return first_reaching(records, TARGET)
    return next((r for r in records if r.get(key) is not None and r[key] >= TARGET), None)


@dataclass(frozen=True)
class Run:
    mode: str
    preset: str
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


def run_once(mode: Mode, workers: int, seed: int, wall_clock_s: float, launcher: str, root: Path) -> Run:
    run_dir = root / f"{mode.name.replace(' ', '-')}-{workers}-seed{seed}"
    settings = [f"stop.wall_clock_s={wall_clock_s}", "log.tensorboard=false", "checkpoint.interval_s=0"]
    command = menger_command(mode.preset, seed, run_dir, settings) + mode.flags(workers) + ["--launcher", launcher]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {done.returncode}:\n{done.stderr[-3000:]}")
    return read_run(read_records(run_dir / "metrics.jsonl"), mode, workers, seed, load=os.getloadavg()[0])


def read_run(records: list[dict], mode: Mode, workers: int, seed: int, load: float) -> Run:
    """One run's figures from its metrics records (the last one is the closing record). Evaluations' time
    (`eval/time_s`, the DQN family's) is left out of the seconds."""
    closing, reached = records[-1], first_at_target(records, mode.target_key)
    wall_s = max(float(closing["time/wall_s"]) - closing.get("eval/time_s", 0.0), 1e-9)
    updates_per_s = closing["learner/updates"] / wall_s
    return Run(mode.name, mode.preset, workers, seed, wall_s, updates_per_s,
               updates_per_s * gradients_per_update(mode, workers), closing["time/env_frames"] / wall_s,
               None if reached is None else int(reached["time/env_frames"]),
               None if reached is None else float(reached["time/wall_s"]) - reached.get("eval/time_s", 0.0),
               statistics.fmean(r.get(mode.lag_key, 0.0) for r in records),
               int(closing.get("transport/frames_dropped/policy_lag", 0)
                   + closing.get("learner/gradients_dropped_stale", 0)), load)


# ----- the table --------------------------------------------------------------------------------
COLUMNS = ("mode", "workers", "updates/s", "gradients/s", "frames/s", "frames to 475", "s to 475", "lag",
           "stale dropped", "load (each run)")
WIDTHS = (15, 7, 9, 11, 9, 13, 11, 5, 13, 0)  # the loads run on as long as they are


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
    lines.append(f"medians of {seeds} seed(s); rates over training wall time (evaluations left out); 475: the mean "
                 "return (a3c) or the greedy evaluation's (dqn); stale dropped: frames (a3c) or gradients (GORILA); "
                 f"load: 1-minute load average at the end of each run, on {os.cpu_count()} cores")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("a3c", "dqn", "both"), default="both",
                        help="a3c: all-reduce, sync and async PS on cartpole-a3c; dqn: Ape-X and GORILA")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4],
                        help="N: actors and learner ranks (a3c), GORILA's learners (dqn)")
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
    modes = [m for m in MODES if args.family in ("both", m.family)]
    cells = [(m, w) for m in modes for w in args.workers if not (m.one_worker_only and w != args.workers[0])]
    runs = []
    with tempfile.TemporaryDirectory(prefix="menger-gradient-modes-") as root:
        for seed in range(1, args.seeds + 1):
            for mode, workers in cells:  # modes alternate, so each sees about the same load
                runs.append(run_once(mode, workers, seed, args.wall_clock_s, args.launcher, Path(root)))
                reached = "not reached" if runs[-1].seconds_to_target is None else "reached"
                print(f"{mode.name}, {workers} worker(s), seed {seed}: {runs[-1].wall_s:.1f} s, 475 {reached}",
                      file=sys.stderr, flush=True)
    rows = [summary([r for r in runs if (r.mode, r.workers) == (mode.name, workers)]) for mode, workers in cells]
    print(format_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "runs": [asdict(r) for r in runs]}, indent=2))
    return rows


if __name__ == "__main__":
    main()
