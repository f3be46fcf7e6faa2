"""``GpuSharing-v0``: place each arriving task of a GPU-sharing workload on one of the nodes it fits.

An episode is one Monte-Carlo inflation run (``evaluate.py``) on a cluster of ``num_nodes`` nodes: a random
subset of the node file's (or synthetic ones), with tasks from the trace file (or synthetic) arriving until they
ask for ``ratio`` times the cluster's GPUs. The agent decides only where a choice exists: a task that fits one
node goes there, a task that fits none is dropped. A fractional task takes the GPU on the chosen node that FGD
would pick.

Observation: ``{"nodes": [num_nodes, FEATURES], "action_mask": [num_nodes]}``; each node's row describes it,
the task, and what placing the task there would do (``node_features``), including FGD's fragmentation
reduction and the best-fit and GPU-packing scores. Reward: minus the GPUs of the tasks dropped before the next
decision, in percent of the cluster's GPUs, so an episode's return is minus the share of the cluster's GPUs
that arrived and found no room. The final ``info`` holds ``allocation_at_100`` (the paper's figure at 100 %
arrived workload) and ``final_allocation``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from menger.apps.gpucluster.cluster import ClusterState, Task, task_list
from menger.apps.gpucluster.evaluate import INFLATION_RATIO, allocation_curve, inflated_order
from menger.apps.gpucluster.frag import TargetWorkload, target_workload
from menger.apps.gpucluster.policies import (MAX_CPU_MILLI, MAX_GPU_MILLI, MAX_SCORE,
                                             FragmentationGradientDescent, best_fit_scores, gpu_packing_scores,
                                             sigmoid_score)
from menger.apps.gpucluster.synthetic import synthetic_nodes, synthetic_tasks
from menger.apps.gpucluster.trace import MILLI, Nodes, Tasks, read_nodes, read_tasks
from menger.models.encoders import MASK_KEY

NODES_KEY = "nodes"
FEATURES = 27
FGD_SCORE_FEATURE = 14  # the node's FGD score / 100: the policy's prior reads it


@dataclass(frozen=True)
class GpuSharingConfig:
    """Settings of ``GpuSharing-v0``.

    Attributes:
        nodes: a node file in the trace's format, or "synthetic".
        trace: a task file (or a list of them, one drawn per episode), or "synthetic".
        num_nodes: nodes in each episode's cluster, drawn from the node file without replacement (0: all).
        ratio: arrivals stop when they would ask for more than this multiple of the cluster's GPUs.
        share_fraction, multi_gpu_fraction: synthetic tasks' mix; a pair [low, high] draws one per episode.
        synthetic_tasks: how many tasks a synthetic trace has (its target workload comes from them).
    """

    nodes: str = "synthetic"
    trace: str | tuple[str, ...] = "synthetic"
    num_nodes: int = 128
    ratio: float = INFLATION_RATIO
    share_fraction: float | tuple[float, float] = 0.38
    multi_gpu_fraction: float | tuple[float, float] = 0.01
    synthetic_tasks: int = 8000

    def __post_init__(self):
        if self.num_nodes < 0 or self.num_nodes == 1:
            raise ValueError(f"num_nodes must be 0 (all the node file's) or at least 2 (with one node there is no "
                             f"choice to make), got {self.num_nodes}.")
        if not 0 < self.ratio <= 3:
            raise ValueError(f"ratio must lie in (0, 3], got {self.ratio}.")
        if self.nodes == "synthetic" and self.num_nodes == 0:
            raise ValueError("a synthetic cluster needs num_nodes > 0.")
        for path in [self.nodes, *self.traces]:
            if path != "synthetic" and not Path(path).is_file():
                raise ValueError(f"{path!r} is not a file: pass the path of the trace's CSV file or 'synthetic'.")

    @property
    def traces(self) -> tuple[str, ...]:
        return (self.trace,) if isinstance(self.trace, str) else tuple(self.trace)


def node_features(state: ClusterState, task: Task, feasible: np.ndarray, fgd: FragmentationGradientDescent,
                  arrived_milli: int) -> tuple[np.ndarray, np.ndarray]:
    """([N, FEATURES] float32 rows, [F] FGD's GPU per feasible node) describing placing ``task`` on each node."""
    count = len(state)
    nodes = state.nodes
    rows = np.zeros((count, FEATURES), np.float32)
    gpu_total = state.gpu_left.sum(axis=1)
    rows[:, 0] = state.cpu_left / np.maximum(nodes.cpu_milli, 1)
    rows[:, 1] = state.cpu_left / MAX_CPU_MILLI
    rows[:, 2] = state.memory_left / np.maximum(nodes.memory_mib, 1)
    rows[:, 3] = gpu_total / MAX_GPU_MILLI
    rows[:, 4] = nodes.gpus / state.GPU_SLOTS
    rows[:, 5:13] = -np.sort(-state.gpu_left, axis=1) / MILLI
    rows[:, 13] = fgd.node_fragmentation(state, np.arange(count)) / MAX_GPU_MILLI
    reduction, gpus = fgd.reductions(state, task, feasible)
    rows[feasible, 14] = sigmoid_score(reduction) / MAX_SCORE
    rows[feasible, 15] = np.clip(reduction / MAX_GPU_MILLI, -1, 1)
    rows[feasible, 16] = best_fit_scores(state, task, feasible) / MAX_SCORE
    rows[feasible, 17] = gpu_packing_scores(state, task, feasible) / MAX_SCORE
    rows[:, 18] = (state.cpu_left - task.score_cpu) / MAX_CPU_MILLI
    rows[:, 19] = (gpu_total - task.gpu_demand) / MAX_GPU_MILLI
    rows[feasible, 20] = 1.0
    rows[:, 21] = task.score_cpu / MAX_CPU_MILLI
    rows[:, 22] = task.gpu_milli / MILLI
    rows[:, 23] = task.num_gpu / state.GPU_SLOTS
    rows[:, 24] = float(task.fractional)
    rows[:, 25] = state.gpu_milli_allocated / max(state.total_gpu_milli, 1)
    rows[:, 26] = arrived_milli / max(state.total_gpu_milli, 1) / INFLATION_RATIO
    return rows, gpus


class GpuSharingEnv(gym.Env):
    """One inflation run per episode; keyword arguments are ``GpuSharingConfig`` fields."""

    metadata = {"render_modes": []}

    def __init__(self, **kwargs):
        known = {field.name for field in fields(GpuSharingConfig)}
        for key in kwargs:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"GpuSharing-v0 has no setting {key!r}{hint}; its settings: "
                                 f"{', '.join(sorted(known))}.")
        if isinstance(kwargs.get("trace"), list):
            kwargs["trace"] = tuple(kwargs["trace"])
        for key in ("share_fraction", "multi_gpu_fraction"):
            if isinstance(kwargs.get(key), list):
                kwargs[key] = tuple(kwargs[key])
        self.config = GpuSharingConfig(**kwargs)
        self._node_file: Nodes | None = None if self.config.nodes == "synthetic" else read_nodes(self.config.nodes)
        self._trace_files: dict[str, tuple[Tasks, list[Task], TargetWorkload]] = {}
        size = self.config.num_nodes
        if self._node_file is not None and (size == 0 or size > len(self._node_file)):
            size = len(self._node_file)
        self._rows_shape = (size, FEATURES)
        self.action_space = spaces.Discrete(size)
        self.observation_space = spaces.Dict({
            NODES_KEY: spaces.Box(-np.inf, np.inf, (size, FEATURES), np.float32),
            MASK_KEY: spaces.Box(0, 1, (size,), np.int8),
        })

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        nodes = self._episode_nodes(rng)
        self.state = ClusterState(nodes)
        self._tasks, workload = self._episode_tasks(rng, nodes)
        self._order = inflated_order(self._tasks, self.state.total_gpu_milli, rng, self.config.ratio)
        self._fgd = FragmentationGradientDescent(workload, rank=np.arange(len(nodes)))
        self._next, self._arrived = 0, 0
        self._arrived_log: list[int] = []
        self._allocated_log: list[int] = []
        self._advance()
        return self._observe(), {}

    def step(self, action):
        node = int(action)
        if not 0 <= node < len(self.state) or not self._mask[node]:
            raise ValueError(f"node {action!r} cannot take the task: choose one where action_mask is 1 "
                             f"({int(self._mask.sum())} of {len(self.state)} nodes).")
        where = int(np.searchsorted(self._feasible, node))
        task = self._task
        gpus = np.array([self._gpus[where]]) if task.fractional else None
        self.state.place(node, task, gpus)
        self._log()
        dropped = self._advance()
        reward = -100.0 * dropped / self.state.total_gpu_milli
        terminated = self._task is None
        info = self.episode_metrics() if terminated else {}
        return self._observe(), reward, terminated, False, info

    def episode_metrics(self) -> dict[str, float]:
        curve = allocation_curve(np.array(self._arrived_log), np.array(self._allocated_log),
                                 self.state.total_gpu_milli, np.array([100]))
        return {"allocation_at_100": float(curve[0]),
                "final_allocation": 100.0 * self.state.gpu_milli_allocated / self.state.total_gpu_milli}

    def _advance(self) -> int:
        """Take arrivals until one has a choice of nodes; returns the milli-GPU dropped on the way."""
        dropped = 0
        self._task = None
        while self._next < len(self._order):
            task = self._tasks[self._order[self._next]]
            self._next += 1
            self._arrived += task.gpu_demand
            feasible = np.flatnonzero(self.state.feasible(task))
            if len(feasible) == 0:
                dropped += task.gpu_demand
                self._log()
            elif len(feasible) == 1:
                _, gpus = self._fgd.place(self.state, task, feasible)
                self.state.place(int(feasible[0]), task, gpus)
                self._log()
            else:
                self._task, self._feasible = task, feasible
                self._mask = np.zeros(len(self.state), np.int8)
                self._mask[feasible] = 1
                return dropped
        return dropped

    def _log(self) -> None:
        self._arrived_log.append(self._arrived)
        self._allocated_log.append(self.state.gpu_milli_allocated)

    def _observe(self) -> dict[str, np.ndarray]:
        if self._task is None:
            return {NODES_KEY: np.zeros(self._rows_shape, np.float32),
                    MASK_KEY: np.ones(len(self.state), np.int8)}
        rows, self._gpus = node_features(self.state, self._task, self._feasible, self._fgd, self._arrived)
        return {NODES_KEY: rows, MASK_KEY: self._mask.copy()}

    def _episode_nodes(self, rng: np.random.Generator) -> Nodes:
        config = self.config
        if self._node_file is None:
            return synthetic_nodes(config.num_nodes, rng)
        file = self._node_file
        # in random order: a greedy policy's first node among equals is then a random one, as in FGD's runs
        keep = rng.choice(len(file), size=min(config.num_nodes or len(file), len(file)), replace=False)
        return Nodes(tuple(file.names[i] for i in keep), file.cpu_milli[keep], file.memory_mib[keep],
                     file.gpus[keep], file.model[keep], file.models)

    def _episode_tasks(self, rng: np.random.Generator, nodes: Nodes) -> tuple[list[Task], TargetWorkload]:
        config = self.config
        path = config.traces[int(rng.integers(len(config.traces)))]
        if path == "synthetic":
            tasks = task_list(synthetic_tasks(config.synthetic_tasks, rng, _draw(config.share_fraction, rng),
                                              _draw(config.multi_gpu_fraction, rng)), nodes.models)
            return tasks, target_workload(tasks)
        if path not in self._trace_files:
            table = read_tasks(path)
            tasks = task_list(table, nodes.models)
            self._trace_files[path] = (table, tasks, target_workload(tasks))
        _, tasks, workload = self._trace_files[path]
        return tasks, workload


def _draw(value: float | tuple[float, float], rng: np.random.Generator) -> float:
    return float(value) if isinstance(value, (int, float)) else float(rng.uniform(value[0], value[1]))
