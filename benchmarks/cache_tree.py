"""Menger's parameter caches on Ray at 8, 64 and 256 emulated hosts: flat, one cache per host, and a tree of cells.

The caches are the shipped ones (`menger.params.ray`: `ParameterCache` in `CacheProcess` async Ray actors,
`ParameterCaches` building the tree of `cell_groups`, rerouting around a dead cell); what is emulated is the
cluster. Each emulated host is a cache with `--actors-per-host` actors that start an unroll every `--unroll-s`
seconds (random phase) with the learner's newest offer, and read their host's cache as a Ray actor does
(`CachedParameters.offer`). Several hosts' caches (and several cells) share one Ray actor process (num_cpus=0),
as virtual actors share a host process in `menger.launch.emulated`: 256 processes importing Ray do not fit this
machine. Every fetch is a real `ray.get` of another process's object and every announcement a real Ray call,
so the counts are those of a cluster; on one machine no byte crosses a network, so times are of Ray's control
path and copies, not of a network. The learner (the driver) publishes a new `--param-mb` MB version every
`--publish-s` seconds, and with each publish sends the offer to every host process (it rides on the grant in a
run, so it is not counted).

Layouts:
  flat       no caches: every actor fetches each new version from the learner's object itself
  per-host   one lazy cache per host (`runtime.ray.cache_fanout=0`, the default): the learner announces each
             version to every host; a host fetches it from the learner when its first actor reads it
  tree       `runtime.ray.cache_fanout=F`: cells of at most F caches between, every version pushed down

Per layout and host count, over the window:
  sends/version   objects the learner's store served per version (fetches from the learner)
  MB/version      those in MB (the learner's egress)
  msgs/version    announcement calls the learner made per version
  reach p50/p99   seconds from a publish until a host has the version (over hosts and versions)
  all max         seconds from a publish until every host has it (the slowest version)
  lag p50/p99     versions between the newest published and the one an actor starts an unroll with
  read p99/max    seconds an actor's read of its host's cache took (a tree's node cache waits for a version on
                  its way down at most PUSH_WAIT_S, then for the cache above at most PULL_WAIT_S)

A tree's read whose version has not come down in PUSH_WAIT_S pulls it from the cache above (which hands over its
copy, pulling it first if it lacks it), so a slow tree does not send reads to the learner; only a cache above that
is dead or slower than PULL_WAIT_S does (`fallbacks`).

Chaos (`--chaos-hosts`): the tree at that many hosts, one cell's process killed halfway through the window;
its caches are rerouted to the tier above at the driver's next look (every second, as a trainer's log
interval), and until then their actors' reads wait at most PUSH_WAIT_S, find the cell dead and take the
learner's offer.

    python benchmarks/cache_tree.py [--hosts 8 64 256] [--fanout 4] [--seconds 12] [--chaos-hosts 64]
                                    [--chaos-actors-per-host N] [--plot PNG]
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import ray

from menger.params.caches import PULL_WAIT_S, PUSH_WAIT_S, CacheProcess, ParameterCaches, _get, cell_groups

HOST_PROCESSES = 8   # processes holding the emulated hosts' caches and their actors
CELL_PROCESSES = 16  # processes holding the cells


class EmulatedHosts(CacheProcess):
    """Several emulated hosts in one Ray actor: each host's cache, and its actors reading it before each unroll."""

    def __init__(self, keys: list[str], push: bool = False):
        super().__init__(keys, push)
        self.offered: tuple[int, list | None] = (-1, None)
        self.starts: list[tuple[float, int, float]] = []  # (unroll start, version it starts with, read seconds)
        self.flat_arrivals: dict[tuple[str, int], float] = {}  # flat: (host, version) -> its first actor had it
        self.flat_fetches: list[tuple[int, int]] = []  # flat: (version, bytes) of each fetch from the learner

    async def offer(self, version: int, source: list) -> None:
        if version > self.offered[0]:
            self.offered = (version, source)

    async def run(self, actors_per_host: int, unroll_s: float, until: float, flat: bool, seed: int) -> dict:
        rng = random.Random(seed)
        await asyncio.gather(*[self._actor(key, rng.random() * unroll_s, unroll_s, until, flat)
                               for key in self.caches for _ in range(actors_per_host)])
        return {"starts": self.starts, "flat_arrivals": self.flat_arrivals, "flat_fetches": self.flat_fetches}

    async def _actor(self, key: str, phase: float, unroll_s: float, until: float, flat: bool) -> None:
        await asyncio.sleep(phase)
        have = -1
        while time.time() < until:
            began = time.time()
            version, source = self.offered
            if version >= 0:
                if flat:  # every actor asks the learner
                    if version > have:
                        array = await _get(source[0])
                        self.flat_fetches.append((version, int(array.nbytes)))
                        self.flat_arrivals.setdefault((key, version), time.time())
                    have = version
                else:
                    have, _ = await self.caches[key].read(version, source)
                self.starts.append((began, have, time.time() - began))
            await asyncio.sleep(max(0.0, unroll_s - (time.time() - began)))


class EmulatedCaches(ParameterCaches):
    """`ParameterCaches` whose caches live in a few shared processes: hosts in `HOST_PROCESSES`, cells in
    `CELL_PROCESSES` (round robin), each cache under its own name."""

    def __init__(self, fanout: int, hosts: list[str]):
        super().__init__(fanout)
        remote = ray.remote(EmulatedHosts).options(num_cpus=0)
        groups = [hosts[i::HOST_PROCESSES] for i in range(min(HOST_PROCESSES, len(hosts)))]
        self.host_processes = [remote.remote(group, fanout > 0) for group in groups]
        self.host_of = {host: self.host_processes[i % len(groups)] for i, host in enumerate(hosts)}
        names = [f"cell-{tier}-{index}" for tier, tiers in enumerate(cell_groups(len(hosts), fanout))
                 for index in range(len(tiers))]
        groups = [names[i::CELL_PROCESSES] for i in range(min(CELL_PROCESSES, len(names)))]
        self.cell_processes = [ray.remote(CacheProcess).options(num_cpus=0).remote(group, True) for group in groups]
        self.cell_of = {name: self.cell_processes[i % len(groups)] for i, name in enumerate(names)}

    def _key(self, name: str) -> str:
        return name

    def _make(self, node_id: str, key: str, soft: bool = False):
        return self.cell_of[key] if key.startswith("cell-") else self.host_of[key]


@dataclass
class Layout:
    layout: str
    hosts: int
    actors: int
    cells: int
    versions: int
    sends_per_version: float
    mb_per_version: float
    msgs_per_version: float
    reach_p50_s: float
    reach_p99_s: float
    reach_all_max_s: float
    lag_p50: float
    lag_p99: float
    lag_max: int
    read_p99_s: float
    read_max_s: float
    late: int
    pulls: int
    fallbacks: int
    rerouted: int
    load_1min: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def measure(layout: str, hosts: int, fanout: int, args, kill_cell: bool = False,
            actors_per_host: int | None = None) -> Layout:
    per_host = actors_per_host or args.actors_per_host
    names = [f"host-{i}" for i in range(hosts)]
    tree_fanout = fanout if layout == "tree" else 0
    caches = EmulatedCaches(tree_fanout, names)
    if layout != "flat":
        caches.place(set(names))
    processes = list(caches.host_processes)
    ray.get([p.stats.remote() for p in processes + caches.cell_processes], timeout=120)  # every process is up
    size = int(args.param_mb * 1e6 / 4)
    publishes: list[float] = []

    def publish() -> list:
        version = len(publishes)
        source = [ray.put(np.full(size, version, np.float32))]
        publishes.append(time.time())
        if layout != "flat":
            caches.announce(version, source)
        for process in processes:
            process.offer.remote(version, source)
        return source

    # warm-up, not counted: version 0 in every host's cache before the window (a process's first fetch is slow)
    source = publish()
    deadline = time.time() + 120
    while layout == "tree" and time.time() < deadline and min(
            s["version"] for p in processes for s in ray.get(p.stats.remote(), timeout=30).values()) < 0:
        time.sleep(0.05)  # pushed down the tree (a read now would give up waiting on a cold process)
    if layout != "flat":
        ray.get([caches.host_of[name].read.remote(name, 0, source) for name in names], timeout=120)
    before = {key: s for p in processes + caches.cell_processes for key, s in ray.get(p.stats.remote()).items()}
    msgs, first = 0, len(publishes)
    began = time.time() + 1.0
    until = began + args.seconds
    runs = [p.run.remote(per_host, args.unroll_s, until, layout == "flat", seed)
            for seed, p in enumerate(processes)]
    killed_at, looked = None, time.time()
    while time.time() < until:
        publish()
        msgs += len(caches.roots) if layout != "flat" else 0
        if kill_cell and caches.cell_processes and killed_at is None and time.time() > began + args.seconds / 2:
            victim = caches.cell_processes[0]
            ray.kill(victim, no_restart=True)
            killed_at = time.time()
        if layout == "tree" and time.time() - looked >= 1.0:  # the trainer's look every log interval
            caches.stats(wait_s=0.0)
            looked = time.time()
        time.sleep(max(0.0, publishes[-1] + args.publish_s - time.time()))
    results = ray.get(runs, timeout=120)
    stats: dict[str, dict] = {}
    for process in processes + caches.cell_processes:
        try:
            stats.update(ray.get(process.stats.remote(), timeout=30))
            for key, arrived in ray.get(process.arrivals.remote(), timeout=30).items():
                stats[key]["arrivals"] = arrived
        except ray.exceptions.RayError:
            pass  # the killed cell's process
    for _ in range(2):  # answers to the asks in flight, then to asks made now: a cell that died is found
        caches.stats(wait_s=2.0)
    rerouted = caches.rerouted
    caches._kill(processes + caches.cell_processes)

    starts = [start for result in results for start in result["starts"] if start[0] >= began]
    by_host: dict[str, list[tuple[int, float]]] = {}
    published_by = np.array(publishes)
    lags = [int(np.searchsorted(published_by, t, side="right")) - 1 - version for t, version, _ in starts]
    reads = [seconds for _, _, seconds in starts]
    window = [v for v, t in enumerate(publishes) if began <= t <= until - 2 * args.unroll_s]
    if layout == "flat":
        arrivals: dict[tuple[str, int], float] = {}
        for result in results:
            arrivals.update(result["flat_arrivals"])
        fetched = [(v, size) for r in results for v, size in r["flat_fetches"] if v >= first]  # not the warm-up's
        learner_fetches, learner_bytes = len(fetched), sum(size for _, size in fetched)
    else:
        arrivals = {(name, v): t for name in names for v, t in stats[name]["arrivals"]}
        learner_fetches = sum(s["fetches_from_learner"] - before[key]["fetches_from_learner"]
                              for key, s in stats.items())
        learner_bytes = sum(s["bytes_from_learner"] - before[key]["bytes_from_learner"] for key, s in stats.items())
    for (name, v), t in arrivals.items():
        by_host.setdefault(name, []).append((v, t))
    reach, every = [], []  # per host and version; per version, its last host
    for v in window:  # a host that skipped v (a newer one came first) had it when it had any version >= v
        times = [min((t for u, t in by_host.get(name, []) if u >= v), default=None) for name in names]
        if all(t is not None for t in times):
            reach += [t - publishes[v] for t in times]
            every.append(max(times) - publishes[v])
    versions = len(publishes) - first  # published in the window
    return Layout(layout, hosts, hosts * per_host, len(caches.cell_of) if layout == "tree" else 0,
                  versions, learner_fetches / versions, learner_bytes / versions / 1e6, msgs / versions,
                  percentile(reach, 50), percentile(reach, 99), max(every, default=float("nan")),
                  percentile(lags, 50), percentile(lags, 99),
                  max(lags, default=0), percentile(reads, 99), max(reads, default=0.0),
                  sum(s["late"] - before[key]["late"] for key, s in stats.items()),
                  sum(s["pulls"] - before[key]["pulls"] for key, s in stats.items()),
                  sum(s["fallbacks"] - before[key]["fallbacks"] for key, s in stats.items()),
                  rerouted, os.getloadavg()[0])


def format_layouts(points: list[Layout]) -> str:
    lines = [f"{'layout':>9} {'hosts':>5} {'actors':>6} {'cells':>5} {'sends/v':>8} {'MB/v':>7} {'msgs/v':>6} "
             f"{'reach p50':>9} {'reach p99':>9} {'all max':>7} {'lag p50':>7} {'lag p99':>7} {'lag max':>7} "
             f"{'read p99':>8} {'read max':>8} {'load':>5}"]
    for p in points:
        lines.append(f"{p.layout:>9} {p.hosts:>5} {p.actors:>6} {p.cells:>5} {p.sends_per_version:>8.1f} "
                     f"{p.mb_per_version:>7.1f} {p.msgs_per_version:>6.1f} {p.reach_p50_s:>9.3f} "
                     f"{p.reach_p99_s:>9.3f} {p.reach_all_max_s:>7.3f} {p.lag_p50:>7.0f} {p.lag_p99:>7.0f} "
                     f"{p.lag_max:>7d} {p.read_p99_s:>8.3f} {p.read_max_s:>8.3f} {p.load_1min:>5.1f}")
    return "\n".join(lines)


def plot(points: list[Layout], path) -> None:
    """The learner's egress per version against hosts, one line per layout (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for layout, marker in (("flat", "o-"), ("per-host", "s--"), ("tree", "^-")):
        mine = [p for p in points if p.layout == layout]
        if mine:
            left.plot([p.hosts for p in mine], [p.mb_per_version for p in mine], marker, label=layout)
            right.plot([p.hosts for p in mine], [p.reach_p99_s for p in mine], marker, label=layout)
    left.set(xscale="log", yscale="log", xlabel="emulated hosts", ylabel="learner egress per version (MB)")
    right.set(xscale="log", xlabel="emulated hosts", ylabel="a version reaches a host, p99 (s)", ylim=(0, None))
    left.legend()
    fig.suptitle("Parameter caches on Ray: flat, one per host, a tree of fan-out 4 (1 MB versions)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def tiers(hosts: int, fanout: int) -> int:
    """Cache tiers between the learner and an actor: the host's and the cells above it."""
    return 1 + len(cell_groups(hosts, fanout))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--layouts", nargs="+", default=["flat", "per-host", "tree"],
                        choices=["flat", "per-host", "tree"])
    parser.add_argument("--fanout", type=int, default=4, help="the tree's fan-out (runtime.ray.cache_fanout)")
    parser.add_argument("--actors-per-host", type=int, default=4)
    parser.add_argument("--unroll-s", type=float, default=1.0, help="seconds between an actor's unroll starts")
    parser.add_argument("--publish-s", type=float, default=2.0, help="seconds between the learner's versions")
    parser.add_argument("--param-mb", type=float, default=1.0, help="MB of one version's parameters")
    parser.add_argument("--seconds", type=float, default=12.0, help="the measured window of each point")
    parser.add_argument("--chaos-hosts", type=int, default=64, help="0: no chaos run")
    parser.add_argument("--chaos-actors-per-host", type=int, default=None,
                        help="actors per host of the chaos run (default: --actors-per-host)")
    parser.add_argument("--plot", default=None, help="write the egress and reach plot here (PNG)")
    return parser.parse_args(argv)


def run(args) -> tuple[list[Layout], Layout | None]:
    started = not ray.is_initialized()
    if started:  # a private instance ("local"), never a cluster that happens to run on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _system_config={"worker_niceness": 0})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this script
    logging.getLogger("menger.params.ray").setLevel(logging.ERROR)  # the chaos run's reroute is counted below
    try:
        points = []
        for hosts in args.hosts:
            for layout in args.layouts:
                points.append(measure(layout, hosts, args.fanout, args))
                print(f"  {layout} at {hosts} hosts: {points[-1].sends_per_version:.1f} sends/version, "
                      f"load {points[-1].load_1min:.1f}", flush=True)
        chaos = measure("tree", args.chaos_hosts, args.fanout, args, kill_cell=True,
                        actors_per_host=args.chaos_actors_per_host) if args.chaos_hosts else None
    finally:
        if started:
            ray.shutdown()
    return points, chaos


def report(points: list[Layout], chaos: Layout | None, args) -> str:
    lines = [f"parameter caches: {args.actors_per_host} actors per host, an unroll each {args.unroll_s:g} s, a "
             f"{args.param_mb:g} MB version each {args.publish_s:g} s, tree fan-out {args.fanout}; window "
             f"{args.seconds:g} s", format_layouts(points)]
    for p in points:
        if p.layout == "tree":
            bound = tiers(p.hosts, args.fanout) + 1
            sends = "met" if p.sends_per_version <= args.fanout else "MISSED"
            lines.append(f"tree at {p.hosts} hosts: {tiers(p.hosts, args.fanout)} tiers, lag p99 {p.lag_p99:.0f} "
                         f"(target <= tiers + 1 = {bound}: {'met' if p.lag_p99 <= bound else 'MISSED'}); learner "
                         f"sends {p.sends_per_version:.1f} a version (target <= fan-out {args.fanout}: {sends}); "
                         f"{p.late} reads waited out PUSH_WAIT_S = {PUSH_WAIT_S:g} s for a push, {p.pulls} pulls "
                         f"from the cache above, {p.fallbacks} fell back to the learner's offer")
    if chaos is not None:
        lines.append(f"chaos: tree at {chaos.hosts} hosts ({chaos.actors} actors), one cell process killed mid-window: "
                     f"{chaos.rerouted} caches rerouted to the tier above, {chaos.late} reads waited out "
                     f"PUSH_WAIT_S = {PUSH_WAIT_S:g} s, {chaos.pulls} pulls from the cache above, "
                     f"{chaos.fallbacks} fell back to the learner's offer; lag p99 {chaos.lag_p99:.0f}, max "
                     f"{chaos.lag_max}; longest read {chaos.read_max_s:.2f} s (bound: PUSH_WAIT_S + PULL_WAIT_S = "
                     f"{PUSH_WAIT_S + PULL_WAIT_S:g} s plus a fetch)")
    lines.append(f"median 1-min load: {statistics.median(p.load_1min for p in points):.1f} on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    points, chaos = run(args)
    print(report(points, chaos, args))
    if args.plot:
        plot(points, args.plot)
    return points, chaos


if __name__ == "__main__":
    main()
