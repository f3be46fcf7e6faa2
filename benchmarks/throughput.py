"""Training env-steps/s against the env-stepping ceiling, for CartPole-v1 (IMPALA) and ALE Pong (pong-impala,
pong-r2d2).

For each env, one table row gives:

* the raw ceiling: random-action env steps/s with no learner, on as many processes as the run has actors
  (CartPole: one single env stepped in a loop per process, and one vector env of B envs per process, summed
  over the processes run in parallel; Pong: one AtariVectorEnv of all the run's envs on 2 threads);
* Menger's training rate: env frames *accepted by the learner* (``time/env_frames``: with IMPALA every one of
  them in a gradient step; with R2D2 every one inserted into the replay, which the rate limiter paces by the
  learner's samples) per second of training, read from the run's metrics from its first accepted frame on, so
  that start-up (forking actors, building envs) is left out, and learner updates per second;
* training / ceiling (against the vector ceiling, the faster of the two), each run against the ceiling measured
  just before it.

    python benchmarks/throughput.py [--env cartpole|pong|pong-r2d2|both|all] [--seconds S] [--seeds N]
                                    [--launcher processes|ray] [--json out.json] [--actors A]
                                    [--envs-per-actor B] [--set runtime.unroll_length=64 ...]

``both`` is CartPole and pong-impala; ``all`` adds pong-r2d2.

The CartPole settings below are the fastest honest ones found on 2 cores (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from env_ceiling import measure_env_ceiling

from menger.api import train
from menger.experiment import ExperimentConfig, load_experiment

CARTPOLE_SINGLE_ENV = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"  # CartPole without its vector env
PONG_CEILING_THREADS = 2


@dataclass(frozen=True)
class Case:
    """One benchmarked env: the preset it trains with and the settings the benchmark adds."""

    label: str
    preset: str
    seconds: float
    overrides: tuple[str, ...] = field(default_factory=tuple)


CASES = {
    # One actor of 768 envs leaves the second core to the learner, which is the bottleneck (it runs forward
    # and backward over every frame). Batches of 2 unrolls of 16 x 768 frames keep the per-update overhead
    # (gather, publish, pipe messages) small while the policy lag stays at one version.
    "cartpole": Case("CartPole-v1", "cartpole-impala", 20.0,
                     ("runtime.actors=1", "runtime.envs_per_actor=768", "runtime.unroll_length=16",
                      "runtime.coordination.batch_unrolls=2", "runtime.coordination.slots_per_actor=2")),
    "pong": Case("ALE Pong", "pong-impala", 60.0),
    # R2D2's learner unrolls a CNN and an LSTM over 16 sequences of 41 frames, twice (online, target), per update.
    "pong-r2d2": Case("Pong R2D2", "pong-r2d2", 90.0),
}


def benchmark_overrides(seconds: float, seed: int) -> list[str]:
    """Settings every benchmarked run shares: a fixed duration, no target, no side work that is not training."""
    return [f"stop.wall_clock_s={seconds}", "stop.target_return=null", "stop.env_frames=null",
            "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0", "eval.interval_s=0",
            f"log.interval_s={min(1.0, seconds / 8)}", "runtime.launcher=processes", f"runtime.seed={seed}"]


# ----- the ceiling ------------------------------------------------------------------------------
def _ceiling_worker(args: tuple) -> float:
    env_id, num_envs, seconds, preset, num_threads = args
    return measure_env_ceiling(env_id, num_envs, seconds, preset=preset, wrapped=False, num_threads=num_threads)


def parallel_env_ceiling(env_id: str, num_envs: int, processes: int, seconds: float, preset: str | None = None,
                         num_threads: int = 1) -> float:
    """Raw random-action env steps/s of `processes` processes stepping at once, each with `num_envs` envs, summed.

    The processes run at the same time so that they compete for the cores as the training run's actors do.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    jobs = [(env_id, num_envs, seconds, preset, num_threads)] * processes
    with mp.get_context("fork").Pool(processes) as pool:
        return sum(pool.map(_ceiling_worker, jobs))


def ceilings(config: ExperimentConfig, seconds: float) -> dict[str, float]:
    """The ceilings a run of `config` is read against, by name; 'vector' is the one the ratio uses."""
    rt, env = config.runtime, config.env
    if env.preset == "atari":
        total_envs = rt.actors * rt.envs_per_actor
        return {"vector": parallel_env_ceiling(env.id, total_envs, 1, seconds, env.preset, PONG_CEILING_THREADS)}
    single_id = CARTPOLE_SINGLE_ENV if env.id == "CartPole-v1" else env.id
    return {"single": parallel_env_ceiling(single_id, 1, rt.actors, seconds),
            "vector": parallel_env_ceiling(env.id, rt.envs_per_actor, rt.actors, seconds)}


# ----- the training rate --------------------------------------------------------------------------
def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def training_rate(records: list[dict], counter: str = "time/env_frames") -> float:
    """Per-second rate of `counter` (default: accepted env frames) over the run's training window.

    The window runs from the first periodic record with learned frames, so start-up is left out, to the
    last periodic record: the very last record is the run's summary, written after the closing checkpoint
    and the actors' shutdown.
    """
    periodic = records[:-1]
    started = [r for r in periodic if r["time/env_frames"] > 0]
    if len(started) < 2:
        raise ValueError(f"only {len(started)} metric record(s) after the first learned frame; the rate needs "
                         "two: run longer (--seconds) or log more often (--set log.interval_s=...)")
    first, last = started[0], started[-1]
    return (last[counter] - first[counter]) / (last["time/wall_s"] - first["time/wall_s"])


@dataclass(frozen=True)
class TrainingFigures:
    """One training run's figures; rates are over the measured window (see `training_rate`)."""

    env_steps_per_s: float
    updates_per_s: float
    env_frames: int
    frames_dropped: int
    policy_lag_mean: float
    return_mean: float | None


def measure_training(preset: str, overrides: list[str], seconds: float, seed: int) -> TrainingFigures:
    """Train `preset` for `seconds` in a throw-away run directory and read its figures back."""
    with tempfile.TemporaryDirectory(prefix="menger-bench-") as run_dir:
        result = train(preset, overrides=benchmark_overrides(seconds, seed) + list(overrides), run_dir=run_dir)
        records = read_metrics(run_dir)
    final = result.final_metrics
    periodic = records[:-1]
    return TrainingFigures(
        env_steps_per_s=training_rate(records),
        updates_per_s=training_rate(records, "learner/updates"),
        env_frames=int(final["time/env_frames"]),
        frames_dropped=int(final["transport/frames_dropped"]),
        policy_lag_mean=statistics.fmean(r["learner/policy_lag_mean"] for r in periodic) if periodic else 0.0,
        return_mean=final.get("episode/return_mean"),
    )


# ----- one row ----------------------------------------------------------------------------------
def bench_case(case: Case, overrides: list[str], seconds: float, seeds: int, ceiling_seconds: float) -> dict:
    """Ceiling and training rate `seeds` times; their medians, the median ratio, and every run's figures.

    Each run's ratio divides its training rate by the ceiling measured just before it, so that on cores
    shared with other work both sides see about the same load; the median of those ratios is steadier
    than the ratio of the medians.
    """
    overrides = list(case.overrides) + list(overrides)
    config = load_experiment(case.preset, benchmark_overrides(seconds, 0) + overrides)
    runs = []
    for seed in range(seeds):
        limits = ceilings(config, ceiling_seconds)
        figures = measure_training(case.preset, overrides, seconds, seed)
        runs.append({"seed": seed, "ceilings": limits, "training": figures.__dict__,
                     "ratio": figures.env_steps_per_s / limits["vector"], "load_average_1min": os.getloadavg()[0]})
    median_ceilings = {name: statistics.median(run["ceilings"][name] for run in runs) for name in runs[0]["ceilings"]}
    median_training = statistics.median(run["training"]["env_steps_per_s"] for run in runs)
    median_updates = statistics.median(run["training"]["updates_per_s"] for run in runs)
    rt = config.runtime
    return {
        "env": case.label, "preset": case.preset, "overrides": overrides, "seconds": seconds,
        "launcher": rt.launcher, "updates_per_s": median_updates,
        "actors": rt.actors, "envs_per_actor": rt.envs_per_actor, "unroll_length": rt.unroll_length,
        "batch_unrolls": rt.coordination.batch_unrolls or rt.actors, "ceiling_processes": rt.actors,
        "ceilings": median_ceilings, "training_env_steps_per_s": median_training,
        "ratio": statistics.median(run["ratio"] for run in runs), "runs": runs,
    }


def format_table(rows: list[dict]) -> str:
    header = (f"{'env':12s} {'launcher':>9s} {'A x B, T, batch':>18s} {'single-env ceil':>16s} {'vector ceil':>13s} "
              f"{'training':>12s} {'train/ceil':>10s} {'upd/s':>7s} {'lag':>5s} {'dropped':>8s} {'return':>7s}")
    lines = [header, "-" * len(header)]
    for row in rows:
        last = row["runs"][-1]["training"]
        single = row["ceilings"].get("single")
        shape = f"{row['actors']}x{row['envs_per_actor']}, {row['unroll_length']}, {row['batch_unrolls']}"
        ret = last["return_mean"]
        lines.append(
            f"{row['env']:12s} {row.get('launcher', 'processes'):>9s} {shape:>18s} "
            f"{'-' if single is None else f'{single:,.0f}':>16s} "
            f"{row['ceilings']['vector']:>13,.0f} {row['training_env_steps_per_s']:>12,.0f} {row['ratio']:>10.2f} "
            f"{row.get('updates_per_s', 0.0):>7.1f} "
            f"{last['policy_lag_mean']:>5.1f} {last['frames_dropped']:>8,d} {'-' if ret is None else f'{ret:.0f}':>7s}")
    seeds = len(rows[0]["runs"]) if rows else 0
    loads = ", ".join(f"{run['load_average_1min']:.1f}" for row in rows for run in row["runs"])
    lines.append(f"1-min load average at each run's end: {loads} (on {os.cpu_count()} cores)")
    lines.append(f"env steps/s; medians of {seeds} run(s); ceilings: raw envs, random actions, one process per actor "
                 f"(Pong: one AtariVectorEnv of all envs, {PONG_CEILING_THREADS} threads); lag, dropped, return: "
                 "last run")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=("cartpole", "pong", "pong-r2d2", "both", "all"), default="both")
    parser.add_argument("--launcher", choices=("processes", "ray"), default=None,
                        help="runtime.launcher of the training runs (default processes)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="training time per run (default: 20 for CartPole, 60 for Pong, 90 for pong-r2d2)")
    parser.add_argument("--ceiling-seconds", type=float, default=3.0, help="timing window of each ceiling")
    parser.add_argument("--seeds", type=int, default=1, help="runs per env; the table shows medians")
    parser.add_argument("--actors", type=int, default=None, help="runtime.actors")
    parser.add_argument("--envs-per-actor", type=int, default=None, help="runtime.envs_per_actor")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="any config override, passed to the run (repeatable)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the benchmark, print the table, write --json; returns the rows (one per env)."""
    args = parse_args(argv)
    overrides = list(args.overrides)
    if args.actors is not None:
        overrides.append(f"runtime.actors={args.actors}")
    if args.envs_per_actor is not None:
        overrides.append(f"runtime.envs_per_actor={args.envs_per_actor}")
    if args.launcher is not None:
        overrides.append(f"runtime.launcher={args.launcher}")
    names = {"both": ("cartpole", "pong"), "all": ("cartpole", "pong", "pong-r2d2")}.get(args.env, (args.env,))
    rows = []
    for name in names:
        case = CASES[name]
        rows.append(bench_case(case, overrides, args.seconds or case.seconds, args.seeds, args.ceiling_seconds))
        print(f"{case.label}: done", file=sys.stderr, flush=True)
    print(format_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
