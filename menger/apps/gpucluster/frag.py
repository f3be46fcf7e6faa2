"""GPU fragmentation of a node against a target workload (Weng et al., ATC 2023, section 4).

A node's free GPU share is a *fragment* for a task class when that class cannot use it: all of it when the
class cannot be placed on the node (too little CPU, the wrong GPU model, too few GPUs with enough left, or no
GPU asked for), and otherwise the share left on GPUs whose remainder is below the class's ``gpu_milli``. A
node's fragmentation is the expectation of that amount over the target workload's classes, weighted by how often
each class occurs. FGD places a task where this expectation grows least.

The target workload is the trace's most frequent task shapes: tasks grouped by (CPU, number of GPUs, share per
GPU, allowed models), counted, sorted by count, and the most frequent kept until they hold ``popularity`` (95 %) of the
tasks; their frequencies are renormalised to sum to one. Tasks without GPUs are classes too (every free GPU is a
fragment to them), as in the paper's experiments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from menger.apps.gpucluster.cluster import Task

POPULARITY = 0.95  # the share of tasks the typical shapes cover, as the paper's experiments set it
SHAPES_PER_STEP = 1


@dataclass(frozen=True)
class TargetWorkload:
    """Task classes and how often each occurs; arrays are indexed by class."""

    cpu_milli: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    models: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.count)

    @property
    def weight(self) -> np.ndarray:
        """Each class's frequency; they sum to one."""
        return self.count / self.count.sum()


def target_workload(tasks: list[Task], popularity: float = POPULARITY, include_cpu_tasks: bool = True
                    ) -> TargetWorkload:
    """The most frequent task shapes of ``tasks`` covering ``popularity`` of them, with normalised weights."""
    if not 0 < popularity <= 1:
        raise ValueError(f"popularity must lie in (0, 1], got {popularity}.")
    counts = Counter((t.score_cpu, t.gpu_milli, t.num_gpu, t.models) for t in tasks
                     if include_cpu_tasks or t.num_gpu > 0)
    if not counts:
        raise ValueError("the workload has no task that asks for a GPU: fragmentation is undefined.")
    total = sum(counts.values())
    # most frequent first; equal counts larger shape first, as the reference simulator sorts them
    shapes = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
    kept, covered = 0, 0
    while covered < popularity * total and kept < len(shapes):
        step_end = min(kept + SHAPES_PER_STEP, len(shapes))
        covered += sum(count for _, count in shapes[kept:step_end])
        kept = step_end
    shapes = shapes[:kept]
    columns = np.array([shape for shape, _ in shapes], np.int64).reshape(-1, 4)
    count = np.array([count for _, count in shapes], np.int64)
    return TargetWorkload(cpu_milli=columns[:, 0].copy(), num_gpu=columns[:, 2].copy(),
                          gpu_milli=columns[:, 1].copy(), models=columns[:, 3].copy(), count=count)


def fragmentation(cpu_left: np.ndarray, gpu_left: np.ndarray, model_bit: np.ndarray,
                  workload: TargetWorkload) -> np.ndarray:
    """[M] expected GPU fragment, in milli-GPU, of M node states (``gpu_left`` is [M, G]).

    The sum over classes is taken in whole numbers (fragment times count) and divided once, so a node's value
    does not depend on which other states it is computed beside, and two states with the same fragments give
    exactly the same value: FGD's score of a change that moves no fragment is then exactly 50, not 49 or 50
    by rounding.
    """
    total = gpu_left.sum(axis=-1)                                        # [M]
    below = gpu_left[:, None, :] < workload.gpu_milli[None, :, None]     # [M, K, G]
    partial = (gpu_left[:, None, :] * below).sum(axis=-1)                # [M, K]: share on GPUs too full
    enough_gpus = (gpu_left.shape[-1] - below.sum(axis=-1)) >= workload.num_gpu[None, :]
    accessible = (workload.models[None, :] == 0) | ((model_bit[:, None] & workload.models[None, :]) != 0)
    placeable = (enough_gpus & accessible & (cpu_left[:, None] >= workload.cpu_milli[None, :])
                 & (workload.gpu_milli[None, :] > 0))
    fragment = np.where(placeable, partial, total[:, None])               # [M, K]
    return (fragment @ workload.count) / workload.count.sum()
