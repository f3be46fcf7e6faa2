"""Scaling: env-steps/s against 1, 2, 4, 8 actors, per launcher, with local and central inference, in one run;
and the parameter bytes sent per version when 16 actors sit on 2 (simulated) nodes.

Each point is a short `cartpole-impala` run (`stop.wall_clock_s`) through `menger.api.train`. The rate is env
frames produced by the actors per second between the run's first and last metric records that saw frames, so
start-up (forking actors, building envs) is left out. Launchers: processes, and ray when `menger.launch.ray`
exists and `ray` imports. Central inference runs where the launcher supports it (threads, processes).

    python benchmarks/scaling.py [--seconds S] [--actors 1 2 4 8] [--out DIR] [--set KEY=VALUE ...]

Writes DIR/scaling.png and DIR/scaling.csv and prints the table.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym

from menger.api import train
from menger.experiment import load_experiment
from menger.models import build_policy
from menger.params import SharedParameters

PRESET = "cartpole-impala"
CENTRAL_LAUNCHERS = ("threads", "processes")


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


def steady_rate(records: list[dict]) -> float:
    """Frames produced per second between the first and the last record that saw frames.

    A run too short for two such records (a slow start) falls back to its whole-run rate, start-up included.
    """
    seen = [r for r in records if r.get("time/env_frames_produced", 0) > 0]
    if not seen:
        raise ValueError("no metric record saw a frame: run longer (--seconds)")
    if len(seen) < 2:
        return seen[-1]["time/env_frames_produced"] / seen[-1]["time/wall_s"]
    first, last = seen[0], seen[-1]
    return (last["time/env_frames_produced"] - first["time/env_frames_produced"]) / (
        last["time/wall_s"] - first["time/wall_s"])


def measure(launcher: str, inference: str, actors: int, seconds: float, root: Path, extra: list[str]) -> Point:
    run_dir = root / f"{launcher}-{inference}-{actors}"
    train(PRESET, ["log.tensorboard=false", "log.progress=false", "log.interval_s=0.5", "checkpoint.interval_s=0",
                   f"runtime.launcher={launcher}", f"runtime.actors={actors}", f"runtime.inference={inference}",
                   f"stop.wall_clock_s={seconds}", "stop.target_return=null", "stop.env_frames=1000000000", *extra],
          run_dir=str(run_dir))
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return Point(launcher, inference, actors, steady_rate(records))


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
    ax.set_ylabel("env-steps/s")
    ax.set_title(f"{PRESET}: throughput against actors")
    ax.legend(title="launcher / inference")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[Point]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="wall clock of each run")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--out", default="benchmarks/results", help="where scaling.png and scaling.csv go")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    points = []
    with tempfile.TemporaryDirectory(prefix="menger-scaling-") as root:
        for launcher in available_launchers():
            for inference in ("local", "central"):
                if inference == "central" and launcher not in CENTRAL_LAUNCHERS:
                    print(f"{launcher} / central: not measured (central inference needs actors on this host)")
                    continue
                for actors in args.actors:
                    try:
                        p = measure(launcher, inference, actors, args.seconds, Path(root), args.overrides)
                    except ValueError as exc:  # a launcher that starts slower than the run is long
                        print(f"{launcher:10s} {inference:8s} {actors:3d} actors  not measured: {exc}", flush=True)
                        continue
                    points.append(p)
                    print(f"{p.launcher:10s} {p.inference:8s} {p.actors:3d} actors  {p.env_steps_per_s:10.0f} "
                          "env-steps/s", flush=True)
    with open(out / "scaling.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["launcher", "inference", "actors", "env_steps_per_s"])
        writer.writerows([p.launcher, p.inference, p.actors, f"{p.env_steps_per_s:.1f}"] for p in points)
    plot(points, out / "scaling.png")
    print(f"\n{'launcher':10s} {'inference':9s} " + " ".join(f"{a:>9d}" for a in args.actors) + "   (env-steps/s by actors)")
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
