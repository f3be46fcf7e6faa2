"""Scaling: env-steps/s against 1, 2, 4, 8 actors, per launcher, with local and central inference, in one run;
and the parameter bytes sent per version when 16 actors sit on 2 (simulated) nodes.

Each point is a short `cartpole-impala` run through `menger.api.train`. Its rate is env frames *learned from*
per second (`throughput.training_rate`), over a window that opens `--settle-s` after the first learned frame and
closes at the last periodic record, so start-up (forking actors, starting Ray actors, building envs) is left out.
Each run lasts its launcher's start-up allowance plus `--seconds`. Launchers: processes, and ray when `ray`
imports. Ray is started once for the whole benchmark (a private instance on loopback, one logical CPU per actor
of the largest point) and warmed up by one unmeasured run, so each ray point pays only for its own actors.
Central inference is measured on both launchers. Every run uses one learner thread, so that the launchers
compete for the same cores.

    python benchmarks/scaling.py [--seconds S] [--actors 1 2 4 8] [--launchers processes ray] [--out DIR]
                                 [--set KEY=VALUE ...]

Writes DIR/scaling.png and DIR/scaling.csv and prints the table.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Any Ray instance this benchmark starts binds to 127.0.0.1 (read once, when Ray is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import gymnasium as gym  # noqa: E402
from throughput import training_rate  # noqa: E402  (benchmarks are scripts; this one sits next to it)

from menger.api import train  # noqa: E402
from menger.experiment import load_experiment  # noqa: E402
from menger.models import build_policy  # noqa: E402
from menger.params import SharedParameters  # noqa: E402

PRESET = "cartpole-impala"
STARTUP_S = {"processes": 3.0, "ray": 15.0}  # default allowance before the first learned frame, per launcher
SHARED = ["log.tensorboard=false", "log.progress=false", "log.interval_s=0.5", "checkpoint.interval_s=0",
          "runtime.learner.threads=1", "stop.target_return=null", "stop.env_frames=1000000000"]


@dataclass(frozen=True)
class Point:
    launcher: str
    inference: str
    actors: int
    env_steps_per_s: float


def available_launchers() -> list[str]:
    launchers = ["processes"]
    if importlib.util.find_spec("menger.launch.ray") and importlib.util.find_spec("ray"):
        launchers.append("ray")
    return launchers


def steady_rate(records: list[dict], settle_s: float) -> float:
    """Learned env frames per second from `settle_s` after the first learned frame to the last periodic record.

    The settling time lets every actor of the point come up (Ray starts them one process each, at its own pace)
    before the window opens; `training_rate` then leaves out the closing summary record.
    """
    started = [r for r in records[:-1] if r["time/env_frames"] > 0]
    if not started:
        raise ValueError("no frame was learned: give the launcher more start-up time (--startup-s)")
    opens = started[0]["time/wall_s"] + settle_s
    return training_rate([r for r in records[:-1] if r["time/wall_s"] >= opens] + records[-1:])


def run_records(launcher: str, inference: str, actors: int, wall_s: float, run_dir: Path,
                extra: list[str]) -> list[dict]:
    """Train for `wall_s` and read the run's metric records back."""
    train(PRESET, [*SHARED, f"runtime.launcher={launcher}", f"runtime.actors={actors}",
                   f"runtime.inference.mode={inference}", f"stop.wall_clock_s={wall_s}", *extra], run_dir=str(run_dir))
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def measure(launcher: str, inference: str, actors: int, seconds: float, startup_s: float, settle_s: float,
            root: Path, extra: list[str]) -> Point:
    records = run_records(launcher, inference, actors, startup_s + settle_s + seconds,
                          root / f"{launcher}-{inference}-{actors}", extra)
    return Point(launcher, inference, actors, steady_rate(records, settle_s))


@contextlib.contextmanager
def ray_session(logical_cpus: int):
    """One private Ray instance for every ray point: no dashboard, loopback only, `logical_cpus` actor places.

    The trainer's launcher finds Ray initialised and leaves it running between points.
    """
    import ray

    ray.init(address="local", num_cpus=logical_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def parameter_fanout(actors: int = 16, nodes: int = 2, versions: int = 10) -> dict[str, float]:
    """Bytes the learner sends per version with one parameter cache per node, against one copy per actor.

    Each node holds one `SharedParameters` (Menger's per-host cache); the learner publishes into every node's
    cache (what crosses the network), and the node's actors copy from it only when the version moved.
    """
    config = load_experiment(PRESET)
    policy = build_policy(gym.spaces.Box(-5.0, 5.0, (4,)), gym.spaces.Discrete(2), config.model)
    caches = [SharedParameters(policy, shared=False) for _ in range(nodes)]
    replicas = [build_policy(gym.spaces.Box(-5.0, 5.0, (4,)), gym.spaces.Discrete(2), config.model)
                for _ in range(actors)]
    sent, seen = 0, [-1] * actors
    for version in range(1, versions + 1):
        for cache in caches:
            cache.publish(policy, version)
            sent += cache.nbytes
        for actor, replica in enumerate(replicas):
            cache = caches[actor % nodes]
            if cache.version() != seen[actor]:
                seen[actor] = cache.read_into(replica)
    reads = sum(cache.reads for cache in caches)
    return {"actors": actors, "nodes": nodes, "param_bytes": caches[0].nbytes,
            "bytes_sent_per_version": sent / versions,
            "bytes_sent_per_version_without_cache": caches[0].nbytes * actors,
            "local_reads_per_version": reads / versions}


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key in sorted({(p.launcher, p.inference) for p in points}):
        series = sorted((p for p in points if (p.launcher, p.inference) == key), key=lambda p: p.actors)
        ax.plot([p.actors for p in series], [p.env_steps_per_s for p in series], marker="o", label=" / ".join(key))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("actors")
    ax.set_ylabel("learned env-steps/s")
    ax.set_title(f"{PRESET}: throughput against actors")
    ax.legend(title="launcher / inference")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def measure_launcher(launcher: str, args: argparse.Namespace, root: Path) -> list[Point]:
    """Every (inference, actors) point of one launcher; a point that learns nothing in time is reported, not fatal."""
    startup_s = args.startup_s if args.startup_s is not None else STARTUP_S[launcher]
    points = []
    for inference in ("local", "central"):
        for actors in args.actors:
            try:
                p = measure(launcher, inference, actors, args.seconds, startup_s, args.settle_s, root,
                            args.overrides)
            except ValueError as exc:
                print(f"{launcher:10s} {inference:8s} {actors:3d} actors  not measured: {exc}", flush=True)
                continue
            points.append(p)
            print(f"{p.launcher:10s} {p.inference:8s} {p.actors:3d} actors  {p.env_steps_per_s:10.0f} "
                  "env-steps/s", flush=True)
    return points


def main(argv: list[str] | None = None) -> list[Point]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured window of each run")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--launchers", nargs="+", default=None, help="default: processes, and ray if installed")
    parser.add_argument("--startup-s", type=float, default=None,
                        help=f"start-up allowance of every run (default per launcher: {STARTUP_S})")
    parser.add_argument("--settle-s", type=float, default=1.0, help="wait after the first learned frame")
    parser.add_argument("--out", default="benchmarks/results", help="where scaling.png and scaling.csv go")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    points = []
    with tempfile.TemporaryDirectory(prefix="menger-scaling-") as root:
        for launcher in args.launchers or available_launchers():
            if launcher != "ray":
                points += measure_launcher(launcher, args, Path(root))
                continue
            with ray_session(logical_cpus=max(args.actors)):
                run_records("ray", "local", 1, STARTUP_S["ray"], Path(root) / "ray-warm-up", args.overrides)
                points += measure_launcher("ray", args, Path(root))
    with open(out / "scaling.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["launcher", "inference", "actors", "env_steps_per_s"])
        writer.writerows([p.launcher, p.inference, p.actors, f"{p.env_steps_per_s:.1f}"] for p in points)
    plot(points, out / "scaling.png")
    print(f"\n{'launcher':10s} {'inference':9s} " + " ".join(f"{a:>9d}" for a in args.actors)
          + "   (learned env-steps/s by actors)")
    for key in sorted({(p.launcher, p.inference) for p in points}):
        rates = {p.actors: p.env_steps_per_s for p in points if (p.launcher, p.inference) == key}
        print(f"{key[0]:10s} {key[1]:9s} " + " ".join(f"{rates.get(a, float('nan')):9.0f}" for a in args.actors))
    fanout = parameter_fanout()
    print(f"\nparameters: {fanout['param_bytes']} bytes; {fanout['actors']} actors on {fanout['nodes']} nodes: "
          f"{fanout['bytes_sent_per_version']:.0f} bytes sent per version with one cache per node "
          f"(vs {fanout['bytes_sent_per_version_without_cache']} with one copy per actor); "
          f"{fanout['local_reads_per_version']:.0f} local copies per version")
    print(f"wrote {out / 'scaling.png'} and {out / 'scaling.csv'}")
    return points


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
