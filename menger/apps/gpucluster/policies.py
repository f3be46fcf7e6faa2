"""The schedulers of the FGD paper's evaluation (Weng et al., ATC 2023, section 6), as its simulator runs them.

Each heuristic scores every node the task fits as an integer from 0 to 100 (as Kubernetes score plugins do) and
the task goes to the highest; ties go to the node that comes first in a random order of the nodes drawn once per
run (``rank``). The GPUs a task takes on that node: a whole-GPU task the lowest-numbered free ones; a fractional
task the fullest GPU it fits on (``best``), a random one it fits on (random-fit), or for FGD the one that leaves
the least fragmentation.

- ``random``: a uniformly random node among those the task fits.
- ``best-fit``: the node left with the least CPU and GPU, each as a share of the largest node's (128 cores,
  8 GPUs), weighted equally.
- ``dot-product``: the node whose free (CPU, GPU) vector, on the same scale, has the smallest dot product with
  the task's request (Tetris-style alignment; Grandl et al., SIGCOMM 2014).
- ``gpu-packing``: partially used GPUs first, then partially used nodes, then idle ones.
- ``gpu-clustering``: nodes that already run tasks of the same kind (shared GPU, 1, 2, 4, 8 GPUs) first.
- ``fgd``: the node, and GPU, where the cluster's expected fragmentation against the target workload grows
  least (``frag.fragmentation``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from menger.apps.gpucluster.cluster import ClusterState, Task
from menger.apps.gpucluster.frag import TargetWorkload, fragmentation
from menger.apps.gpucluster.trace import MILLI

MAX_CPU_MILLI = 128_000  # the largest node's CPU and GPU, the scale of best-fit's and dot-product's vectors
MAX_GPU_MILLI = 8 * MILLI
MAX_SCORE = 100


class Scheduler(Protocol):
    """Places one task: returns (node, GPUs) among the ``feasible`` nodes (indices, at least one)."""

    def place(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[int, np.ndarray]: ...


def first_ranked(feasible: np.ndarray, scores: np.ndarray, rank: np.ndarray) -> int:
    """Index into ``feasible`` of the highest score; among equals, the node ranked first."""
    best = scores == scores.max()
    candidates = np.flatnonzero(best)
    return int(candidates[np.argmin(rank[feasible[candidates]])])


def fullest_gpu(state: ClusterState, node: int, task: Task) -> np.ndarray:
    """The GPUs a task takes under ``best`` selection: a fractional task the fullest GPU it fits on."""
    if task.num_gpu == 0:
        return np.zeros(0, np.int64)
    if not task.fractional:
        return state.whole_gpus(node, task)
    left = state.gpu_left[node]
    return np.array([int(np.argmin(np.where(left >= task.gpu_milli, left, MILLI + 1)))])


class ScoringScheduler:
    """A heuristic given by its integer node scores; GPUs chosen as ``fullest_gpu`` does."""

    def __init__(self, score: Callable[[ClusterState, Task, np.ndarray], np.ndarray], rank: np.ndarray):
        self.score, self.rank = score, rank

    def place(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[int, np.ndarray]:
        node = int(feasible[0]) if len(feasible) == 1 else \
            int(feasible[first_ranked(feasible, self.score(state, task, feasible), self.rank)])
        return node, fullest_gpu(state, node, task)


class RandomFit:
    """A uniformly random node the task fits, and a uniformly random GPU on it that the task fits."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def place(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[int, np.ndarray]:
        node = int(feasible[self.rng.integers(len(feasible))]) if len(feasible) > 1 else int(feasible[0])
        if not task.fractional:
            return node, fullest_gpu(state, node, task)
        fitting = np.flatnonzero(state.gpu_left[node] >= task.gpu_milli)
        return node, fitting[self.rng.integers(len(fitting))][None]


def best_fit_scores(state: ClusterState, task: Task, feasible: np.ndarray) -> np.ndarray:
    cpu_after = (state.cpu_left[feasible] - task.score_cpu) / MAX_CPU_MILLI
    gpu_after = (state.gpu_left[feasible].sum(axis=1) - task.gpu_demand) / MAX_GPU_MILLI
    return np.trunc((1.0 - (0.5 * cpu_after + 0.5 * gpu_after)) * MAX_SCORE)


def dot_product_scores(state: ClusterState, task: Task, feasible: np.ndarray) -> np.ndarray:
    dot = (state.cpu_left[feasible] / MAX_CPU_MILLI) * (task.score_cpu / MAX_CPU_MILLI) \
        + (state.gpu_left[feasible].sum(axis=1) / MAX_GPU_MILLI) * (task.gpu_demand / MAX_GPU_MILLI)
    return np.trunc(MAX_SCORE * (1.0 - dot / 2))


def gpu_packing_scores(state: ClusterState, task: Task, feasible: np.ndarray) -> np.ndarray:
    """Idle node: 33 - GPUs; the task needs idle GPUs on a used node: 50 - those GPUs (at least 33); it fits on
    used GPUs alone: 100 - a tenth of their free share in percent (at least 50)."""
    if task.num_gpu == 0:
        return np.zeros(len(feasible))
    left = state.gpu_left[feasible]
    gpus = state.nodes.gpus[feasible]
    idle = (left >= MILLI).sum(axis=1)
    order = np.argsort(left, axis=1, kind="stable")                     # fullest GPU first
    ordered = np.take_along_axis(left, order, axis=1)
    exists = np.take_along_axis(np.arange(left.shape[1])[None, :] < gpus[:, None], order, axis=1)
    usable = exists & (ordered >= task.gpu_milli)
    taken = usable & (np.cumsum(usable, axis=1) <= task.num_gpu)
    idle_taken = (taken & (ordered == MILLI)).sum(axis=1)
    free_percent_tenths = ((np.where(taken, ordered, 0) * 100) // MILLI).sum(axis=1) // 10
    return np.where(idle == gpus, np.maximum(MAX_SCORE // 3 - idle, idle),
                    np.where(idle_taken > 0, np.maximum(MAX_SCORE // 2 - idle_taken, MAX_SCORE // 3),
                             np.maximum(MAX_SCORE - free_percent_tenths, MAX_SCORE // 2))).astype(np.float64)


def gpu_clustering_scores(state: ClusterState, task: Task, feasible: np.ndarray) -> np.ndarray:
    """Nodes running only this kind of task score 75-100, mixed with it 50-75, idle 25-50, others 0-25; within
    a band, the fuller node first."""
    if task.num_gpu == 0:
        return np.zeros(len(feasible))
    kinds = state.kinds[feasible, 1:] > 0                              # tasks with GPUs, by kind
    fill = (MAX_SCORE // 4) * (MAX_GPU_MILLI - state.gpu_left[feasible].sum(axis=1)) // MAX_GPU_MILLI
    same = kinds[:, task.kind - 1]
    count = kinds.sum(axis=1)
    band = np.where(same, np.where(count == 1, 3, 2), np.where(count == 0, 1, 0))
    return (fill + band * (MAX_SCORE // 4)).astype(np.float64)


def sigmoid_score(reduction: np.ndarray) -> np.ndarray:
    """FGD's node score: 100 * sigmoid(fragmentation reduction in GPUs), truncated to an integer."""
    return np.trunc(1.0 / (1.0 + np.exp(-reduction / MILLI)) * MAX_SCORE)


class FragmentationGradientDescent:
    """FGD: the node and GPU where the expected fragmentation grows least (its score is 100 * sigmoid of the
    reduction, truncated, so near-equal nodes tie and go by rank).

    A node's score for a task shape is kept until the node changes, so a decision costs the nodes that
    changed since that shape was last placed, not the whole cluster. The cache follows one ``ClusterState``
    (its ``version`` counters): use one scheduler per state, as ``evaluate`` does.
    """

    def __init__(self, workload: TargetWorkload, rank: np.ndarray):
        self.workload, self.rank = workload, rank
        self._cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._frag_version = np.zeros(0, np.int64)
        self._frag = np.zeros(0)

    def node_fragmentation(self, state: ClusterState, nodes: np.ndarray) -> np.ndarray:
        """Current fragmentation of ``nodes``, recomputed only for nodes that changed."""
        if len(self._frag) != len(state):
            self._frag = np.zeros(len(state))
            self._frag_version = np.full(len(state), -1)
        stale = nodes[self._frag_version[nodes] != state.version[nodes]]
        if len(stale):
            self._frag[stale] = fragmentation(state.cpu_left[stale], state.gpu_left[stale],
                                              state.model_bit[stale], self.workload)
            self._frag_version[stale] = state.version[stale]
        return self._frag[nodes]

    def scores(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(score [F], GPU [F]) per feasible node: its best score and, for a fractional task, the GPU giving it."""
        reduction, gpu = self.reductions(state, task, feasible)
        return sigmoid_score(reduction), gpu

    def reductions(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(fragmentation reduction [F] in milli-GPU, GPU [F]) per feasible node, at the GPU FGD would use."""
        key = (task.score_cpu, task.num_gpu, task.gpu_milli)
        if key not in self._cache:
            self._cache[key] = (np.full(len(state), -1), np.zeros(len(state)), np.zeros(len(state), np.int64))
        version, reduction, gpu = self._cache[key]
        stale = feasible[version[feasible] != state.version[feasible]]
        if len(stale):
            reduction[stale], gpu[stale] = self._reduction(state, task, stale)
            version[stale] = state.version[stale]
        return reduction[feasible], gpu[feasible]

    def _reduction(self, state: ClusterState, task: Task, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        before = self.node_fragmentation(state, nodes)
        cpu_after = state.cpu_left[nodes] - task.score_cpu
        left = state.gpu_left[nodes]
        if not task.fractional:
            after_left = left.copy()
            if task.num_gpu:
                idle = after_left >= MILLI
                take = idle & (np.cumsum(idle, axis=1) <= task.num_gpu)
                after_left[take] -= MILLI
            after = fragmentation(cpu_after, after_left, state.model_bit[nodes], self.workload)
            return before - after, np.zeros(len(nodes), np.int64)
        slots = left.shape[1]
        choices = np.repeat(left[:, None, :], slots, axis=1)                       # [M, G choice, G]
        diagonal = np.arange(slots)
        choices[:, diagonal, diagonal] -= task.gpu_milli
        after = fragmentation(np.repeat(cpu_after, slots), choices.reshape(-1, slots),
                              np.repeat(state.model_bit[nodes], slots), self.workload).reshape(-1, slots)
        reduction = before[:, None] - after
        score = np.where(left >= task.gpu_milli, sigmoid_score(reduction), -1.0)
        best = np.argmax(score, axis=1)                                            # first GPU among equals
        rows = np.arange(len(nodes))
        return reduction[rows, best], best

    def place(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[int, np.ndarray]:
        scores, gpus = self.scores(state, task, feasible)
        choice = 0 if len(feasible) == 1 else first_ranked(feasible, scores, self.rank)
        node = int(feasible[choice])
        if task.fractional:
            return node, np.array([gpus[choice]])
        return node, fullest_gpu(state, node, task)


HEURISTICS = ("random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd")


def make_scheduler(name: str, workload: TargetWorkload, rank: np.ndarray, rng: np.random.Generator) -> Scheduler:
    """The heuristic ``name`` (one of ``HEURISTICS``), breaking ties by ``rank``."""
    if name == "random":
        return RandomFit(rng)
    if name == "fgd":
        return FragmentationGradientDescent(workload, rank)
    scores = {"best-fit": best_fit_scores, "dot-product": dot_product_scores,
              "gpu-packing": gpu_packing_scores, "gpu-clustering": gpu_clustering_scores}
    if name not in scores:
        raise ValueError(f"unknown scheduler {name!r}; choose one of {', '.join(HEURISTICS)}.")
    return ScoringScheduler(scores[name], rank)
