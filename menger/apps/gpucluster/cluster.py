"""A GPU-sharing cluster's free resources, and where a task may go.

Each node has CPU, memory and up to ``GPU_SLOTS`` GPUs of one model; each GPU is shared in milli-GPU units.
``gpu_left[n, g]`` is GPU ``g`` of node ``n``'s unallocated share (0 for a GPU the node does not have, which then
behaves as a GPU in full use). Tasks never leave: the evaluation measures how much of an arriving workload a
scheduler manages to place (Weng et al., ATC 2023, section 6.1).

A task fits a node when the node has the CPU and memory left, its GPU model is one the task allows, and it has
``num_gpu`` GPUs each with at least ``gpu_milli`` left. A fractional task takes its share of one GPU; a whole-GPU
task takes fully free GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from menger.apps.gpucluster.trace import MILLI, Nodes, Tasks

NONZERO_CPU_MILLI = 100  # Kubernetes' default CPU request, used for scores when a task asks for none


@dataclass(frozen=True)
class Task:
    """One task's request; ``models`` is a bit mask over ``Nodes.models`` (0: any model)."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    models: int = 0

    @property
    def gpu_demand(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def fractional(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def score_cpu(self) -> int:
        """The CPU that scoring and fragmentation see: Kubernetes counts a request of 0 as 100 milli."""
        return self.cpu_milli or NONZERO_CPU_MILLI

    @property
    def kind(self) -> int:
        """The GPU-clustering tag: 0 no GPU, 1 a shared GPU, 1 + k for k whole GPUs."""
        if self.num_gpu == 0:
            return 0
        return 1 if self.fractional else 1 + self.num_gpu


def model_mask(spec: frozenset[str], models: tuple[str, ...]) -> int:
    """The bit mask of the models in ``spec`` (0 when ``spec`` is empty: any model)."""
    return sum(1 << i for i, name in enumerate(models) if name in spec)


def task_list(tasks: Tasks, models: tuple[str, ...]) -> list[Task]:
    """``tasks`` as ``Task`` records, their GPU models resolved against the cluster's."""
    masks = {spec: model_mask(spec, models) for spec in set(tasks.gpu_spec)}
    return [Task(int(c), int(m), int(k), int(g), masks[s]) for c, m, k, g, s in
            zip(tasks.cpu_milli, tasks.memory_mib, tasks.num_gpu, tasks.gpu_milli, tasks.gpu_spec)]


class ClusterState:
    """Free resources of every node; ``place`` allocates, nothing is ever released."""

    GPU_SLOTS = 8

    def __init__(self, nodes: Nodes):
        if len(nodes) and int(nodes.gpus.max()) > self.GPU_SLOTS:
            raise ValueError(f"a node has {int(nodes.gpus.max())} GPUs; at most {self.GPU_SLOTS} are modelled.")
        self.nodes = nodes
        self.cpu_left = nodes.cpu_milli.copy()
        self.memory_left = nodes.memory_mib.copy()
        self.gpu_left = np.where(np.arange(self.GPU_SLOTS)[None, :] < nodes.gpus[:, None], MILLI, 0).astype(np.int64)
        self.model_bit = np.where(nodes.model >= 0, np.left_shift(1, np.maximum(nodes.model, 0)), 0)
        self.total_gpu_milli = MILLI * nodes.total_gpus
        self.version = np.zeros(len(nodes), np.int64)  # bumped on every change of a node, for caches
        self.kinds = np.zeros((len(nodes), 2 + self.GPU_SLOTS), np.int64)  # tasks on each node by Task.kind

    def __len__(self) -> int:
        return len(self.nodes)

    def copy(self) -> ClusterState:
        other = object.__new__(ClusterState)
        other.__dict__.update(self.__dict__)
        for name in ("cpu_left", "memory_left", "gpu_left", "version", "kinds"):
            setattr(other, name, getattr(self, name).copy())
        return other

    def accessible(self, task: Task) -> np.ndarray:
        """[N] bool: the node's GPU model is one the task allows (every node, for a task without GPUs)."""
        if task.num_gpu == 0 or task.models == 0:
            return np.ones(len(self), bool)
        return (self.model_bit & task.models) != 0

    def feasible(self, task: Task) -> np.ndarray:
        """[N] bool: the task fits the node now."""
        fits = (self.cpu_left >= task.cpu_milli) & (self.memory_left >= task.memory_mib)
        if task.num_gpu > 0:
            fits &= self.accessible(task)
            fits &= (self.gpu_left >= task.gpu_milli).sum(axis=1) >= task.num_gpu
        return fits

    def whole_gpus(self, node: int, task: Task) -> np.ndarray:
        """The GPUs a whole-GPU task takes on ``node``: its first ``num_gpu`` fully free ones."""
        return np.flatnonzero(self.gpu_left[node] >= MILLI)[:task.num_gpu]

    def place(self, node: int, task: Task, gpus: np.ndarray | list[int] | None = None) -> np.ndarray:
        """Allocate ``task`` on ``node`` (on ``gpus`` when given, else as ``whole_gpus`` or the first GPU it fits).

        Returns the GPUs used. Raises ``ValueError`` if it does not fit: nothing is changed then.
        """
        if not self.feasible(task)[node]:
            raise ValueError(f"task {task} does not fit node {self.nodes.names[node]}.")
        if task.num_gpu == 0:
            gpus = np.zeros(0, np.int64)
        elif gpus is None:
            gpus = (self.whole_gpus(node, task) if not task.fractional
                    else np.flatnonzero(self.gpu_left[node] >= task.gpu_milli)[:1])
        gpus = np.asarray(gpus, np.int64)
        if len(gpus) != task.num_gpu or len(set(gpus.tolist())) != len(gpus) or \
                (self.gpu_left[node, gpus] < task.gpu_milli).any():
            raise ValueError(f"GPUs {gpus.tolist()} of node {self.nodes.names[node]} cannot hold task {task}.")
        self.cpu_left[node] -= task.cpu_milli
        self.memory_left[node] -= task.memory_mib
        self.gpu_left[node, gpus] -= task.gpu_milli
        self.version[node] += 1
        self.kinds[node, task.kind] += 1
        return gpus

    @property
    def gpu_milli_allocated(self) -> int:
        return self.total_gpu_milli - int(self.gpu_left.sum())
