"""Runtime auto-sizing: `runtime.actors`, `runtime.envs_per_actor` and `runtime.coordination.batch_unrolls` set to
`auto` are picked before the run starts, from what this machine measures, to learn the most env frames/s.

    costs = measure(config)                   # an actor's unroll at a few B, the learner's update at a few sizes
    choice = pick(costs, candidates(costs))   # `predict` over every allowed layout: the fastest wins
    config = choice.apply(config)             # concrete integers: config.yaml records them, a resume keeps them

The model (`predict`) of a layout, A actors of B envs, batches of U unrolls of T steps, on C cores:

    u(B)     seconds of one core for an actor's unroll of T x B frames (measured at a few B, linear between them)
    L(N, k)  seconds of one learner update on N frames with k torch threads: linear between updates measured
             at 16, 64, 256, ... env columns as far as the time allows (not one line: past the caches a frame costs
             more); at the most threads a candidate gives the learner and, if time is left, at one; linear in k
             between)
    k        runtime.learner.threads, else what the trainer sets: max(1, C - A) (Ray: C)
    sync (ppo): a round is every actor's unroll, side by side on min(A, C) cores, then one update on A B T frames:
             frames/s = A B T / (u(B) max(1, A / C) + L(A B T, k))
    async (impala, appo): actors and learner work at once, so the slowest of three bounds:
             actors   min(A, C) B T / u(B)
             learner  U B T / L(U B T, k)
             cores    C / (u(B) / (B T) + L1(U B T) / (U B T))     each frame costs its acting and learning CPU
                      (L1: L(N, 1) where one thread was timed, else k L(N, k) at the fewest threads k timed)
    threads launcher: the actors' Python shares one interpreter lock, so the actors' side counts as one core.

Layouts within 5 % of the best prediction count as ties; the one with the fewest actors wins (each one more is a
process to switch between, which the model's pool of cores does not see), then the smallest batch (the model's
error grows with the batch: its cost is measured at sizes four times apart, and a smaller batch is more updates
per frame and less policy lag), then the fewest envs. A layout whose batches are more than twice the largest the learner
was timed on is not a candidate. The objective is throughput, not sample efficiency: for PPO it favours big
rounds, so fewer updates per frame. During an async run with `batch_unrolls: auto`, `BatchAdjuster` moves
the batch size when the learner falls behind or waits (see its docstring). Every choice and adjustment is logged
with the figures behind it and written to RUN_DIR/autosize.json.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from menger.experiment import ExperimentConfig
from menger.runtime.observers import Observer

log = logging.getLogger("menger.autosize")

REPORT_FILE = "autosize.json"
BUDGET_S = 30.0            # the bound on the start-up measurement
ENVS = (8, 16, 32, 64, 128, 256, 384, 512, 768, 1024)  # envs_per_actor candidates
PROBE_ENVS = (16, 64, 256, 1024)  # where an actor's unroll is timed (as many as the budget allows)
PROBE_STEPS = 16           # steps of a timed unroll: its cost is per step, so a short one tells it
MAX_CLUSTER_ACTORS = 256   # the most actors a Ray cluster's layout may have
MIN_POOL = 8               # an elastic run allocates at least this many actors (twice the picked, by default)
TIE = 0.05                 # predictions this close to the best are ties
MEMORY_SHARE = 0.25        # of the host's memory, the most the unroll slots of a layout may take


# ----- what was measured -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Costs:
    """What this machine measured, in seconds; the input of the model (`predict`)."""

    cores: int
    launcher: str                       # threads, processes or ray
    coordination: str                   # sync or async
    unroll_length: int                  # T
    slots_per_actor: int
    actor_step_s: dict[int, float]      # B -> seconds of one core for one step of B envs (acting included)
    learner_s: dict[int, list]          # torch threads k -> [(N, seconds)]: an update on N frames, measured
    learner_threads: int = 0            # runtime.learner.threads (0: the trainer's default)
    bytes_per_env: int = 0              # shared memory of one env's share of an unroll slot
    memory_bytes: int = 0               # the most a layout's slots may take (0: no limit)
    measured_s: float = 0.0
    actor_cores: int = 0                # a Ray cluster: the actors that fit on its CPUs at once (0: `cores`, shared
                                        # with the learner on this host)

    def unroll_s(self, envs: int) -> float:
        """u(B): one core's seconds for an unroll of T steps of B envs, linear between the measured B."""
        points = sorted(self.actor_step_s.items())
        sizes = np.array([b for b, _ in points], float)
        steps = np.array([s for _, s in points], float)
        if len(points) == 1 or sizes[0] <= envs <= sizes[-1]:
            step = float(np.interp(envs, sizes, steps)) if len(points) > 1 else steps[0] * envs / sizes[0]
        elif envs < sizes[0]:  # no cheaper per step than the smallest measured batch, at least its per-env cost
            step = max(steps[0] * envs / sizes[0], steps[0] + (steps[1] - steps[0]) * (envs - sizes[0]) /
                       (sizes[1] - sizes[0]))
        else:  # past the largest: its last segment's cost per env, never less
            slope = max((steps[-1] - steps[-2]) / (sizes[-1] - sizes[-2]), 0.0)
            step = steps[-1] + slope * (envs - sizes[-1])
        return step * self.unroll_length

    def threads(self, actors: int) -> int:
        """The learner's torch threads with this many actors (what `Trainer._setup` sets)."""
        if self.learner_threads:
            return self.learner_threads
        return self.cores if self.launcher == "ray" else max(1, self.cores - actors)

    def update_s(self, frames: int, threads: int) -> float:
        """L(N, k): seconds of one update on `frames` frames with `threads` torch threads, through the sizes measured
        at the nearest thread counts (`_through`), linear in k between them."""
        known = sorted(self.learner_s)
        low = max([k for k in known if k <= threads] or known[:1])
        high = min([k for k in known if k >= threads] or known[-1:])
        at = {k: _through(self.learner_s[k], frames) for k in (low, high)}
        if low == high:
            return at[low]
        return at[low] + (at[high] - at[low]) * (threads - low) / (high - low)

    def update_cpu_s(self, frames: int) -> float:
        """CPU seconds of one update on `frames` frames: its time on one thread where that was measured, else k x
        its time on the fewest threads k measured (a thread the update holds is a core the actors do not get;
        taking the k-thread time as one core's would let the actors and the learner share cores they do not have)."""
        fewest = min(self.learner_s)
        return fewest * _through(self.learner_s[fewest], frames)

    @property
    def largest_batch(self) -> int:
        """The largest batch (frames) the learner was timed on."""
        return max(n for samples in self.learner_s.values() for n, _ in samples)


def _through(samples: list, frames: int) -> float:
    """Seconds of an update on `frames` frames, linear between the (N, seconds) samples measured. Not one straight
    line through all of them: an update's cost per frame falls with the batch while its fixed part is shared out,
    then rises again once the batch outgrows the caches (CartPole's learner on this 2-core machine: 3.2 µs a frame
    at 4k frames, 2.5 at 16k, 2.9 at 65k, 5.4 at 262k), and a line would send big batches to where they are slow.
    Each sample is already the fastest of its timed updates, so one burst of other work moves it little. Below the
    smallest sample: its cost, less the share its frames make (never below the line through the first two); past
    the largest: its last segment's cost per frame, never less than its own. One sample: all per frame."""
    points = sorted(samples)
    sizes = np.array([n for n, _ in points], float)
    seconds = np.array([s for _, s in points], float)
    if len(points) == 1:
        return float(seconds[0] * frames / sizes[0])
    if frames < sizes[0]:
        return float(max(seconds[0] * frames / sizes[0],
                         seconds[0] + (seconds[1] - seconds[0]) * (frames - sizes[0]) / (sizes[1] - sizes[0])))
    if frames > sizes[-1]:
        slope = max((seconds[-1] - seconds[-2]) / (sizes[-1] - sizes[-2]), seconds[-1] / sizes[-1])
        return float(seconds[-1] + slope * (frames - sizes[-1]))
    return float(np.interp(frames, sizes, seconds))


@dataclass(frozen=True)
class Layout:
    actors: int
    envs_per_actor: int
    batch_unrolls: int = 0  # async: unrolls per batch (0 = one per actor); sync: unused


@dataclass(frozen=True)
class Prediction:
    layout: Layout
    frames_per_s: float
    bound: str                 # what sets the pace: actors, learner, cores (async), round (sync)
    bounds: dict               # every bound's frames/s


def predict(costs: Costs, layout: Layout) -> Prediction:
    """Learned env frames/s of `layout` on the measured machine (the model in the module's docstring)."""
    a, b, t = layout.actors, layout.envs_per_actor, costs.unroll_length
    actor_cores = 1 if costs.launcher == "threads" else costs.actor_cores or costs.cores
    unroll = costs.unroll_s(b)
    threads = costs.threads(a)
    if costs.coordination == "sync":
        frames = a * b * t
        acting = unroll * max(1.0, a / actor_cores)
        learning = costs.update_s(frames, threads)
        rate = frames / (acting + learning)
        return Prediction(layout, rate, "round", {"acting_s": acting, "learning_s": learning, "round": rate})
    frames = _batch_frames(costs, layout)
    bounds = {"actors": min(a, actor_cores) * b * t / unroll,
              "learner": frames / costs.update_s(frames, threads)}
    if not costs.actor_cores:  # actors and learner share this host's cores
        bounds["cores"] = costs.cores / (unroll / (b * t) + costs.update_cpu_s(frames) / frames)
    bound = min(bounds, key=bounds.get)
    return Prediction(layout, bounds[bound], bound, bounds)


def candidates(costs: Costs, max_actors: int | None = None, envs: tuple[int, ...] = ENVS,
               actors: int | None = None, envs_per_actor: int | None = None, batch_unrolls: int | None = None,
               rows_per_game: int = 1) -> list[Layout]:
    """Every layout the search may pick: the keys given (not auto) stay fixed; A up to twice the cores (8 at
    most), B from `envs` (multiples of a multi-agent game's rows), U from 1 to A x slots_per_actor (async). Left
    out: a layout whose unroll slots would take more than `costs.memory_bytes`, and one whose batches are more
    than twice the largest the learner was timed on (the model would only guess how it fares)."""
    max_actors = max_actors or min(8, 2 * costs.cores)
    most_frames = 2 * costs.largest_batch
    actor_counts = [actors] if actors is not None else range(1, max_actors + 1)
    env_counts = [envs_per_actor] if envs_per_actor is not None else [b for b in envs if b % rows_per_game == 0]
    out = []
    for a in actor_counts:
        for b in env_counts:
            slots = a * costs.slots_per_actor
            if costs.memory_bytes and costs.bytes_per_env and slots * b * costs.bytes_per_env > costs.memory_bytes:
                continue
            if costs.coordination != "async":
                layouts = [Layout(a, b, 0)]
            elif batch_unrolls is not None:
                layouts = [Layout(a, b, batch_unrolls)]
            else:
                layouts = [Layout(a, b, u) for u in range(1, slots + 1)]
            out += [layout for layout in layouts if _batch_frames(costs, layout) <= most_frames]
    return out


def _batch_frames(costs: Costs, layout: Layout) -> int:
    unrolls = layout.actors if costs.coordination == "sync" else layout.batch_unrolls or layout.actors
    return unrolls * layout.envs_per_actor * costs.unroll_length


@dataclass(frozen=True)
class Choice:
    """The layout picked, the prediction behind it, the runners-up and why, as lines to log."""

    layout: Layout
    prediction: Prediction
    ranked: list              # the best predictions, best first
    reasons: list
    costs: Costs
    keys: tuple = ()          # the keys that were auto
    pool: int = 0             # an elastic run (Ray cluster): the actors allocated, of which `layout.actors` start

    def apply(self, config: ExperimentConfig) -> ExperimentConfig:
        """`config` with the auto keys replaced by the layout's integers (an elastic run's actors: its pool)."""
        rt = config.runtime
        coordination = rt.coordination
        if "runtime.coordination.batch_unrolls" in self.keys:
            coordination = dataclasses.replace(coordination, batch_unrolls=self.layout.batch_unrolls)
        runtime = dataclasses.replace(rt, actors=self.pool or self.layout.actors,
                                      envs_per_actor=self.layout.envs_per_actor, coordination=coordination)
        return dataclasses.replace(config, runtime=runtime)

    def report(self) -> dict:
        """What RUN_DIR/autosize.json holds."""
        costs = self.costs
        return {"keys": list(self.keys), "picked": dataclasses.asdict(self.layout),
                "predicted_frames_per_s": self.prediction.frames_per_s, "bound": self.prediction.bound,
                "measured_s": costs.measured_s, "cores": costs.cores, "launcher": costs.launcher,
                "coordination": costs.coordination, "unroll_length": costs.unroll_length,
                "slots_per_actor": costs.slots_per_actor,
                "actor_step_s": {str(b): s for b, s in costs.actor_step_s.items()},
                "learner_update_s": {str(k): [[n, seconds] for n, seconds in samples]
                                     for k, samples in costs.learner_s.items()},
                "ranked": [{**dataclasses.asdict(p.layout), "frames_per_s": p.frames_per_s, "bound": p.bound}
                           for p in self.ranked],
                "actor_cores": costs.actor_cores, "pool": self.pool, "active": self.layout.actors,
                "reasons": list(self.reasons), "adjustments": []}


def pick(costs: Costs, layouts: list[Layout], keys: tuple = ()) -> Choice:
    """The layout with the most predicted learned frames/s. Ties (within `TIE`) go to the fewest actors (fewer
    processes to switch between: the model counts the cores as a pool and does not see that cost), then to the
    smallest batch (the model knows the learner's cost only at sizes four times apart, and a batch between them may
    already have outgrown a cache; a smaller one is also less policy lag), then to the fewest envs."""
    if not layouts:
        raise ValueError("no layout to pick from: every candidate's unroll slots exceed the memory budget, or its "
                         "batches the sizes the learner was timed on; set runtime.actors and "
                         "runtime.envs_per_actor to numbers")
    predictions = sorted((predict(costs, layout) for layout in layouts), key=lambda p: -p.frames_per_s)
    best = predictions[0].frames_per_s
    tied = [p for p in predictions if p.frames_per_s >= (1 - TIE) * best]
    chosen = min(tied, key=lambda p: (p.layout.actors, _batch_frames(costs, p.layout), p.layout.envs_per_actor))
    ranked = [chosen] + [p for p in predictions if p is not chosen][:4]
    return Choice(chosen.layout, chosen, ranked, _reasons(costs, chosen, predictions, keys), costs, keys)


def _reasons(costs: Costs, chosen: Prediction, predictions: list[Prediction], keys: tuple) -> list[str]:
    layout, t = chosen.layout, costs.unroll_length
    b, a = layout.envs_per_actor, layout.actors
    smallest = min(costs.actor_step_s)
    frames = _batch_frames(costs, layout)
    threads = costs.threads(a)
    acting = (f"an actor steps {b} envs in {_us(costs.unroll_s(b) / t / b)}/env "
              f"({_us(costs.unroll_s(smallest) / t / smallest)}/env at B={smallest})")
    learning = (f"the learner takes {costs.update_s(frames, threads) * 1e3:,.1f} ms per {frames:,}-frame batch "
                f"on {threads} thread(s)")
    others = ", ".join(f"{p.layout.actors}x{p.layout.envs_per_actor}"
                       + (f"/U{p.layout.batch_unrolls}" if costs.coordination == "async" else "")
                       + f" {p.frames_per_s:,.0f}" for p in [p for p in predictions if p is not chosen][:3])
    if chosen.bound == "round":
        pace = (f"a round of {chosen.bounds['acting_s']:.3f} s acting and {chosen.bounds['learning_s']:.3f} s "
                "learning")
    else:
        pace = f"bound by the {chosen.bound}"
    best = predictions[0]
    tie = (f" (within {TIE:.0%} of the best, {best.frames_per_s:,.0f}: a tie, which goes to the fewest actors, "
           "then the smallest batch)" if best is not chosen else "")
    why = (f"predicted {chosen.frames_per_s:,.0f} learned frames/s{tie}, {pace}; {acting}; {learning}; "
           f"{costs.cores} cores, {costs.launcher} launcher; others: {others or 'none'}")
    values = {"runtime.actors": a, "runtime.envs_per_actor": b, "runtime.coordination.batch_unrolls":
              layout.batch_unrolls}
    return [f"{key}={values[key]}: {why}" for key in keys]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f} µs"


# ----- measuring ---------------------------------------------------------------------------------------------
class _ProbePort:
    """An `ActorPort` over one local slot: the actor writes its unroll as it would into shared memory."""

    def __init__(self, buffers):
        self.buffers, self.params = buffers, None

    def slot(self, index: int) -> dict:
        return self.buffers.slot(index)

    def num_slots(self) -> int:
        return self.buffers.num_slots

    def beat(self, actor_id: int, frames_in_unroll: int) -> None:
        pass


def measure(config: ExperimentConfig, budget_s: float = BUDGET_S, clock=time.perf_counter) -> tuple[Costs, int]:
    """Time an actor's unrolls (built as the run builds them: `make_actor`) at a few B, and the learner's update
    (`make_learner`) on batches of a few sizes, within `budget_s` in all. Returns the costs and the number of
    rows per game of a multi-agent env (envs_per_actor must be a multiple of it).

    The actors get the first 35 % of the budget, the learner what is left up to 75 % (90 % for its second batch
    size: a line needs two): no step is started that its guess says would end later (a guess from the step
    before, four times smaller), so that a machine that turns slower than guessed still leaves time for one
    update that runs long."""
    from menger.envs import make_vec_env
    from menger.learners import make_learner
    from menger.models import build_policy

    started = clock()
    rt, env = config.runtime, config.env
    cores = os.cpu_count() or 1
    threads_before = torch.get_num_threads()
    probe_t = min(rt.unroll_length, PROBE_STEPS)
    probe = make_vec_env(env.id, 1, seed=0, kwargs=dict(env.kwargs), preset=env.preset, wrappers=env.wrappers,
                         multiagent=env.multiagent)
    spaces, rows = (probe.single_observation_space, probe.single_action_space), getattr(probe, "k", 1)
    probe.close()
    step_s: dict[int, float] = {}
    buffers = None  # the slot of the largest unroll timed: the learner's batches are cut from it
    try:
        torch.set_num_threads(1)  # as an actor runs (`run_actor`)
        for envs in sorted({-(-b // rows) * rows for b in PROBE_ENVS}):
            if step_s:  # would this size fit in the actors' share: its build, a warm-up and two unrolls?
                previous = max(step_s)
                guess = build_s + 3 * step_s[previous] * probe_t * envs / previous
                if clock() + guess > started + 0.35 * budget_s:
                    break
            began = clock()
            seconds, buffers = _time_actor(config, envs, spaces, probe_t, clock)
            step_s[envs] = seconds / probe_t
            build_s = clock() - began - 3 * seconds
        policy = build_policy(*spaces, config.model, config.algo, config.env.normalize)
        learner = make_learner(config, policy, torch.device("cpu"))
        most = rt.learner.threads or (cores if rt.launcher == "ray" else max(1, cores - 1))
        thread_counts = [most] + ([1] if most > 1 else [])  # the threads a run's learner gets first, then one
        learner_s = {}
        end = started + 0.75 * budget_s  # one update may run past its guess: the budget is the cap
        for index, threads in enumerate(thread_counts):
            if index and clock() + 3 * min(s for _, s in learner_s[most]) > end:
                break  # no time for it: the threads measured stand for every count
            torch.set_num_threads(threads)
            learner_s[threads] = _time_learner(learner, buffers, clock, end,
                                               started + 0.9 * budget_s if index == 0 else end)
    finally:
        torch.set_num_threads(threads_before)
    costs = Costs(cores=cores, launcher=rt.launcher, coordination=config.coordination,
                  unroll_length=rt.unroll_length, slots_per_actor=rt.coordination.slots_per_actor,
                  actor_step_s=step_s, learner_s=learner_s, learner_threads=rt.learner.threads,
                  bytes_per_env=buffers.bytes_per_env_slot * rt.unroll_length // probe_t,
                  memory_bytes=int(_memory_bytes() * MEMORY_SHARE), measured_s=clock() - started)
    return costs, rows


def _time_actor(config: ExperimentConfig, envs: int, spaces: tuple, steps: int, clock):
    """Seconds of an unroll of `steps` steps of `envs` envs (the faster of two, after a warm-up one: another
    job's burst on the machine counts less), and the slot it wrote."""
    from menger.runtime.actors import make_actor
    from menger.models import build_policy
    from menger.transport import UnrollSpec
    from menger.transport.shm import UnrollBuffers

    rt = config.runtime
    config = dataclasses.replace(config, runtime=dataclasses.replace(rt, actors=1, envs_per_actor=envs,
                                                                     unroll_length=steps))
    network = build_policy(*spaces, config.model, config.algo, config.env.normalize)
    buffers = UnrollBuffers(UnrollSpec(spaces[0], network.action_space, steps, envs, config.model.lstm_size), 1,
                            shared=False)
    actor = make_actor(0, 0, config, _ProbePort(buffers), seed=rt.seed)
    try:
        actor._fill(0)  # warm-up: first resets, allocations
        timed = []
        for _ in range(2):
            began = clock()
            actor._fill(0)
            timed.append(clock() - began)
        return min(timed), buffers
    finally:
        actor.envs.close()


def _time_learner(learner, buffers, clock, deadline: float, second_by: float) -> list:
    """[(N, seconds)] of updates on batches of 16, 64, 256, ... env columns cut from copies of the slot, as many
    sizes as fit before `deadline`; a second size (a line needs two) may run on to `second_by`. The first size
    warms the learner up with one update first; each figure is the fastest of its timed updates (two where time
    allows: another job's burst on the machine counts less). The time to copy the slots out of shared memory
    (the trainer's gather) is part of it."""
    steps, envs = buffers.spec.unroll_length, buffers.spec.envs_per_actor
    samples = []
    columns = 16
    while len(samples) < 6:
        warm_up = not samples
        if samples:  # the next size costs about 4x the last: two timed updates, or one, or none if it will not fit
            guess = 5 * samples[-1][1]  # 4x the frames, and a bigger batch may cost more per frame
            by = second_by if len(samples) == 1 else deadline
            timed_runs = 2 if clock() + 2 * guess <= deadline else 1 if clock() + guess <= by else 0
            if not timed_runs:
                break
        else:
            timed_runs = 2
        frames = steps * columns
        copies = -(-columns // envs)
        timed = []
        for run in range(timed_runs + warm_up):
            began = clock()
            batch = _columns(buffers.gather([0] * copies), columns)
            learner.update(batch, frames)
            timed.append(clock() - began)
            if run < timed_runs + warm_up - 1 and clock() + timed[-1] > deadline:
                break  # the machine is slower than guessed: what was timed stands
        samples.append((frames, min(timed[1:] if warm_up and len(timed) > 1 else timed)))
        if clock() >= deadline:
            break
        columns *= 4
    return samples


def _columns(batch: dict, columns: int) -> dict:
    """The first `columns` env columns of a time-major batch (every field's axis 1), contiguous as the trainer's
    gathered batches are."""
    return {key: _columns(value, columns) if isinstance(value, dict) else value[:, :columns].contiguous()
            for key, value in batch.items()}


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# ----- resolving a config ------------------------------------------------------------------------------------
def resolve(config: ExperimentConfig, budget_s: float = BUDGET_S,
            cluster_cpus=None) -> tuple[ExperimentConfig, Choice | None]:
    """`config` with its `auto` keys measured and picked (logged, each with its reason); unchanged (and None)
    when it has none. `cluster_cpus`: on a Ray cluster (`on_cluster`), a callable giving its CPUs now (the
    launcher layer's `menger.launch.ray.cluster_cpus`, handed down by `menger.api`)."""
    keys = config.auto_keys
    if not keys:
        return config, None
    rt = config.runtime
    log.info("auto-sizing %s: measuring this machine (at most %.0f s)", ", ".join(keys), budget_s)
    costs, rows = measure(config, budget_s)
    max_actors = pool = None
    if on_cluster(config):  # actors on the cluster's nodes: as many at once as its CPUs hold
        if cluster_cpus is None:
            raise ValueError("auto-sizing on a Ray cluster needs its CPUs: pass cluster_cpus")
        cpus = cluster_cpus()
        costs = dataclasses.replace(costs, actor_cores=actor_slots(cpus, rt.ray.actor_cpus))
        max_actors = min(costs.actor_cores, MAX_CLUSTER_ACTORS)
        log.info("auto-sizing: the Ray cluster has %g CPUs: %d actors of %g CPU(s) fit at once", cpus,
                 costs.actor_cores, rt.ray.actor_cpus)
    fixed = {name: None if getattr(rt, name) == "auto" else getattr(rt, name) for name in ("actors", "envs_per_actor")}
    units = rt.coordination.batch_unrolls
    layouts = candidates(costs, max_actors=max_actors, envs=ENVS, actors=fixed["actors"],
                         envs_per_actor=fixed["envs_per_actor"], batch_unrolls=None if units == "auto" else units,
                         rows_per_game=rows)
    choice = pick(costs, layouts, keys)
    if max_actors is not None and rt.actors == "auto":  # elastic: room for the actors of a cluster that grows
        pool = rt.ray.max_actors or max(2 * choice.layout.actors, MIN_POOL)
        pool = max(pool, choice.layout.actors)
        choice = dataclasses.replace(choice, pool=pool)
        log.info("auto-sizing: runtime.actors=%d actors allocated, %d started; more start as nodes join and some "
                 "are parked as nodes leave (runtime.ray.max_actors)", pool, choice.layout.actors)
    for line in choice.reasons:
        log.info("auto-sizing: %s", line)
    log.info("auto-sizing: measured in %.1f s", costs.measured_s)
    return choice.apply(config), choice


def on_cluster(config: ExperimentConfig) -> bool:
    """Actors on a Ray cluster's nodes (`runtime.ray.address`), whose CPUs may come and go."""
    return config.runtime.launcher == "ray" and config.runtime.ray.address is not None


def actor_slots(cpus: float, actor_cpus: float) -> int:
    """How many actors of `actor_cpus` CPUs fit on `cpus` at once (actors asking for no CPU: one per CPU)."""
    return max(1, int(cpus // actor_cpus) if actor_cpus > 0 else int(cpus))


def keep_saved(config: ExperimentConfig, saved: ExperimentConfig) -> ExperimentConfig:
    """`config`'s auto keys given the saved run's numbers (a resume keeps the layout it was started with)."""
    rt, old = config.runtime, saved.runtime
    coordination = dataclasses.replace(rt.coordination, batch_unrolls=_number(rt.coordination.batch_unrolls,
                                                                              old.coordination.batch_unrolls))
    runtime = dataclasses.replace(rt, actors=_number(rt.actors, old.actors), coordination=coordination,
                                  envs_per_actor=_number(rt.envs_per_actor, old.envs_per_actor))
    kept = dataclasses.replace(config, runtime=runtime)
    log.info("auto-sizing: resuming with the run's layout: %d actors x %d envs, batch_unrolls %s (not measured "
             "again)", runtime.actors, runtime.envs_per_actor, coordination.batch_unrolls)
    return kept


def _number(value, saved):
    return saved if value == "auto" else value


def read_report(run_dir: str | Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / REPORT_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_report(run_dir: str | Path, choice: Choice) -> Path:
    path = Path(run_dir) / REPORT_FILE
    path.write_text(json.dumps(choice.report(), indent=2))
    return path


# ----- adjusting during the run ------------------------------------------------------------------------------
def adjust_batch(batch_unrolls: int, capacity: int, learner_busy: float, queued: float,
                 lag_dropped: float) -> tuple[int, str] | None:
    """The new batch size and why, or None: one window's figures of an async run.

    `learner_busy`: share of the window the learner spent updating; `queued`: unrolls still waiting, on average,
    when a batch was taken; `lag_dropped`: share of the window's frames dropped as too old.

    * the learner falls behind (busy >= 90 % and unrolls queue or are dropped for lag): double the batch, up to
      the slots there are, so each update's fixed cost is paid for more frames and the queue goes in one update
      (fewer versions per frame: less lag);
    * the learner waits (busy < 50 %, nothing queued): halve the batch, so updates start sooner and lag shrinks.
    """
    figures = (f"learner busy {learner_busy:.0%} of the window, {queued:.1f} unrolls queued at each batch, "
               f"{lag_dropped:.1%} of frames dropped for policy lag")
    if learner_busy >= 0.9 and (queued >= 1.0 or lag_dropped > 0) and batch_unrolls < capacity:
        return min(capacity, 2 * batch_unrolls), f"the learner falls behind ({figures})"
    if learner_busy < 0.5 and queued < 0.5 and batch_unrolls > 1:
        return max(1, batch_unrolls // 2), f"the learner waits for unrolls ({figures})"
    return None


class BatchAdjuster(Observer):
    """An async run's `batch_unrolls: auto`, kept fitting during the run: every `window_s` seconds, the window's
    figures go to `adjust_batch`, and a new size goes to the coordinator (`AsyncCoordinator.resize_batch`),
    logged with its reason and appended to RUN_DIR/autosize.json."""

    def __init__(self, window_s: float = 10.0, clock=time.monotonic):
        self.window_s, self.clock = window_s, clock
        self.adjustments: list[dict] = []

    def on_start(self, trainer) -> None:
        self._open(trainer)

    def _open(self, trainer) -> None:
        self.window_start, self.busy, self.queued, self.batches = self.clock(), 0.0, 0, 0
        self.dropped_at = trainer.accounts.dropped.get("policy_lag", 0)
        self.produced_at = trainer.accounts.produced
        self._batch_at = None

    def on_batch(self, trainer, batch) -> None:
        self._batch_at = self.clock()
        self.queued += len(trainer.coordinator.pending)  # what is left after this batch was taken
        self.batches += 1

    def on_update(self, trainer, stats: dict) -> None:
        now = self.clock()
        if self._batch_at is not None:
            self.busy += now - self._batch_at
        if now - self.window_start < self.window_s:
            return
        coordinator, accounts = trainer.coordinator, trainer.accounts
        produced = accounts.produced - self.produced_at
        dropped = accounts.dropped.get("policy_lag", 0) - self.dropped_at
        capacity = coordinator.capacity()
        change = adjust_batch(coordinator.batch_unrolls, capacity, self.busy / (now - self.window_start),
                              self.queued / max(1, self.batches), dropped / produced if produced else 0.0)
        if change is not None:
            size, why = change
            old = coordinator.batch_unrolls
            coordinator.resize_batch(size)
            log.info("auto-sizing: runtime.coordination.batch_unrolls %d -> %d: %s", old, size, why)
            entry = {"wall_s": trainer.elapsed(), "batch_unrolls": [old, size], "reason": why}
            self.adjustments.append(entry)
            _append_adjustment(trainer.run_dir, entry)
        self._open(trainer)


def _append_adjustment(run_dir: Path, entry: dict) -> None:
    path = Path(run_dir) / REPORT_FILE
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    report.setdefault("adjustments", []).append(entry)
    path.write_text(json.dumps(report, indent=2))


# ----- an elastic run on a Ray cluster ------------------------------------------------------------------------
def costs_from_report(report: dict) -> Costs:
    """The `Costs` a run's autosize.json recorded (a resumed elastic run re-picks with them, without measuring)."""
    return Costs(cores=report["cores"], launcher=report["launcher"], coordination=report["coordination"],
                 unroll_length=report["unroll_length"], slots_per_actor=report.get("slots_per_actor", 1),
                 actor_step_s={int(b): s for b, s in report["actor_step_s"].items()},
                 learner_s={int(k): [tuple(x) for x in v] for k, v in report["learner_update_s"].items()},
                 measured_s=report.get("measured_s", 0.0), actor_cores=report.get("actor_cores", 0))


def actors_for(costs: Costs, slots: int, pool: int, envs_per_actor: int, batch_unrolls: int | None) -> Prediction:
    """The best actor count (at most `pool`, at most the `slots` actors the cluster's CPUs hold) for the run's envs
    per actor and batch size, by the start-up model with the cluster's new size."""
    costs = dataclasses.replace(costs, actor_cores=slots)
    layouts = candidates(costs, max_actors=max(1, min(pool, slots)), envs_per_actor=envs_per_actor,
                         batch_unrolls=batch_unrolls)
    return pick(costs, layouts).prediction


class ClusterWatcher(Observer):
    """Nodes joining or leaving an elastic run's Ray cluster (`runtime.actors: auto` with `runtime.ray.address`).

    At every metrics record (`log.interval_s`, while waiting too) the cluster's CPUs are read. When they changed,
    the actor count is picked again (`actors_for`: the start-up model, its measured costs, the actors that now
    fit), and actors are started (nodes joined) or parked (nodes left; the highest ids go first) with
    `ActorSupervisor.set_active`. Each change is logged with the figures behind it and appended to
    RUN_DIR/autosize.json.

    `cpus`: a callable giving the cluster's CPUs now (default: the launcher's `cluster_cpus`)."""

    def __init__(self, costs: Costs, *, actor_cpus: float, batch_unrolls: int | None, cpus=None):
        self.costs, self.actor_cpus, self.batch_unrolls, self._cpus = costs, actor_cpus, batch_unrolls, cpus
        self.adjustments: list[dict] = []

    def on_start(self, trainer) -> None:
        self.cpus = self._read(trainer)
        self._fit(trainer, self.cpus, "the run starts")

    def on_metrics(self, trainer, metrics: dict) -> None:
        cpus = self._read(trainer)
        if cpus is None or cpus == self.cpus:
            return
        why = (f"nodes joined: the cluster's CPUs went from {self.cpus:g} to {cpus:g}" if cpus > (self.cpus or 0)
               else f"nodes left: the cluster's CPUs went from {self.cpus:g} to {cpus:g}")
        self.cpus = cpus
        self._fit(trainer, cpus, why)

    def _read(self, trainer) -> float | None:
        read = self._cpus or getattr(trainer.launcher, "cluster_cpus", None)
        try:
            return float(read()) if read is not None else None
        except Exception as exc:  # noqa: BLE001 - the cluster's state service is briefly away: try again later
            log.warning("auto-sizing: could not read the Ray cluster's CPUs (%s); the actors stay as they are", exc)
            return None

    def _fit(self, trainer, cpus: float | None, why: str) -> None:
        if cpus is None:
            return
        supervisor, rt = trainer.supervisor, trainer.cfg.runtime
        slots = actor_slots(cpus, self.actor_cpus)
        best = actors_for(self.costs, slots, len(supervisor.actors), rt.envs_per_actor, self.batch_unrolls)
        old, new = supervisor.active, best.layout.actors
        if new == old:
            return
        supervisor.set_active(new)
        reason = (f"{why}; {slots} actors of {self.actor_cpus:g} CPU(s) fit, and {new} of {rt.envs_per_actor} envs "
                  f"are predicted to learn {best.frames_per_s:,.0f} frames/s (bound by the {best.bound})")
        log.info("auto-sizing: actors %d -> %d: %s", old, new, reason)
        entry = {"wall_s": trainer.elapsed(), "actors": [old, new], "cluster_cpus": cpus, "reason": reason}
        self.adjustments.append(entry)
        _append_adjustment(trainer.run_dir, entry)
