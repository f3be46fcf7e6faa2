"""``menger schedule``: measure cluster schedulers, or sweep the load to draw DeepRM's main figure.

Evaluation seeds start at 1_000_000 (``HELD_OUT_SEED``). Training runs seed their environments with
small integers and draw later episodes from those streams, so these workloads are never trained on.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import yaml

from menger.apps.cluster.config import ClusterConfig
from menger.apps.cluster.heuristics import HEURISTICS, Scheduler, evaluate
from menger.apps.cluster.observation import ImageEncoder, observe
from menger.apps.cluster.simulator import ClusterState
from menger.extras import require

HELD_OUT_SEED = 1_000_000
DEFAULT_POLICIES = ("sjf", "packer", "random")
METRICS = ("mean_slowdown", "mean_completion_time", "utilisation")
SWEEP_PURPOSE = "`menger schedule --sweep-load` (it draws slowdown_vs_load.png)"


def schedule_main(argv: list[str]) -> int:
    """Entry point of ``menger schedule``; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        env_kwargs = _env_kwargs(args)
        if args.sweep_load:
            _sweep(args, env_kwargs, _parse_range(args.sweep_load))
        else:
            _report(args, env_kwargs)
    except (ValueError, FileNotFoundError) as error:
        print(f"menger schedule: error: {error}", file=sys.stderr)
        return 2
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="menger schedule",
        description="Evaluate cluster schedulers on ClusterScheduling-v0 (held-out seeds from "
                    f"{HELD_OUT_SEED}), or sweep the load and plot mean slowdown against it.")
    parser.add_argument("--policy", action="append", metavar="sjf|packer|random|RUN_DIR",
                        help="a heuristic or a training run directory; repeat for several "
                             f"(default: {', '.join(DEFAULT_POLICIES)})")
    parser.add_argument("--load", type=float, help="target offered load (default: arrival rate 0.7)")
    parser.add_argument("--trace", metavar="FILE.csv", help="replay these jobs (arrival,duration,demands...)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes (seeds) per measurement")
    parser.add_argument("--seed", type=int, default=HELD_OUT_SEED, help="first evaluation seed")
    parser.add_argument("--sweep-load", metavar="START:STOP:STEP",
                        help="evaluate at every load in this inclusive range, e.g. 0.1:1.9:0.2")
    parser.add_argument("--out", default="./schedule-out", help="where the sweep's PNG and CSV go")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="any other ClusterScheduling-v0 setting, e.g. --env num_slots=10")
    return parser


def _env_kwargs(args: argparse.Namespace) -> dict:
    if args.episodes < 1:
        raise ValueError(f"--episodes must be at least 1, got {args.episodes}.")
    if args.trace and (args.load is not None or args.sweep_load):
        raise ValueError("--trace replays fixed jobs; it cannot be combined with --load or --sweep-load.")
    kwargs = dict(_parse_setting(text) for text in args.env)
    if args.load is not None:
        kwargs["load"] = args.load
    if args.trace:
        kwargs["trace"] = args.trace
    ClusterConfig.from_kwargs(kwargs)  # fail on a bad setting before any episode runs
    return kwargs


def _parse_setting(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--env expects KEY=VALUE, got {text!r}.")
    return key.strip(), yaml.safe_load(value)


def _parse_range(text: str) -> list[float]:
    try:
        start, stop, step = (float(part) for part in text.split(":"))
    except ValueError:
        raise ValueError(f"--sweep-load expects START:STOP:STEP such as 0.1:1.9:0.2, got {text!r}.") from None
    if step <= 0 or start <= 0 or stop < start:
        raise ValueError(f"--sweep-load {text!r} needs 0 < START <= STOP and STEP > 0.")
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    return [round(start + i * step, 10) for i in range(count)]


def _seeds(args: argparse.Namespace) -> range:
    return range(args.seed, args.seed + args.episodes)


def _report(args: argparse.Namespace, env_kwargs: dict) -> None:
    names = args.policy or DEFAULT_POLICIES
    settings = comparison_settings(names, env_kwargs)
    schedulers = {name: load_scheduler(name, settings) for name in names}
    print(f"{'policy':<24} {'slowdown':>10} {'± s.e.':>8} {'completion':>11} {'utilisation':>12}")
    for name, scheduler in schedulers.items():
        result = evaluate(scheduler, settings, _seeds(args))
        print(f"{name:<24} {result['mean_slowdown']:>10.3f} {result['slowdown_stderr']:>8.3f} "
              f"{result['mean_completion_time']:>11.3f} "
              f"{result['utilisation']:>12.3f}")


def _sweep(args: argparse.Namespace, env_kwargs: dict, loads: list[float]) -> None:
    require("matplotlib", "plot", SWEEP_PURPOSE)  # before the sweep runs, not after
    names = args.policy or DEFAULT_POLICIES
    settings = comparison_settings(names, {**env_kwargs, "load": loads[0]})
    rows = []
    for name in names:
        for load in loads:
            at_load = {**settings, "load": load}
            result = evaluate(load_scheduler(name, at_load), at_load, _seeds(args))
            rows.append({"policy": name, "load": load, **{key: result[key] for key in METRICS}})
            print(f"{name:<24} load {load:<5g} slowdown {result['mean_slowdown']:8.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "slowdown_vs_load.csv")
    plot_slowdown(rows, out / "slowdown_vs_load.png")
    print(f"wrote {out / 'slowdown_vs_load.csv'} and {out / 'slowdown_vs_load.png'}")


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["policy", "load", *METRICS])
        writer.writeheader()
        writer.writerows(rows)


def plot_slowdown(rows: list[dict], path: Path) -> None:
    """Mean slowdown against load, one line per scheduler (DeepRM's Figure 4)."""
    matplotlib = require("matplotlib", "plot", SWEEP_PURPOSE)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(row["policy"] for row in rows):
        mine = [row for row in rows if row["policy"] == name]
        axes.plot([r["load"] for r in mine], [r["mean_slowdown"] for r in mine], marker="o", label=name)
    axes.set_xlabel("offered load")
    axes.set_ylabel("mean job slowdown")
    axes.set_title("ClusterScheduling-v0: slowdown against load")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def comparison_settings(names: list[str], env_kwargs: dict) -> dict:
    """The env settings every scheduler is compared on.

    With a trained run among ``names``, its training settings (its image size depends on them), with the
    command line's laid over; a load or trace given there replaces the run's arrivals.
    """
    for name in names:
        if name not in HEURISTICS and not Path(name).is_dir():
            raise ValueError(f"Unknown policy {name!r}: use {', '.join(HEURISTICS)} or a training run directory.")
    runs = [name for name in names if name not in HEURISTICS]
    if not runs:
        return env_kwargs
    from menger.api import load_run_config

    trained = dict(load_run_config(runs[0]).env.kwargs)
    if "load" in env_kwargs or "trace" in env_kwargs:
        trained = {k: v for k, v in trained.items() if k not in ("load", "load_range", "new_job_rate", "num_jobs")}
    return {**trained, **env_kwargs}


def load_scheduler(name: str, env_kwargs: dict) -> Scheduler:
    """A heuristic by name, or the policy of a training run directory evaluated on ``env_kwargs``."""
    if name in HEURISTICS:
        return HEURISTICS[name]()
    from menger.api import load_policy

    return ObservationScheduler(load_policy(name).act, ClusterConfig.from_kwargs(env_kwargs))


class ObservationScheduler:
    """Adapts a policy on observation batches (``act(batch, deterministic=True)``) to a scheduler on states."""

    def __init__(self, act, config: ClusterConfig):
        self._act = act
        self._encoder = ImageEncoder(config)

    def __call__(self, state: ClusterState) -> int:
        observation = observe(self._encoder, state)
        if isinstance(observation, dict):
            batch = {key: value[None] for key, value in observation.items()}
        else:
            batch = observation[None]
        return int(np.asarray(self._act(batch, deterministic=True)).reshape(-1)[0])
