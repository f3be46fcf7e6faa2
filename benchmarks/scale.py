"""Scale: the learner's loop against 16 to 4,096 emulated actors, and a killed host of 128 of them.

The learner's side runs as it ships (trainer, async coordinator, supervisor, `LocalTransport` with a pipe per
actor, heartbeats and shared parameters, an IMPALA learner stepping on CartPole-sized unrolls); only the actors are
emulated (`menger.launch.emulated`: host processes running virtual actors whose env is a clock). Every point
offers the learner the same load, `--offered` unrolls/s in all, more than it can take, so the figures are its
ceiling at that fleet size, and a batch is always `--batch` unrolls (the learner's work per update does not
change with N; only the control plane's does). `max_policy_lag` is lifted: with the load spread over N actors an
unroll takes N / offered seconds, and the lag budget would pace the learner to keep its lag (see docs/scaling.md).

Per fleet size N, over a window that opens `--settle-s` after every actor delivered its first unroll:
  learned/s        unrolls the learner took into batches and stepped on, per second of wall time
  accepted/s       unrolls the coordinator accepted (what it took in; above learned/s while slots fill up)
  per core         learned/s divided by the learner process's CPU use (CPU s per wall s): the target compares
                   this at 4,096 with 16 (the 2 cores are shared with the emulated hosts, so wall rates move with
                   the load; CPU per unroll does not)
  cpu/unroll       the learner process's CPU time per learned unroll, ms
  unroll           the modelled env time of one unroll at that fleet size (T x B / each actor's frames/s), ms
  grant->accept    from a slot's grant to its unroll's acceptance, p50 and p99, ms: the env time of the unroll,
                   of any unroll its actor was granted before it, and the control plane's part
  tick             the supervisor's tick, p50 and p99, ms
  memory           the learner's RSS growth from before the actors started, and the hosts' PSS, per actor, KiB
  start-up         from the trainer's start to every actor's first delivered unroll, s

Replay at many writers (`--writers`, `--shards`): Ape-X's replay coordination (`cartpole-apex`) with N emulated
writers and S shards; the replay is made big enough (and its min_size as big) that the window is all inserts:
  items/s          items inserted into the tables per second (each accepted unroll is T x B n-step items)
  insert p50/p99   one `insert_batch` call into a shard's table (an unroll's items), microseconds
  per core         items/s per learner core (its CPU s per wall s)

The data plane's ceiling (`--data-plane`): Atari-sized unrolls (84x84x4 uint8 observations, T = 32, B = 16:
14.9 MB each, as `pong-impala` writes them) and CartPole-sized ones, taken in by a learner with nothing else to
do, per transport:
  shared memory    `LocalTransport`'s learner side: each batch gathered out of the slots (a copy)
  ray              `RayTransport`'s: an actor's unroll call returns its arrays through the object store, the
                   driver fetches them and copies them into its slot (4 calls in flight), then gathers the batch
Printed as unrolls/s, MB/s and env frames/s per learner.

The model (printed last): the learner's CPU per learned unroll is its update's share (the batch's step over its
unrolls) plus a control-plane part that does not grow with N; checked against every measured fleet size (the
error of predicting each from the smallest), then used to predict 10,000 actors on 1,000 hosts, CartPole- and
Atari-sized, naming the first bottleneck. `docs/scaling.md` has the figures.

The learner's loop on Ray (`--ray-actors`): the same fleets with the Ray launcher's learner side (`RayTransport`:
an unroll call per grant, refs in flight, a cache per node read before each unroll), the virtual actors in
`--hosts` async Ray actors (`menger.launch.emulated_ray`), printed as the same table.

Chaos (`--chaos-actors` on `--chaos-hosts` hosts): one host is SIGKILLed mid-run (on Ray too, with
`--ray-chaos`: its Ray actor killed); its actors come back on a new host as new incarnations. Printed: the
seconds until every one of them delivered again, frames lost by reason, duplicates (0), and the ledger:
produced = learned + dropped + pending.

    python benchmarks/scale.py [--actors 16 64 256 1024 4096] [--ray-actors 16 256 1024] [--writers 16 256 2048]
                               [--shards 1 4 16] [--data-plane shm ray] [--cache-hosts 8 64 256] [--hosts 8]
                               [--seconds 8] [--out DIR]

Writes DIR/scale.csv, DIR/scale.png (accepted unrolls/s and CPU per unroll against N) and DIR/caches.png (the
learner's egress per version against hosts for the three cache layouts), and prints the tables
with the load.

The parameter caches on Ray (`--cache-hosts`, `benchmarks/cache_tree.py`): flat, one cache per host, and the tree
of cells, at 8, 64 and 256 emulated hosts: the learner's egress and sends per version, the time for a version to
reach every host, the version lag at unroll start; and a killed cell in the tree over the chaos fleet
(`--chaos-actors` on `--chaos-hosts` hosts: 1,024 actors on 8).
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from menger.experiment import load_experiment
from menger.launch.emulated import EmulatedLauncher
from menger.runtime import Trainer
from menger.runtime.observers import Observer

PRESET = "cartpole-impala"
SHARED = ["runtime.envs_per_actor=4", "runtime.unroll_length=32", "runtime.learner.threads=1",
          "log.tensorboard=false", "log.progress=false", "log.interval_s=1", "checkpoint.interval_s=0",
          "stop.target_return=null", "stop.env_frames=1000000000000", "stop.wall_clock_s=600",
          "runtime.supervision.heartbeat_timeout_s=10", "runtime.supervision.startup_grace_s=30",
          # no lag bound: with the fleet's load spread over N slow actors, an unroll takes N / offered seconds, and
          # the lag budget (batch x (max_policy_lag + 1) unrolls in flight) would hold the learner to that pace
          # on purpose; what is measured here is the control plane's cost
          "runtime.coordination.max_policy_lag=1000000"]


def sibling(name: str):
    """benchmarks/NAME.py, loaded by path (this script may itself be loaded by path, as the tests do)."""
    key = f"menger_benchmark_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages (the slots, the parameters) split between the processes mapping them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Point:
    actors: int
    hosts: int
    learned_per_s: float
    accepted_per_s: float
    cpu_share: float           # learner process CPU s per wall s over the window
    per_core: float            # learned_per_s / cpu_share
    cpu_ms_per_unroll: float
    unroll_ms: float
    update_ms: float           # the learner's CPU per batch in its update (gradient step and publish), median
    latency_p50_ms: float
    latency_p99_ms: float
    tick_p50_ms: float
    tick_p99_ms: float
    learner_kib_per_actor: float
    hosts_kib_per_actor: float
    startup_s: float
    load_1min: float


class Window(Observer):
    """The measured window: it opens `settle_s` after every actor delivered its first unroll and closes `seconds`
    later, when the run is asked to stop. `measuring`: the window is open now."""

    def __init__(self, actors: int, settle_s: float, seconds: float):
        self.actors, self.settle_s, self.seconds = actors, settle_s, seconds
        self.delivered: set[int] = set()
        self.window: dict = {}
        self.all_in: float | None = None

    @property
    def measuring(self) -> bool:
        return "open" in self.window and "close" not in self.window

    def on_unroll(self, trainer, meta, verdict):
        now = time.monotonic()
        if self.all_in is None:
            self.delivered.add(meta.actor_id)
            if len(self.delivered) == self.actors:
                self.all_in = now
        elif "open" not in self.window and now >= self.all_in + self.settle_s:
            self.window.update(open=now, cpu=time.process_time())
        elif self.measuring and now >= self.window["open"] + self.seconds:
            self.window.update(close=now, cpu_end=time.process_time(), **self.closing(trainer))
            trainer.request_stop()

    def closing(self, trainer) -> dict:
        """What else to note as the window closes."""
        return {}


class Probe(Window):
    """Times grants to acceptances, supervisor ticks and updates in the window."""

    def __init__(self, actors: int, settle_s: float, seconds: float, unroll_s: float):
        super().__init__(actors, settle_s, seconds)
        self.unroll_s = unroll_s
        self.granted_at: dict[int, float] = {}
        self.latencies: list[float] = []
        self.ticks: list[float] = []
        self.accepted = self.learned = 0
        self.updates: list[float] = []
        self.batch_began: float | None = None
        self.rss_before = rss_kib()

    def on_start(self, trainer):
        transport, supervisor = trainer.transport, trainer.supervisor
        grant, tick = transport.grant, supervisor.tick

        def timed_grant(actor_id, slot):
            self.granted_at[slot] = time.monotonic()
            return grant(actor_id, slot)

        def timed_tick():
            began = time.perf_counter()
            tick()
            if self.measuring:
                self.ticks.append(time.perf_counter() - began)

        transport.grant, supervisor.tick = timed_grant, timed_tick

    def on_batch(self, trainer, batch):
        if self.measuring:
            self.learned += len(batch.metas)
            self.batch_began = time.process_time()

    def on_update(self, trainer, stats):
        if self.batch_began is not None:
            self.updates.append(time.process_time() - self.batch_began)  # the step and the publish, CPU
            self.batch_began = None

    def on_unroll(self, trainer, meta, verdict):
        if self.measuring and verdict.accepted:
            self.accepted += 1
            slot = trainer.coordinator.pending[-1][0]  # async: the accepted unroll was just appended
            if slot in self.granted_at:
                self.latencies.append(time.monotonic() - self.granted_at[slot])
        super().on_unroll(trainer, meta, verdict)

    def closing(self, trainer) -> dict:
        launcher = trainer.launcher
        if hasattr(launcher, "host_stats"):  # on Ray: the host actors' processes, on this machine
            pids = [stats["pid"] for stats in launcher.host_stats()]
        else:
            pids = [p.pid for p in launcher.host_processes if p is not None and p.is_alive()]
        return {"rss": rss_kib(), "hosts_pss": sum(pss_kib(pid) for pid in pids)}


def emulated_launcher(rt, hosts: int, frames_per_s: float, on_ray: bool):
    """Virtual actors on `hosts` host processes (`menger.launch.emulated`), or on as many async Ray actors
    (`menger.launch.emulated_ray`: the learner's side is the Ray launcher's, `RayTransport` and node caches)."""
    if on_ray:
        from menger.launch.emulated_ray import EmulatedRayLauncher

        return EmulatedRayLauncher(rt, hosts=hosts, frames_per_s=frames_per_s)
    return EmulatedLauncher(rt, hosts=hosts, frames_per_s=frames_per_s)


def measure(actors: int, hosts: int, offered: float, batch: int, settle_s: float, seconds: float,
            out: Path, on_ray: bool = False) -> Point:
    config = load_experiment(PRESET, [*SHARED, f"runtime.actors={actors}",
                                      f"runtime.coordination.batch_unrolls={batch}",
                                      f"runtime.launcher={'ray' if on_ray else 'processes'}"])
    rt = config.runtime
    frames = rt.unroll_length * rt.envs_per_actor
    per_actor = offered * frames / actors  # env frames/s of each actor: the same offered load at every N
    launcher = emulated_launcher(rt, min(hosts, actors), per_actor, on_ray)
    probe = Probe(actors, settle_s, seconds, frames / per_actor)
    trainer = Trainer(config, out / f"run-{'ray-' if on_ray else ''}{actors}", launcher=launcher, observers=[probe])
    began = time.monotonic()
    trainer.run()
    w = probe.window
    if "close" not in w:
        raise RuntimeError(f"{actors} actors: the window never closed (all delivered: {probe.all_in is not None})")
    wall, cpu = w["close"] - w["open"], w["cpu_end"] - w["cpu"]
    learned_per_s, share = probe.learned / wall, cpu / wall
    return Point(actors, min(hosts, actors), learned_per_s, probe.accepted / wall, share,
                 learned_per_s / max(share, 1e-9), 1000 * cpu / max(probe.learned, 1), 1000 * probe.unroll_s,
                 1000 * statistics.median(probe.updates or [float("nan")]),
                 1000 * percentile(probe.latencies, 0.5),
                 1000 * percentile(probe.latencies, 0.99), 1000 * percentile(probe.ticks, 0.5),
                 1000 * percentile(probe.ticks, 0.99), (w["rss"] - probe.rss_before) / actors,
                 w["hosts_pss"] / actors, probe.all_in - began, os.getloadavg()[0])


@dataclass
class ReplayPoint:
    writers: int
    shards: int
    items_per_s: float
    per_core: float
    insert_p50_us: float
    insert_p99_us: float
    load_1min: float


class InsertProbe(Window):
    """Times every table insert in the window."""

    def __init__(self, writers: int, settle_s: float, seconds: float):
        super().__init__(writers, settle_s, seconds)
        self.calls: list[float] = []
        self.items = 0

    def on_start(self, trainer):
        for table in trainer.coordinator.tables.shards:
            insert = table.insert_batch

            def timed(items, priorities, timeout_s, insert=insert):
                began = time.perf_counter()
                keys = insert(items, priorities, timeout_s)
                if self.measuring:
                    self.calls.append(time.perf_counter() - began)
                    self.items += len(keys)
                return keys

            table.insert_batch = timed


def replay_point(writers: int, shards: int, hosts: int, offered: float, settle_s: float, seconds: float,
                 out: Path) -> ReplayPoint:
    config = load_experiment("cartpole-apex", [*SHARED, f"runtime.actors={writers}", f"replay.shards={shards}",
                                               "replay.max_size=4000000", "replay.min_size=4000000",
                                               "runtime.envs_per_actor=4", "runtime.unroll_length=16",
                                               "eval.interval_s=0"])
    rt = config.runtime
    frames = rt.unroll_length * rt.envs_per_actor
    launcher = EmulatedLauncher(rt, hosts=min(hosts, writers), frames_per_s=offered * frames / writers)
    probe = InsertProbe(writers, settle_s, seconds)
    Trainer(config, out / f"replay-{writers}-{shards}", launcher=launcher, observers=[probe]).run()
    w = probe.window
    if "close" not in w:
        raise RuntimeError(f"{writers} writers, {shards} shards: the window never closed")
    wall, cpu = w["close"] - w["open"], w["cpu_end"] - w["cpu"]
    return ReplayPoint(writers, shards, probe.items / wall, probe.items / max(cpu, 1e-9),
                       1e6 * percentile(probe.calls, 0.5), 1e6 * percentile(probe.calls, 0.99), os.getloadavg()[0])


def format_replay(points: list[ReplayPoint]) -> str:
    lines = [f"{'writers':>8} {'shards':>6} {'items/s':>9} {'per core':>9} {'insert p50':>10} {'insert p99':>10} "
             f"{'load':>5}", f"{'':>8} {'':>6} {'':>9} {'items/s':>9} {'us':>10} {'us':>10} {'':>5}"]
    lines += [f"{p.writers:>8} {p.shards:>6} {p.items_per_s:>9.0f} {p.per_core:>9.0f} {p.insert_p50_us:>10.0f} "
              f"{p.insert_p99_us:>10.0f} {p.load_1min:>5.1f}" for p in points]
    return "\n".join(lines)


# unroll shapes as the presets write them: pong-impala (84x84x4 uint8, T 32, 16 envs, batches of 2 unrolls) and
# this benchmark's cartpole-impala (4 floats, T 32, 4 envs, batches of 16)
SIZES = {"atari": dict(obs=(84, 84, 4), dtype="uint8", unroll_length=32, envs=16, batch=2),
         "cartpole": dict(obs=(4,), dtype="float32", unroll_length=32, envs=4, batch=16)}


def size_spec(size: str):
    import gymnasium as gym

    from menger.transport import UnrollSpec

    shape = SIZES[size]
    high = 255 if shape["dtype"] == "uint8" else 1e9
    return UnrollSpec(gym.spaces.Box(0, high, shape["obs"], dtype=shape["dtype"]), gym.spaces.Discrete(6),
                      shape["unroll_length"], shape["envs"])


@dataclass
class DataPlane:
    transport: str
    size: str
    unrolls_per_s: float
    mb_per_s: float
    frames_per_s: float
    unroll_mb: float


def data_plane_shm(seconds: float, size: str) -> DataPlane:
    """The learner's side on one host: the actors wrote slots in shared memory (here: the same process, before
    each gather, so the pages are as warm as an actor leaves them; not timed); each batch is gathered (a copy)."""
    from menger.transport import UnrollBuffers

    spec, batch = size_spec(size), SIZES[size]["batch"]
    buffers = UnrollBuffers(spec, batch, shared=True)
    source = {name: torch_like(t) for name, t in buffers.slot(0).items()}
    taken, spent = 0, 0.0
    while spent < seconds:
        for slot in range(batch):
            for name, tensor in buffers.slot(slot).items():
                tensor.copy_(source[name])
        began = time.perf_counter()
        buffers.gather(list(range(batch)))
        spent += time.perf_counter() - began
        taken += batch
    return DataPlane("shared memory", size, taken / spent, taken * buffers.bytes_per_slot / spent / 1e6,
                     taken * spec.unroll_length * spec.envs_per_actor / spent, buffers.bytes_per_slot / 1e6)


def torch_like(tensor):
    import torch

    return torch.randint(0, 255, tensor.shape).to(tensor.dtype) if tensor.dtype == torch.uint8 else \
        torch.rand(tensor.shape).to(tensor.dtype)


class _RayWriter:
    """A Ray actor returning an Atari unroll from each call, as `RemoteActor.unroll` does (tag, fields, obs)."""

    def __init__(self, spec):
        from menger.transport import UnrollBuffers

        slot = UnrollBuffers(spec, 1, shared=False).slot(0)
        self.fields = {name: torch_like(t).numpy() for name, t in slot.items()}

    def unroll(self):
        obs = {name: array for name, array in self.fields.items() if name == "obs"}
        fields = {name: array for name, array in self.fields.items() if name != "obs"}
        return 0, fields, obs


def data_plane_ray(seconds: float, size: str, in_flight: int = 4) -> DataPlane:
    import ray

    from menger.transport import UnrollBuffers

    spec, batch = size_spec(size), SIZES[size]["batch"]
    started = not ray.is_initialized()
    if started:  # a private instance ("local"), never a cluster that happens to run on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this script
    try:
        writer = ray.remote(_RayWriter).options(num_cpus=0).remote(spec)
        buffers = UnrollBuffers(spec, 2 * batch, shared=False)
        calls = [writer.unroll.options(num_returns=3).remote() for _ in range(in_flight)]
        ray.get(calls[0][0])  # warm: the actor is up
        taken, filled, began = 0, [], time.perf_counter()
        while time.perf_counter() - began < seconds:
            _, fields_ref, obs_ref = calls.pop(0)
            calls.append(writer.unroll.options(num_returns=3).remote())
            fields = ray.get(fields_ref)
            fields.update(ray.get(obs_ref))
            filled.append(taken % (2 * batch))
            view = buffers.slot(filled[-1])
            for name, array in fields.items():
                view[name].numpy()[...] = array
            taken += 1
            if len(filled) == batch:
                buffers.gather(filled)
                filled = []
        wall = time.perf_counter() - began
    finally:
        if started:
            ray.shutdown()
    return DataPlane("ray object store", size, taken / wall, taken * buffers.bytes_per_slot / wall / 1e6,
                     taken * spec.unroll_length * spec.envs_per_actor / wall, buffers.bytes_per_slot / 1e6)


def parameter_count(preset: str) -> int:
    from menger.models import build_policy
    from menger.runtime.spaces import check_fit

    config = load_experiment(preset)
    (obs, action), _ = check_fit(config)
    return sum(p.numel() for p in build_policy(obs, action, config.model, config.algo, config.env.normalize)
               .parameters())


def model(points: list[Point], planes: list[DataPlane], batch: int, actors: int = 10_000, hosts: int = 1_000,
          actor_fps: float = 12_000.0, fanout: int = 16) -> str:
    """The cost model, checked against the measured fleet sizes, then its prediction at `actors` on `hosts`."""
    base = points[0]
    lines = ["the model: learner CPU per learned unroll = update / batch + control (no term grows with N)",
             f"  from {base.actors} actors: update {base.update_ms:.2f} ms per batch of {batch} -> "
             f"{base.update_ms / batch:.3f} ms per unroll; control {base.cpu_ms_per_unroll - base.update_ms / batch:.3f}"
             f" ms per unroll; per core {1000 / base.cpu_ms_per_unroll:.0f} unrolls/s"]
    errors = []
    for p in points[1:]:
        predicted = 1000 / base.cpu_ms_per_unroll
        errors.append((p.per_core - predicted) / predicted)
        lines.append(f"  {p.actors:>5} actors: predicted {predicted:.0f} unrolls/s per core, measured {p.per_core:.0f}"
                     f" ({errors[-1]:+.0%})")
    if errors:
        lines.append(f"  largest error over the measured points: {max(abs(e) for e in errors):.0%}")
    ray = {p.size: p for p in planes if p.transport == "ray object store"}
    shm = {p.size: p for p in planes if p.transport == "shared memory"}
    per_host = actors // hosts
    lines.append(f"\nprediction: {actors:,} actors on {hosts:,} hosts ({per_host} each), {actor_fps:,.0f} env frames/s "
                 f"per actor offered, one learner core, batches of {batch}:")
    for size, preset in (("cartpole", "cartpole-impala"), ("atari", "pong-impala")):
        shape = SIZES[size]
        frames = shape["unroll_length"] * shape["envs"]
        offered = actors * actor_fps
        params = 4 * parameter_count(preset)
        ingest = ray.get(size) or shm.get(size)
        if size == "cartpole":
            control = base.cpu_ms_per_unroll - base.update_ms / batch
            cost = base.update_ms / batch + control + (1000 / ingest.unrolls_per_s if ingest else 0.0)
            learned = min(offered / frames, 1000 / cost)
            parts = {"update": base.update_ms / batch, "control": control,
                     f"ingest ({ingest.transport if ingest else 'not measured'})":
                         1000 / ingest.unrolls_per_s if ingest else 0.0}
            first = max(parts, key=parts.get)
            versions = learned / batch
            lines.append(f"  {size}: {learned * frames:,.0f} frames/s learned of {offered:,.0f} offered "
                         f"(learner-bound; per unroll {cost:.3f} ms: "
                         + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()) + f"); first bottleneck: {first}")
        else:
            ceiling = ingest.unrolls_per_s if ingest else float("nan")
            learned = min(offered / frames, ceiling)
            versions = learned / shape["batch"]
            lines.append(f"  {size}: at most {learned * frames:,.0f} frames/s ({ceiling:.1f} unrolls/s, "
                         f"{ingest.mb_per_s if ingest else float('nan'):,.0f} MB/s through {ingest.transport if ingest else '?'}) "
                         f"of {offered:,.0f} offered: the data plane is the first bottleneck before any update "
                         "(a GPU update is not measured here)")
        lines.append(f"    parameters {params / 1e6:.2f} MB a version, {versions:.0f} versions/s: the learner sends "
                     f"{hosts * params * versions / 1e9:.2f} GB/s with a cache per host, "
                     f"{fanout * params * versions / 1e9:.3f} GB/s with a tree of fan-out {fanout}")
    largest = points[-1]
    lines.append(f"  learner memory for the actors: {largest.learner_kib_per_actor * actors / 1024:.0f} MiB "
                 f"({largest.learner_kib_per_actor:.1f} KiB each, measured at {largest.actors}); supervisor tick "
                 f"p99 {largest.tick_p99_ms:.2f} ms (constant: 64 handles a tick)")
    return "\n".join(lines)


def format_data_plane(points: list[DataPlane]) -> str:
    lines = [f"{'transport':>16} {'unrolls':>8} {'unroll MB':>9} {'unrolls/s':>9} {'MB/s':>8} {'frames/s':>9}"]
    lines += [f"{p.transport:>16} {p.size:>8} {p.unroll_mb:>9.3f} {p.unrolls_per_s:>9.1f} {p.mb_per_s:>8.0f} "
              f"{p.frames_per_s:>9.0f}" for p in points]
    return "\n".join(lines)


@dataclass
class Chaos:
    actors: int
    hosts: int
    killed_actors: int
    back_s: float
    lost_frames: dict
    duplicates: int
    produced: int
    learned: int
    dropped: int
    pending: int


class Killer(Observer):
    """Once every actor delivered and `after_s` passed, `kill(trainer)` kills the actors `on_host` (a host, or a
    replay shard's writers); times their return."""

    def __init__(self, actors: int, on_host, after_s: float, then_s: float, kill=None):
        self.actors, self.on_host, self.after_s, self.then_s = actors, set(on_host), after_s, then_s
        self.kill = kill or (lambda trainer: trainer.launcher.kill_host(0))
        self.delivered: set[int] = set()
        self.back: set[int] = set()
        self.all_in = self.killed_at = self.back_at = None
        self.tags: set = set()
        self.duplicates = 0

    def on_unroll(self, trainer, meta, verdict):
        tag = (meta.actor_id, meta.incarnation, meta.sequence)
        self.duplicates += tag in self.tags
        self.tags.add(tag)
        now = time.monotonic()
        if self.all_in is None:
            self.delivered.add(meta.actor_id)
            if len(self.delivered) == self.actors:
                self.all_in = now
        elif self.killed_at is None and now >= self.all_in + self.after_s:
            self.killed_at = time.monotonic()
            self.kill(trainer)
        elif self.killed_at is not None and meta.actor_id in self.on_host and meta.incarnation > 0:
            self.back.add(meta.actor_id)
            if self.back_at is None and self.back == self.on_host:
                self.back_at = now
        if self.back_at is not None and now >= self.back_at + self.then_s:
            trainer.request_stop()


def chaos(actors: int, hosts: int, offered: float, batch: int, out: Path, on_ray: bool = False) -> Chaos:
    config = load_experiment(PRESET, [*SHARED, f"runtime.actors={actors}",
                                      f"runtime.coordination.batch_unrolls={batch}", "stop.wall_clock_s=120",
                                      f"runtime.launcher={'ray' if on_ray else 'processes'}"])
    rt = config.runtime
    frames = rt.unroll_length * rt.envs_per_actor
    launcher = emulated_launcher(rt, hosts, offered * frames / actors, on_ray)
    killer = Killer(actors, launcher.actors_of(0), after_s=2.0, then_s=1.0)
    trainer = Trainer(config, out / f"chaos{'-ray' if on_ray else ''}", launcher=launcher, observers=[killer])
    trainer.run()
    a = trainer.accounts
    pending = sum(meta.frames for _, meta in trainer.coordinator.pending)
    back_s = (killer.back_at - killer.killed_at) if killer.back_at is not None else float("nan")
    return Chaos(actors, hosts, len(killer.on_host), back_s, dict(a.dropped), killer.duplicates + a.duplicates,
                 a.produced, a.accepted, sum(a.dropped.values()), pending)


def replay_chaos(writers: int, hosts: int, shards: int, offered: float, out: Path) -> Chaos:
    """Ape-X's replay with `writers` emulated writers on `hosts` hosts and `shards` shards; the writers of shard 0
    (actor i writes into shard i % shards: spread over every host) are killed at once mid-run."""
    config = load_experiment("cartpole-apex", [*SHARED, f"runtime.actors={writers}", f"replay.shards={shards}",
                                               "replay.max_size=4000000", "replay.min_size=4000000",
                                               "runtime.envs_per_actor=4", "runtime.unroll_length=16",
                                               "eval.interval_s=0", "stop.wall_clock_s=120"])
    rt = config.runtime
    launcher = EmulatedLauncher(rt, hosts=hosts, frames_per_s=offered * rt.unroll_length * rt.envs_per_actor / writers)
    victims = [actor for actor in range(writers) if actor % shards == 0]

    def kill(trainer):
        for record in trainer.supervisor.actors:
            if record.actor_id in victims and record.handle is not None:
                record.handle.kill()

    killer = Killer(writers, victims, after_s=2.0, then_s=1.0, kill=kill)
    trainer = Trainer(config, out / "replay-chaos", launcher=launcher, observers=[killer])
    trainer.run()
    a = trainer.accounts
    back_s = (killer.back_at - killer.killed_at) if killer.back_at is not None else float("nan")
    replay = trainer.coordinator  # committed chunks are accounted at the next batch; waiting ones at their insert
    pending = sum(meta.frames for meta in replay.new_metas) + sum(w.meta.frames for w in replay.waiting)
    return Chaos(writers, hosts, len(victims), back_s, dict(a.dropped), killer.duplicates + a.duplicates,
                 a.produced, a.accepted, sum(a.dropped.values()), pending)


def format_points(points: list[Point]) -> str:
    head = (f"{'actors':>7} {'hosts':>5} {'learned/s':>9} {'accepted/s':>10} {'per core':>9} {'cpu/unroll':>10} "
            f"{'unroll':>7} {'g->a p50':>9} {'g->a p99':>9} {'tick p50':>9} {'tick p99':>9} {'learner':>8} "
            f"{'hosts':>8} {'start-up':>8} {'load':>5}")
    units = (f"{'':>7} {'':>5} {'unrolls':>9} {'unrolls':>10} {'unrolls/s':>9} {'ms':>10} {'ms':>7} {'ms':>9} "
             f"{'ms':>9} {'ms':>9} {'ms':>9} {'KiB/act':>8} {'KiB/act':>8} {'s':>8} {'':>5}")
    rows = [f"{p.actors:>7} {p.hosts:>5} {p.learned_per_s:>9.0f} {p.accepted_per_s:>10.0f} {p.per_core:>9.0f} "
            f"{p.cpu_ms_per_unroll:>10.3f} {p.unroll_ms:>7.0f} {p.latency_p50_ms:>9.1f} {p.latency_p99_ms:>9.1f} {p.tick_p50_ms:>9.3f} {p.tick_p99_ms:>9.3f} "
            f"{p.learner_kib_per_actor:>8.1f} {p.hosts_kib_per_actor:>8.1f} {p.startup_s:>8.2f} {p.load_1min:>5.1f}"
            for p in points]
    base = points[0]
    tail = [f"per learner core at {p.actors} actors: {p.per_core / base.per_core:.0%} of {base.actors} actors'"
            for p in points[1:]]
    return "\n".join([head, units, *rows, *tail])


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [p.actors for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(n, [p.learned_per_s for p in points], "o-", label="learned unrolls/s (wall)")
    left.plot(n, [p.accepted_per_s for p in points], "^:", label="accepted unrolls/s (wall)")
    left.plot(n, [p.per_core for p in points], "s--", label="learned unrolls/s per learner core")
    left.set(xscale="log", xlabel="emulated actors", ylabel="unrolls/s", ylim=(0, None))
    left.legend()
    right.plot(n, [p.cpu_ms_per_unroll for p in points], "o-")
    right.set(xscale="log", xlabel="emulated actors", ylabel="learner CPU per learned unroll (ms)", ylim=(0, None))
    fig.suptitle("One learner against emulated actors (cartpole-impala, batch of 16 unrolls)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    parser.add_argument("--hosts", type=int, default=8, help="emulated host processes (at most one per actor)")
    parser.add_argument("--offered", type=float, default=4000.0, help="unrolls/s offered by the whole fleet")
    parser.add_argument("--batch", type=int, default=16, help="unrolls per learner batch")
    parser.add_argument("--settle-s", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=8.0, help="the measured window of each point")
    parser.add_argument("--writers", type=int, nargs="*", default=[16, 256, 2048], help="replay writers (none: skip)")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--data-plane", nargs="*", default=["shm", "ray"], choices=["shm", "ray"],
                        help="transports whose ingest ceiling to measure (none: skip)")
    parser.add_argument("--cache-hosts", type=int, nargs="*", default=[8, 64, 256],
                        help="emulated hosts for the parameter caches on Ray (none: skip; benchmarks/cache_tree.py)")
    parser.add_argument("--cache-seconds", type=float, default=12.0, help="the caches' measured window")
    parser.add_argument("--ray-actors", type=int, nargs="*", default=[16, 256, 1024],
                        help="fleet sizes of the learner's loop on Ray, virtual actors in --hosts async Ray actors "
                             "(none: skip)")
    parser.add_argument("--chaos-actors", type=int, default=1024, help="0: no chaos run")
    parser.add_argument("--chaos-hosts", type=int, default=8)
    parser.add_argument("--ray-chaos", action=argparse.BooleanOptionalAction, default=True,
                        help="also kill a host of the chaos fleet on Ray")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def print_chaos(result: Chaos, where: str = "") -> None:
    print(f"chaos{where}: {result.actors} actors on {result.hosts} hosts, host 0 ({result.killed_actors} actors) "
          f"killed: all back in {result.back_s:.2f} s; frames lost by reason {result.lost_frames}; duplicates "
          f"{result.duplicates}; produced {result.produced} = learned {result.learned} + dropped {result.dropped} "
          f"+ pending {result.pending}: {result.produced == result.learned + result.dropped + result.pending}")


def main(argv=None) -> tuple[list[Point], list[ReplayPoint], Chaos | None, list, tuple[list[Point], Chaos | None]]:
    args = parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="menger-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("menger.supervisor").setLevel(logging.ERROR)  # the chaos run's restarts are counted below
    print(f"{os.cpu_count()} cores; emulated actors, offered {args.offered:.0f} unrolls/s in all, batch "
          f"{args.batch} unrolls, window {args.seconds:g} s", flush=True)
    points = []
    for actors in args.actors:
        points.append(measure(actors, args.hosts, args.offered, args.batch, args.settle_s, args.seconds, out))
        print(f"  {actors} actors: {points[-1].learned_per_s:.0f} learned unrolls/s, "
              f"load {points[-1].load_1min:.1f}", flush=True)
    with open(out / "scale.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(points[0])))
        writer.writeheader()
        writer.writerows(asdict(p) for p in points)
    print()
    print(format_points(points))
    median_load = statistics.median(p.load_1min for p in points)
    print(f"median 1-min load over the points: {median_load:.1f} on {os.cpu_count()} cores")
    on_ray = [measure(actors, args.hosts, args.offered, args.batch, args.settle_s, args.seconds, out, on_ray=True)
              for actors in args.ray_actors]
    if on_ray:
        print(f"\nthe same on Ray (RayTransport, a cache per node; virtual actors in {args.hosts} async Ray actors):")
        print(format_points(on_ray))
        print(f"median 1-min load over the points: {statistics.median(p.load_1min for p in on_ray):.1f}")
    replay = [replay_point(writers, shards, args.hosts, args.offered, args.settle_s, args.seconds, out)
              for writers in args.writers for shards in args.shards]
    if replay:
        print(f"\nreplay at many writers (cartpole-apex items, {args.offered:.0f} unrolls/s offered, inserts only):")
        print(format_replay(replay))
    planes = [{"shm": data_plane_shm, "ray": data_plane_ray}[name](args.seconds, size)
              for name in args.data_plane for size in SIZES]
    if planes:
        print("\nthe data plane's ceiling, one learner taking unrolls in and doing nothing else:")
        print(format_data_plane(planes))
    print()
    print(model(points, planes, args.batch))
    caches, cache_chaos = [], None
    if args.cache_hosts:
        cache_tree = sibling("cache_tree")
        chaos_hosts = args.chaos_hosts if args.chaos_actors else 0  # the chaos fleet: 1,024 actors on 8 hosts
        cache_args = cache_tree.parse_args(["--hosts", *map(str, args.cache_hosts), "--seconds",
                                            str(args.cache_seconds), "--chaos-hosts", str(chaos_hosts),
                                            "--chaos-actors-per-host", str(max(1, args.chaos_actors // chaos_hosts)
                                                                           if chaos_hosts else 1)])
        caches, cache_chaos = cache_tree.run(cache_args)
        print()
        print(cache_tree.report(caches, cache_chaos, cache_args))
    plot(points, out / "scale.png")
    if caches:
        cache_tree.plot(caches, out / "caches.png")
    result = None
    if args.chaos_actors:
        result = chaos(args.chaos_actors, args.chaos_hosts, args.offered, args.batch, out)
        print()
        print_chaos(result)
    ray_chaos = None
    if args.chaos_actors and args.ray_chaos:
        ray_chaos = chaos(args.chaos_actors, args.chaos_hosts, args.offered, args.batch, out, on_ray=True)
        print_chaos(ray_chaos, " on Ray")
    if args.chaos_actors and args.writers:
        shards = max(args.shards)
        rc = replay_chaos(args.chaos_actors, args.chaos_hosts, shards, args.offered, out)
        print(f"chaos: replay, {rc.actors} writers on {rc.hosts} hosts and {shards} shards, shard 0's "
              f"{rc.killed_actors} writers killed at once: all back in {rc.back_s:.2f} s; frames lost by reason {rc.lost_frames}; "
              f"duplicates {rc.duplicates}; produced {rc.produced} = accounted {rc.learned} + dropped {rc.dropped} + "
              f"in the replay, not yet accounted {rc.pending}: {rc.produced == rc.learned + rc.dropped + rc.pending}")
    print(f"\nwrote {out / 'scale.csv'}, {out / 'scale.png'}" + (f" and {out / 'caches.png'}" if caches else ""))
    return points, replay, result, caches, (on_ray, ray_chaos)


if __name__ == "__main__":
    main()
