"""Time to solve: how long `menger train cartpole-ppo` takes to reach a mean return of 475, per seed.

For each seed the whole command runs as a subprocess, exactly as a user types it (start-up, training, the
closing checkpoint, the summary and the plot included), and three figures come out:

* **training s to 475**: ``time/wall_s`` of the first record in the run's ``metrics.jsonl`` whose
  ``episode/return_mean`` (last 20 episodes) is at least the target. The trainer's clock starts when it
  starts the actors (forking them is inside it, torch's import and building the learner are not), and it
  writes a record the moment the target is met, before the closing checkpoint and shutdown;
* **env frames at 475**: ``time/env_frames`` of that record (frames the learner trained on);
* **command s**: wall-clock of the whole subprocess, from exec to exit.

    python benchmarks/cartpole_time.py [--seeds 1 2 3] [--preset cartpole-ppo] [--target 475] [--set K=V ...]

The table ends with the medians beside the targets of the issue (2.5 s of training, 8 s for the command).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_TRAINING_S = 2.5
TARGET_COMMAND_S = 8.0


@dataclass(frozen=True)
class SeedResult:
    seed: int
    training_s: float | None  # None: the run never reached the target
    frames: int | None
    command_s: float
    load: float  # 1-minute load average when the run ended: the machine is shared


def first_reaching(records: list[dict], target: float) -> dict | None:
    """The first metrics record whose mean return reached `target`, or None."""
    for record in records:
        value = record.get("episode/return_mean")
        if value is not None and value >= target:
            return record
    return None


def read_records(metrics_path: Path) -> list[dict]:
    return [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line.strip()]


def menger_command(preset: str, seed: int, run_dir: Path, overrides: list[str]) -> list[str]:
    """The installed `menger` script next to this interpreter (as a user runs it), else `python -m menger.cli`."""
    script = Path(sys.executable).parent / "menger"
    entry = [str(script)] if script.is_file() else [sys.executable, "-m", "menger.cli"]
    command = entry + ["train", preset, "--seed", str(seed), "--run-dir", str(run_dir), "--no-progress"]
    for override in overrides:
        command += ["--set", override]
    return command


def run_seed(preset: str, seed: int, target: float, overrides: list[str], root: Path) -> SeedResult:
    run_dir = root / f"{preset}-seed{seed}"
    command = menger_command(preset, seed, run_dir, overrides)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    command_s = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {done.returncode}:\n{done.stderr[-3000:]}")
    record = first_reaching(read_records(run_dir / "metrics.jsonl"), target)
    return SeedResult(seed, None if record is None else float(record["time/wall_s"]),
                      None if record is None else int(record["time/env_frames"]), command_s, os.getloadavg()[0])


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.2f}"


def median_or_none(values: list[float | None]) -> float | None:
    """Median over all seeds; a seed that never reached the target counts as infinitely slow."""
    ranked = [float("inf") if v is None else v for v in values]
    middle = statistics.median(ranked)
    return None if middle == float("inf") else middle


def report(results: list[SeedResult], preset: str, target: float) -> str:
    lines = [f"{preset}: seconds and env frames to a mean return of {target:g} (last 20 episodes)", "",
             f"{'seed':>4}  {'training s':>11}  {'frames':>8}  {'command s':>9}  {'load':>5}"]
    for r in results:
        frames = "-" if r.frames is None else f"{r.frames:,}"
        lines.append(f"{r.seed:>4}  {_seconds(r.training_s):>11}  {frames:>8}  {r.command_s:>9.2f}  {r.load:>5.2f}")
    training = median_or_none([r.training_s for r in results])
    frames = median_or_none([r.frames for r in results])
    command = statistics.median(r.command_s for r in results)
    lines += ["", f"median training s to {target:g}: {_seconds(training)}  (target {TARGET_TRAINING_S:g} s)",
              f"median env frames:       {'-' if frames is None else f'{frames:,.0f}'}",
              f"median command s:        {command:.2f}  (target {TARGET_COMMAND_S:g} s)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--preset", default="cartpole-ppo")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="passed on to `menger train --set` (repeatable)")
    parser.add_argument("--keep", help="keep the run directories under this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="menger-cartpole-time-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        results = []
        for seed in args.seeds:
            results.append(run_seed(args.preset, seed, args.target, args.overrides, root))
            print(f"seed {seed}: {_seconds(results[-1].training_s)} s of training, "
                  f"{results[-1].command_s:.2f} s in all", flush=True)
        print()
        print(report(results, args.preset, args.target))
    return 0 if all(r.training_s is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
