"""Replay throughput: menger.replay against cpprb's PrioritizedReplayBuffer (or, with ``--sampler uniform``, its
ReplayBuffer), same data, same run, one process.

On CartPole-sized transitions (obs 4 x float32, action int64, reward float32, next_obs 4 x float32, done bool)
in a buffer of ``--size`` items (1M by default), prioritized with alpha 0.6:

* inserts/s, in batches of ``--batch`` (an actor's unroll) and one at a time;
* prioritized samples/s (items per second, batches of ``--batch`` over the full buffer, importance weights with
  beta 0.4 included, as cpprb computes them in ``sample``);
* priority updates/s (batches of ``--batch`` keys that samples returned, cycling through 64 such batches, new
  priorities each call);
* two learner loops, in items per second: sample + update, and insert + sample + update (an actor's batch
  going in for every batch coming out). Work a library defers (Menger's trees take changes at the next sample)
  shows up here.

``--sampler uniform`` measures what a SAC or DQN learner without priorities does, against cpprb's ``ReplayBuffer``:
inserts as above, uniform samples/s, and insert + sample (no weights, no priority updates on either side); the
actor processes' figures then run a uniform `ReplayCoordinator`.

Menger's table is limited by ``MinSize(1)`` (it never blocks), with a fifo remover, so both buffers do the same
work. Each figure is the median of ``--rounds`` rounds of ``--seconds`` each, the two libraries alternating, and
the 1-minute load average is printed at the start and the end: on shared cores both figures swing with other
work, their ratio much less.

Then, for Menger only (cpprb has no multi-process buffer to set beside it), the replay path of a run: ``--actors``
(2) forked actor processes inserting while the learner samples. It is built on the runtime's own pieces: a
`menger.coordinator.replay.ReplayCoordinator` (prioritized, ``max_size`` ``--size``, batches of ``--batch``,
``samples_per_insert`` 0 so its limiter never blocks, n-step 3, gamma 0.99, 2 unrolls in flight per actor) over
`menger.transport.shm.UnrollBuffers` in shared memory (CartPole-sized: obs Box (4,), Discrete(2), Ape-X values,
``--unroll`` 16 steps x ``--envs`` 16 envs a slot). Each actor waits for a ("grant", slot) on its own pipe,
writes random observations, actions, rewards, Q values and episode ends into the slot in place and sends back
("unroll", slot, UnrollMeta), as `menger.transport.local` does; no env and no policy run. The learner loop (this
process) sends the coordinator's grants, polls the pipes without waiting, accepts each tag (the unroll becomes
T x B n-step items, inserted with Ape-X initial priorities) and, whenever a batch is ready, takes it (sample,
importance weights, gather of obs, next obs and actions from the slots), returns random priorities as the
learner's and publishes a new version; there is no network update. The actors first fill the table (no
sampling; ``--fill-seconds`` at most, and the output says how full it got), then ``--rounds`` windows of
``--seconds`` give the items committed to the table per second and the items sampled per second, both at once,
from the table's rate-limiter counters (medians of the windows).

    python benchmarks/replay.py [--size N] [--batch B] [--seconds S] [--rounds R] [--json out.json]
                                [--sampler prioritized|uniform]
                                [--actors A] [--unroll T] [--envs B] [--fill-seconds F] [--no-actors]

cpprb is not a dependency of Menger. Without it the script prints Menger's figures and how to get cpprb into a
separate benchmark venv that still sees Menger's torch and NumPy (a .pth file naming this venv's site-packages)::

    python3 -m venv .bench
    .venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
        > "$(.bench/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/menger_venv.pth"
    .bench/bin/pip install cpprb
    PYTHONPATH=. .bench/bin/python benchmarks/replay.py
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing.connection import wait as wait_connections
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from menger.coordinator.replay import ReplayCoordinator  # noqa: E402
from menger.core import UnrollMeta  # noqa: E402
from menger.experiment import ReplayConfig  # noqa: E402
from menger.replay import MinSize, Table, fifo, importance_weights, prioritized, uniform  # noqa: E402
from menger.transport.shm import SlotChunks, UnrollBuffers, UnrollSpec  # noqa: E402

ALPHA, BETA = 0.6, 0.4
SPEC = {"obs": ((4,), np.float32), "action": ((), np.int64), "reward": ((), np.float32),
        "next_obs": ((4,), np.float32), "done": ((), np.bool_)}
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def install_cpprb_hint() -> str:
    """How to get cpprb into a separate venv that sees this interpreter's packages (torch, NumPy, Menger's)."""
    return ("cpprb is not installed here (and is not a dependency of Menger). To compare, install it into a "
            "separate venv that sees this one's packages:\n"
            f"    python3 -m venv .bench\n"
            f"    {sys.executable} -c \"{PURELIB}\" > \"$(.bench/bin/python -c \"{PURELIB}\")/menger_venv.pth\"\n"
            f"    .bench/bin/pip install cpprb\n"
            f"    PYTHONPATH=. .bench/bin/python benchmarks/replay.py")


def transitions(count: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((count, 4)).astype(np.float32)
    return {"obs": obs, "action": rng.integers(0, 2, count), "reward": np.ones(count, np.float32),
            "next_obs": obs + np.float32(0.01), "done": rng.random(count) < 0.02}


def rate(step, items_per_call: int, seconds: float) -> float:
    """Items per second of ``step()`` called for about ``seconds`` (after one untimed call)."""
    step()
    calls, start = 0, time.perf_counter()
    while True:
        step()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * items_per_call / elapsed


class MengerBench:
    name = "menger"

    def __init__(self, size: int, data: dict, seed: int = 0, sampler: str = "prioritized"):
        self.prioritized = sampler == "prioritized"
        self.table = Table("bench", size, prioritized(ALPHA) if self.prioritized else uniform(), fifo(), MinSize(1),
                           item_spec=SPEC, seed=seed)
        self.data, self.rng = data, np.random.default_rng(seed)

    def fill(self, batch: int) -> None:
        for start in range(0, len(self.data["obs"]), batch):
            chunk = {k: v[start:start + batch] for k, v in self.data.items()}
            self.table.insert_batch(chunk, self.rng.random(len(chunk["obs"])) + 0.1, timeout_s=0)

    def insert_batch(self, batch: int):
        chunk = {k: v[:batch] for k, v in self.data.items()}
        priorities = self.rng.random(batch) + 0.1
        return lambda: self.table.insert_batch(chunk, priorities, timeout_s=0)

    def insert_one(self):
        item = {k: v[0] for k, v in self.data.items()}
        return lambda: self.table.insert(item, 1.0, timeout_s=0)

    def sample(self, batch: int):
        def step():
            sample = self.table.sample(batch, timeout_s=0)
            self.last = sample.keys, importance_weights(sample, BETA) if self.prioritized else sample.data
        return step

    def update(self, batch: int):
        keys = [self.table.sample(batch, timeout_s=0).keys for _ in range(KEY_BATCHES)]
        return _cycle(lambda k, p: self.table.update_priorities(k, p), keys, self.rng, batch)

    def learner_step(self, batch: int):
        priorities = self.rng.random(batch) + 0.1

        def step():
            sample = self.table.sample(batch, timeout_s=0)
            importance_weights(sample, BETA)
            self.table.update_priorities(sample.keys, priorities)
        return step

    def round_trip(self, batch: int):
        insert, learn = self.insert_batch(batch), self.learner_step(batch)
        return lambda: (insert(), learn())

    def insert_sample(self, batch: int):
        insert, sample = self.insert_batch(batch), self.sample(batch)
        return lambda: (insert(), sample())


class CpprbBench:
    name = "cpprb"

    def __init__(self, size: int, data: dict, seed: int = 0, sampler: str = "prioritized"):
        from cpprb import PrioritizedReplayBuffer, ReplayBuffer
        env_dict = {"obs": {"shape": 4, "dtype": np.float32}, "act": {"dtype": np.int64},
                    "rew": {"dtype": np.float32}, "next_obs": {"shape": 4, "dtype": np.float32},
                    "done": {"dtype": np.bool_}}
        self.prioritized = sampler == "prioritized"
        self.buffer = (PrioritizedReplayBuffer(size, env_dict, alpha=ALPHA) if self.prioritized else
                       ReplayBuffer(size, env_dict))
        self.data, self.rng = data, np.random.default_rng(seed)
        self.extra = (lambda count: {"priorities": self.rng.random(count) + 0.1}) if self.prioritized else \
            (lambda count: {})

    def _args(self, part):
        return {"obs": part["obs"], "act": part["action"], "rew": part["reward"], "next_obs": part["next_obs"],
                "done": part["done"]}

    def fill(self, batch: int) -> None:
        for start in range(0, len(self.data["obs"]), batch):
            chunk = self._args({k: v[start:start + batch] for k, v in self.data.items()})
            self.buffer.add(**chunk, **self.extra(len(chunk["obs"])))

    def insert_batch(self, batch: int):
        chunk = self._args({k: v[:batch] for k, v in self.data.items()})
        extra = self.extra(batch)
        return lambda: self.buffer.add(**chunk, **extra)

    def insert_one(self):
        item = self._args({k: v[0] for k, v in self.data.items()})
        extra = {"priorities": 1.0} if self.prioritized else {}
        return lambda: self.buffer.add(**item, **extra)

    def sample(self, batch: int):
        def step():
            if self.prioritized:
                sample = self.buffer.sample(batch, beta=BETA)
                self.last = sample["indexes"], sample["weights"]
            else:
                self.last = self.buffer.sample(batch)
        return step

    def update(self, batch: int):
        indexes = [self.buffer.sample(batch, beta=BETA)["indexes"] for _ in range(KEY_BATCHES)]
        return _cycle(lambda k, p: self.buffer.update_priorities(k, p), indexes, self.rng, batch)

    def learner_step(self, batch: int):
        priorities = self.rng.random(batch) + 0.1

        def step():
            sample = self.buffer.sample(batch, beta=BETA)
            self.buffer.update_priorities(sample["indexes"], priorities)
        return step

    def round_trip(self, batch: int):
        insert, learn = self.insert_batch(batch), self.learner_step(batch)
        return lambda: (insert(), learn())

    def insert_sample(self, batch: int):
        insert, sample = self.insert_batch(batch), self.sample(batch)
        return lambda: (insert(), sample())


def _cycle(update, keys: list, rng: np.random.Generator, batch: int):
    """Updates of keys a sample returned (fresh ones each call, as a learner's), new priorities each time."""
    priorities = [rng.random(batch) + 0.1 for _ in keys]
    state = {"i": 0}

    def step():
        i = state["i"] = (state["i"] + 1) % len(keys)
        update(keys[i], priorities[i])
    return step


KEY_BATCHES = 64
OPERATIONS = (("insert (batches)", "insert_batch", True), ("insert (one at a time)", "insert_one", False),
              ("prioritized sample", "sample", True), ("priority update", "update", True),
              ("sample + update", "learner_step", True), ("insert + sample + update", "round_trip", True))
UNIFORM_OPERATIONS = (("insert (batches)", "insert_batch", True), ("insert (one at a time)", "insert_one", False),
                      ("uniform sample", "sample", True), ("insert + sample", "insert_sample", True))


def operations(sampler: str) -> tuple:
    return OPERATIONS if sampler == "prioritized" else UNIFORM_OPERATIONS


def measure(benches: list, batch: int, seconds: float, rounds: int,
            sampler: str = "prioritized") -> dict[str, dict[str, float]]:
    figures = {label: {bench.name: [] for bench in benches} for label, _, _ in operations(sampler)}
    for _ in range(rounds):
        for label, method, batched in operations(sampler):
            for bench in benches:
                step = getattr(bench, method)(batch) if batched else getattr(bench, method)()
                figures[label][bench.name].append(rate(step, batch if batched else 1, seconds))
    return {label: {name: statistics.median(values) for name, values in by_name.items()}
            for label, by_name in figures.items()}


# ----- actor processes inserting while the learner samples ----------------------------------------------------
N_STEP, GAMMA, IN_FLIGHT, EPISODE_END = 3, 0.99, 2, 0.02  # cartpole-apex's n-step and gamma; slots_per_actor


def _actor(actor_id: int, conn, views: dict, parent_pid: int, seed: int) -> None:
    """A forked actor without env or policy: per grant, random steps written into the slot in place, then the tag."""
    rng = np.random.default_rng(seed)
    steps, envs = views["rewards"].shape[1:]
    sequence = 0
    try:
        while True:
            if not conn.poll(0.5):
                if os.getppid() != parent_pid:
                    return  # the learner is gone
                continue
            message = conn.recv()
            if message[0] != "grant":
                return  # ("stop",)
            slot = message[1]
            rng.standard_normal(out=views["obs"][slot], dtype=np.float32)
            views["actions"][slot] = rng.integers(0, 2, (steps, envs))
            rng.standard_normal(out=views["logp"][slot], dtype=np.float32)    # Q(s, a) of the acting network
            rng.standard_normal(out=views["values"][slot], dtype=np.float32)  # max_a Q(s, a)
            rng.random(out=views["rewards"][slot], dtype=np.float32)
            views["dones"][slot] = rng.random((steps, envs)) < EPISODE_END
            views["valid"][slot] = 1.0
            sequence += 1
            conn.send(("unroll", slot, UnrollMeta(actor_id, 0, sequence, 0, steps * envs)))
    except (EOFError, OSError, KeyboardInterrupt):
        return


class ActorsBench:
    """`ReplayCoordinator` over shared-memory slots, fed by forked actor processes through pipes."""

    def __init__(self, size: int, batch: int, actors: int, unroll: int, envs: int, seed: int = 0,
                 sampler: str = "prioritized"):
        cfg = ReplayConfig(max_size=size, sampler=sampler, alpha=ALPHA, beta=BETA, batch_size=batch,
                           samples_per_insert=0.0, min_size=batch)
        self.size, self.batch, self.num_actors = size, batch, actors
        self.coordinator = ReplayCoordinator(actors, cfg, unroll_length=unroll, envs_per_actor=envs,
                                             in_flight=IN_FLIGHT, gamma=GAMMA, n_step=N_STEP, seed=seed)
        spec = UnrollSpec(gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2), unroll, envs,
                          values=True)
        self.buffers = UnrollBuffers(spec, actors * self.coordinator.slots_per_actor, shared=True)
        self.coordinator.attach(self)  # this object stands in for the transport: the chunks are `self.buffers`
        views = {name: tensor.numpy() for name, tensor in self.buffers.tensors.items()}  # the forks inherit them
        context = mp.get_context("fork")
        self.conns, self.processes = [], []
        try:
            for actor_id in range(actors):
                learner_end, actor_end = context.Pipe(duplex=True)
                process = context.Process(target=_actor, name=f"replay-bench-actor-{actor_id}", daemon=True,
                                          args=(actor_id, actor_end, views, os.getpid(), seed + actor_id))
                process.start()
                actor_end.close()
                self.conns.append(learner_end)
                self.processes.append(process)
                self.coordinator.actor_started(actor_id, 0)
        except BaseException:
            self.close()
            raise
        self.rng = np.random.default_rng(seed)
        self.clock = {"grant": 0.0, "accept": 0.0, "learn": 0.0}
        self.unrolls = 0


    def chunk_store(self):
        return SlotChunks(self.buffers)
    def counters(self) -> tuple[int, int]:
        """Items committed to and sampled from the tables so far (their rate limiters' counters)."""
        limiters = [table.rate_limiter for table in self.coordinator.tables.shards]
        return sum(int(lim.inserts) for lim in limiters), sum(int(lim.samples) for lim in limiters)

    def _step(self, sample: bool) -> None:
        """One turn of the learner loop: grants out, tags in, and a batch when one is ready."""
        coordinator = self.coordinator
        start = time.perf_counter()
        for actor_id, slot in coordinator.grants():  # a grant first deletes the items of the actor's oldest chunk
            self.conns[actor_id].send(("grant", slot))
        self.clock["grant"] += time.perf_counter() - start
        ready = wait_connections(self.conns, 0)
        if ready:
            start = time.perf_counter()
            for conn in ready:
                while conn.poll():
                    try:
                        _, slot, meta = conn.recv()
                    except EOFError:
                        raise RuntimeError(f"actor process {self.conns.index(conn)} exited during the "
                                           "benchmark") from None
                    assert coordinator.accept(slot, meta).accepted
                    self.unrolls += 1
            self.clock["accept"] += time.perf_counter() - start
        if sample and coordinator.batch_ready():
            start = time.perf_counter()
            batch = coordinator.take_batch(None)
            coordinator.learned(batch, {"priorities": self.rng.random(self.batch) + 0.1})
            coordinator.published(coordinator.version + 1)
            self.clock["learn"] += time.perf_counter() - start

    def fill(self, seconds: float) -> float:
        """Actors insert, nobody samples, until the table holds what it keeps in the steady state (its actors'
        rings, less the chunks in flight), or `seconds` pass. Returns the seconds it took."""
        per_actor = self.coordinator.ring_capacity - IN_FLIGHT
        target = min(self.size, max(1, per_actor) * self.num_actors * self.coordinator.chunk_items)
        start = time.perf_counter()
        while len(self.coordinator.tables) < target and time.perf_counter() - start < seconds:
            self._step(sample=False)
        return time.perf_counter() - start

    def window(self, seconds: float) -> dict[str, float]:
        """Items inserted and sampled per second over `seconds` of the learner loop, and where its time went."""
        inserts, samples = self.counters()
        self.clock = {"grant": 0.0, "accept": 0.0, "learn": 0.0}
        start = time.perf_counter()
        while True:
            self._step(sample=True)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        inserted, sampled = self.counters()
        return {"inserts_per_s": (inserted - inserts) / elapsed, "samples_per_s": (sampled - samples) / elapsed,
                **{f"{part}_share": spent / elapsed for part, spent in self.clock.items()}}

    def close(self) -> None:
        """("stop",) to every actor; join with a timeout, then kill what is left."""
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 5.0
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
        for conn in self.conns:
            conn.close()
        self.coordinator.close()


def measure_actors(size: int, batch: int, seconds: float, rounds: int, *, actors: int = 2, unroll: int = 16,
                   envs: int = 16, fill_seconds: float = 120.0, sampler: str = "prioritized") -> dict:
    """The "actor processes inserting, learner sampling" figures (medians of `rounds` windows of `seconds`)."""
    bench = ActorsBench(size, batch, actors, unroll, envs, sampler=sampler)
    try:
        fill_inserts, _ = bench.counters()
        fill_s = bench.fill(fill_seconds)
        filled = len(bench.coordinator.tables)
        fill_rate = (bench.counters()[0] - fill_inserts) / fill_s if fill_s > 0 else 0.0
        windows = [bench.window(seconds) for _ in range(rounds)]
        alive = all(process.is_alive() for process in bench.processes)
        result = {"actors": actors, "sampler": sampler, "unroll": unroll, "envs": envs,
                  "items_per_unroll": unroll * envs,
                  "slots": bench.buffers.num_slots, "slot_bytes": bench.buffers.bytes_per_slot,
                  "n_step": N_STEP, "filled": filled, "filled_fraction": filled / size, "fill_s": fill_s,
                  "fill_inserts_per_s": fill_rate, "final_size": len(bench.coordinator.tables),
                  "unrolls": bench.unrolls, "actors_alive": alive, "windows": windows}
        result.update({key: statistics.median(w[key] for w in windows) for key in windows[0]})
        return result
    finally:
        bench.close()


def cpprb_available() -> bool:
    try:
        import cpprb  # noqa: F401
    except ImportError:
        return False
    return True


def print_actors(a: dict, size: int, batch: int, rounds: int, seconds: float) -> None:
    print()
    print(f"{a['actors']} actor processes inserting, learner sampling (Menger only: cpprb has no multi-process "
          f"equivalent); median of {rounds} x {seconds:g} s")
    print(f"  ReplayCoordinator, {a['sampler']}, batches of {batch}, {a['n_step']}-step items; unrolls of "
          f"{a['unroll']} steps x {a['envs']} envs ({a['items_per_unroll']} items) in {a['slots']:,} shared-memory "
          f"slots ({a['slots'] * a['slot_bytes'] / 2**20:,.0f} MiB)")
    print(f"  filled to {a['filled']:,} of {size:,} items ({100 * a['filled_fraction']:.1f} %) in "
          f"{a['fill_s']:.1f} s, {a['fill_inserts_per_s']:,.0f} items/s inserted with nobody sampling")
    print(f"{'  items inserted/s':<28}{a['inserts_per_s']:>14,.0f}")
    print(f"{'  items sampled/s':<28}{a['samples_per_s']:>14,.0f}")
    shares = {part: 100 * a[f"{part}_share"] for part in ("grant", "accept", "learn")}
    print(f"  learner loop: {shares['accept']:.0f} % receiving unrolls and accepting them as items, "
          f"{shares['learn']:.0f} % sampling, gathering and updating priorities, {shares['grant']:.0f} % granting "
          f"(deleting the oldest chunk's items), {100 - sum(shares.values()):.0f} % polling the pipes")
    print(f"  table at {a['final_size']:,} items after {a['unrolls']:,} unrolls; "
          f"actors {'alive' if a['actors_alive'] else 'NOT ALL ALIVE'} to the end")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="items in the buffer (default 1M)")
    parser.add_argument("--batch", type=int, default=256, help="items per insert, sample and update call")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the libraries (median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-cpprb", action="store_true", help="measure Menger only")
    parser.add_argument("--actors", type=int, default=2, help="actor processes inserting while the learner samples")
    parser.add_argument("--unroll", type=int, default=16, help="steps per actor unroll (T)")
    parser.add_argument("--envs", type=int, default=16, help="envs per actor (B): T x B items per unroll")
    parser.add_argument("--fill-seconds", type=float, default=120.0,
                        help="at most this long for the actors to fill the table before the timed windows")
    parser.add_argument("--no-actors", action="store_true", help="skip the actor processes' figures")
    parser.add_argument("--sampler", choices=("prioritized", "uniform"), default="prioritized",
                        help="prioritized (alpha 0.6) against cpprb's PrioritizedReplayBuffer, or uniform against "
                             "its ReplayBuffer")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()[0]
    data = transitions(args.size)
    benches = [MengerBench(args.size, data, sampler=args.sampler)]
    if not args.no_cpprb and cpprb_available():
        benches.append(CpprbBench(args.size, data, sampler=args.sampler))
    fill_s = {}
    for bench in benches:
        start = time.perf_counter()
        bench.fill(args.batch)
        fill_s[bench.name] = time.perf_counter() - start
    figures = measure(benches, args.batch, args.seconds, args.rounds, args.sampler)
    names, table_mib = [bench.name for bench in benches], benches[0].table.nbytes / 2**20
    del benches  # their memory, before the actors' table is built
    actors = None
    if not args.no_actors:
        actors = measure_actors(args.size, args.batch, args.seconds, args.rounds, actors=args.actors,
                                unroll=args.unroll, envs=args.envs, fill_seconds=args.fill_seconds,
                                sampler=args.sampler)
    load_end = os.getloadavg()[0]

    sampling = f"prioritized (alpha {ALPHA})" if args.sampler == "prioritized" else "uniform"
    print(f"replay: {args.size:,} CartPole transitions (45 bytes each), {sampling}, batches of "
          f"{args.batch}, one process, {os.cpu_count()} CPUs; median of {args.rounds} x {args.seconds:g} s")
    header = f"{'operation (items/s)':<28}" + "".join(f"{name:>14}" for name in names)
    print(header + (f"{'menger/cpprb':>14}" if "cpprb" in names else ""))
    for label, by_name in figures.items():
        row = f"{label:<28}" + "".join(f"{by_name[name]:>14,.0f}" for name in names)
        if "cpprb" in names:
            row += f"{by_name['menger'] / by_name['cpprb']:>14.2f}"
        print(row)
    print("filling the buffer (s)      " + "".join(f"{fill_s[name]:>14.2f}" for name in names))
    print(f"menger table: {table_mib:,.0f} MiB")
    if actors is not None:
        print_actors(actors, args.size, args.batch, args.rounds, args.seconds)
    print(f"load average (1 min): {load_start:.2f} at the start, {load_end:.2f} at the end")
    if "cpprb" not in names and not args.no_cpprb:
        print(install_cpprb_hint())
    result = {"size": args.size, "batch": args.batch, "sampler": args.sampler, "figures": figures, "fill_s": fill_s,
              "load_average": [load_start, load_end], "cpus": os.cpu_count()}
    if actors is not None:
        result["actors"] = actors
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
