"""The FGD paper's evaluation: Monte-Carlo workload inflation and the GPU allocation curve (section 6.1).

One run: the trace's tasks arrive in a random order, followed by tasks drawn from the trace with replacement
until the requested GPUs would pass ``ratio`` (1.3) times the cluster's GPUs; each is placed by the scheduler or
dropped if it fits nowhere; nothing leaves. After every arrival the run records the GPU share requested so far
(the arrived workload) and the share allocated. The curve gives, at each whole percent of arrived workload, the
mean allocation ratio of the arrivals at that percent, as the paper's scripts compute it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from menger.apps.gpucluster.cluster import ClusterState, Task
from menger.apps.gpucluster.frag import TargetWorkload
from menger.apps.gpucluster.policies import Scheduler, make_scheduler

INFLATION_RATIO = 1.3
CURVE_PERCENTS = np.arange(0, 131)


def inflated_order(tasks: list[Task], total_gpu_milli: int, rng: np.random.Generator,
                   ratio: float = INFLATION_RATIO) -> list[int]:
    """Indices into ``tasks`` in arrival order: all of them shuffled, then draws with replacement until the next
    draw's GPUs would take the requested total past ``ratio`` times the cluster's."""
    if ratio <= 0:
        raise ValueError(f"the inflation ratio must be positive, got {ratio}.")
    demand = np.array([task.gpu_demand for task in tasks], np.int64)
    order = rng.permutation(len(tasks)).tolist()
    requested, target = int(demand.sum()), ratio * total_gpu_milli
    if requested > target:  # the trace alone asks for more: arrivals stop where the target is reached
        cut = int(np.searchsorted(np.cumsum(demand[order]), target, side="right"))
        return order[:cut]
    while True:
        draws = rng.integers(len(tasks), size=1024)
        for index in draws.tolist():
            if requested + demand[index] > target:
                return order
            requested += int(demand[index])
            order.append(index)


@dataclass(frozen=True)
class RunRecord:
    """One run: after each arrival, milli-GPU requested so far and allocated; and whether it was placed."""

    arrived_milli: np.ndarray
    allocated_milli: np.ndarray
    placed: np.ndarray
    total_gpu_milli: int
    seconds: float

    def allocation_at(self, percents: np.ndarray = CURVE_PERCENTS) -> np.ndarray:
        """Mean allocation ratio (%) of the arrivals at each arrived-workload percent (NaN where none)."""
        return allocation_curve(self.arrived_milli, self.allocated_milli, self.total_gpu_milli, percents)


def run(state: ClusterState, tasks: list[Task], order: list[int], scheduler: Scheduler) -> RunRecord:
    """Place ``tasks[order]`` one after another on ``state`` (changed in place)."""
    arrived = np.zeros(len(order), np.int64)
    allocated = np.zeros(len(order), np.int64)
    placed = np.zeros(len(order), bool)
    requested, in_use = 0, state.gpu_milli_allocated
    arrive = getattr(scheduler, "arrive", None)  # a scheduler that wants to see every arrival, placed or not
    start = time.perf_counter()
    for step, index in enumerate(order):
        task = tasks[index]
        requested += task.gpu_demand
        if arrive is not None:
            arrive(task)
        feasible = np.flatnonzero(state.feasible(task))
        if len(feasible):
            node, gpus = scheduler.place(state, task, feasible)
            state.place(node, task, gpus)
            in_use += task.gpu_demand
            placed[step] = True
        arrived[step], allocated[step] = requested, in_use
    return RunRecord(arrived, allocated, placed, state.total_gpu_milli, time.perf_counter() - start)


def allocation_curve(arrived_milli: np.ndarray, allocated_milli: np.ndarray, total_gpu_milli: int,
                     percents: np.ndarray = CURVE_PERCENTS) -> np.ndarray:
    """The paper's discretisation: arrivals binned by arrived workload rounded to a whole percent (half to even);
    a percent with no arrival takes those within one percent; NaN if still none."""
    arrive = np.round(arrived_milli / total_gpu_milli * 100)
    alloc = np.round(allocated_milli / total_gpu_milli * 100, 2)
    curve = np.full(len(percents), np.nan)
    for i, percent in enumerate(percents):
        values = alloc[arrive == percent]
        if not len(values):
            values = alloc[(arrive >= percent - 1) & (arrive <= percent + 1)]
        if len(values):
            curve[i] = round(float(values.mean()), 2)
    return curve


def node_rank(count: int, rng: np.random.Generator) -> np.ndarray:
    """A random priority of the nodes, drawn once per run, that breaks ties between equal scores."""
    return rng.permutation(count)


SchedulerFactory = Callable[[TargetWorkload, np.ndarray, np.random.Generator], Scheduler]


def evaluate(state: ClusterState, tasks: list[Task], workload: TargetWorkload, scheduler: str | SchedulerFactory,
             seed: int, ratio: float = INFLATION_RATIO) -> RunRecord:
    """One inflation run of ``scheduler`` (a heuristic's name, or a factory taking the target workload, the node
    rank and a generator) from a copy of ``state``: order, node ranks and the scheduler's own draws all come
    from ``seed``."""
    rng = np.random.default_rng(seed)
    order = inflated_order(tasks, state.total_gpu_milli, rng, ratio)
    rank = node_rank(len(state), rng)
    factory = partial(make_scheduler, scheduler) if isinstance(scheduler, str) else scheduler
    return run(state.copy(), tasks, order, factory(workload, rank, rng))
