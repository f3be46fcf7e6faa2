"""Replay throughput: menger.replay against cpprb's PrioritizedReplayBuffer, same data, same run, one process.

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

Menger's table is limited by ``MinSize(1)`` (it never blocks), with a fifo remover, so both buffers do the same
work. Each figure is the median of ``--rounds`` rounds of ``--seconds`` each, the two libraries alternating, and
the 1-minute load average is printed at the start and the end: on shared cores both figures swing with other
work, their ratio much less.

    python benchmarks/replay.py [--size N] [--batch B] [--seconds S] [--rounds R] [--json out.json]

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
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from menger.replay import MinSize, Table, fifo, importance_weights, prioritized  # noqa: E402

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

    def __init__(self, size: int, data: dict, seed: int = 0):
        self.table = Table("bench", size, prioritized(ALPHA), fifo(), MinSize(1), item_spec=SPEC, seed=seed)
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
            self.last = sample.keys, importance_weights(sample, BETA)
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


class CpprbBench:
    name = "cpprb"

    def __init__(self, size: int, data: dict, seed: int = 0):
        from cpprb import PrioritizedReplayBuffer
        env_dict = {"obs": {"shape": 4, "dtype": np.float32}, "act": {"dtype": np.int64},
                    "rew": {"dtype": np.float32}, "next_obs": {"shape": 4, "dtype": np.float32},
                    "done": {"dtype": np.bool_}}
        self.buffer = PrioritizedReplayBuffer(size, env_dict, alpha=ALPHA)
        self.data, self.rng = data, np.random.default_rng(seed)

    def _args(self, part):
        return {"obs": part["obs"], "act": part["action"], "rew": part["reward"], "next_obs": part["next_obs"],
                "done": part["done"]}

    def fill(self, batch: int) -> None:
        for start in range(0, len(self.data["obs"]), batch):
            chunk = self._args({k: v[start:start + batch] for k, v in self.data.items()})
            self.buffer.add(**chunk, priorities=self.rng.random(len(chunk["obs"])) + 0.1)

    def insert_batch(self, batch: int):
        chunk = self._args({k: v[:batch] for k, v in self.data.items()})
        priorities = self.rng.random(batch) + 0.1
        return lambda: self.buffer.add(**chunk, priorities=priorities)

    def insert_one(self):
        item = self._args({k: v[0] for k, v in self.data.items()})
        return lambda: self.buffer.add(**item, priorities=1.0)

    def sample(self, batch: int):
        def step():
            sample = self.buffer.sample(batch, beta=BETA)
            self.last = sample["indexes"], sample["weights"]
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


def measure(benches: list, batch: int, seconds: float, rounds: int) -> dict[str, dict[str, float]]:
    figures = {label: {bench.name: [] for bench in benches} for label, _, _ in OPERATIONS}
    for _ in range(rounds):
        for label, method, batched in OPERATIONS:
            for bench in benches:
                step = getattr(bench, method)(batch) if batched else getattr(bench, method)()
                figures[label][bench.name].append(rate(step, batch if batched else 1, seconds))
    return {label: {name: statistics.median(values) for name, values in by_name.items()}
            for label, by_name in figures.items()}


def cpprb_available() -> bool:
    try:
        import cpprb  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="items in the buffer (default 1M)")
    parser.add_argument("--batch", type=int, default=256, help="items per insert, sample and update call")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the libraries (median)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-cpprb", action="store_true", help="measure Menger only")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()[0]
    data = transitions(args.size)
    benches = [MengerBench(args.size, data)]
    if not args.no_cpprb and cpprb_available():
        benches.append(CpprbBench(args.size, data))
    fill_s = {}
    for bench in benches:
        start = time.perf_counter()
        bench.fill(args.batch)
        fill_s[bench.name] = time.perf_counter() - start
    figures = measure(benches, args.batch, args.seconds, args.rounds)
    load_end = os.getloadavg()[0]

    print(f"replay: {args.size:,} CartPole transitions (45 bytes each), prioritized (alpha {ALPHA}), batches of "
          f"{args.batch}, one process, {os.cpu_count()} CPUs; median of {args.rounds} x {args.seconds:g} s")
    names = [bench.name for bench in benches]
    header = f"{'operation (items/s)':<28}" + "".join(f"{name:>14}" for name in names)
    print(header + (f"{'menger/cpprb':>14}" if "cpprb" in names else ""))
    for label, by_name in figures.items():
        row = f"{label:<28}" + "".join(f"{by_name[name]:>14,.0f}" for name in names)
        if "cpprb" in names:
            row += f"{by_name['menger'] / by_name['cpprb']:>14.2f}"
        print(row)
    print("filling the buffer (s)      " + "".join(f"{fill_s[name]:>14.2f}" for name in names))
    print(f"menger table: {benches[0].table.nbytes / 2**20:,.0f} MiB")
    print(f"load average (1 min): {load_start:.2f} at the start, {load_end:.2f} at the end")
    if "cpprb" not in names and not args.no_cpprb:
        print(install_cpprb_hint())
    result = {"size": args.size, "batch": args.batch, "figures": figures, "fill_s": fill_s,
              "load_average": [load_start, load_end], "cpus": os.cpu_count()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
