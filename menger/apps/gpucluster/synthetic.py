"""Synthetic GPU clusters and task traces shaped like the 2023 production trace, for training and tests.

The shapes are summary choices, not trace data: node types mixing many 8-GPU nodes with 2-GPU ones and a few
1- and 4-GPU machines of other models; tasks a mix of CPU-only ones, tasks sharing one GPU, whole-GPU tasks and
a few multi-GPU ones. ``share_fraction`` and ``multi_gpu_fraction`` move the mix, so that a policy can train on
variants and be measured on others.
"""

from __future__ import annotations

import numpy as np

from menger.apps.gpucluster.trace import MILLI, Nodes, Tasks

# (model, GPUs, cores, memory GiB, weight)
NODE_TYPES = (("G2", 8, 96, 384, 0.45), ("T4", 2, 104, 512, 0.32), ("P100", 2, 64, 256, 0.11),
              ("G3", 8, 128, 768, 0.03), ("V100M16", 4, 32, 128, 0.03), ("V100M32", 8, 96, 768, 0.02),
              ("V100M16", 1, 8, 32, 0.02), ("T4", 4, 96, 384, 0.02))
SHARES = (810, 470, 320, 650, 230, 460, 590, 160, 550, 220, 370, 110, 50)
SHARE_WEIGHTS = (0.35, 0.24, 0.11, 0.08, 0.05, 0.04, 0.03, 0.03, 0.03, 0.02, 0.015, 0.01, 0.005)
CORES_PER_GPU = (3.152, 4.0, 6.0, 8.0, 9.81, 11.3, 11.4, 11.908, 12.0, 16.0, 18.708, 24.2)
CPU_TASK_CORES = (4.0, 8.0, 12.5, 15.4, 16.5, 32.0)


def synthetic_nodes(count: int, rng: np.random.Generator) -> Nodes:
    """``count`` nodes drawn from ``NODE_TYPES``."""
    if count < 1:
        raise ValueError(f"a cluster needs at least one node, got {count}.")
    weights = np.array([kind[4] for kind in NODE_TYPES])
    kinds = [NODE_TYPES[i] for i in rng.choice(len(NODE_TYPES), size=count, p=weights / weights.sum())]
    models = tuple(sorted({kind[0] for kind in NODE_TYPES}))
    return Nodes(tuple(f"node-{i:05d}" for i in range(count)),
                 np.array([kind[2] * 1000 for kind in kinds], np.int64),
                 np.array([kind[3] * 1024 for kind in kinds], np.int64),
                 np.array([kind[1] for kind in kinds], np.int64),
                 np.array([models.index(kind[0]) for kind in kinds], np.int64), models)


def synthetic_tasks(count: int, rng: np.random.Generator, share_fraction: float = 0.38,
                    multi_gpu_fraction: float = 0.01, cpu_fraction: float = 0.13) -> Tasks:
    """``count`` tasks: CPU-only, sharing one GPU, one whole GPU or 2, 4 or 8 whole GPUs, in the given shares."""
    whole = 1.0 - share_fraction - multi_gpu_fraction - cpu_fraction
    if min(share_fraction, multi_gpu_fraction, cpu_fraction, whole) < 0:
        raise ValueError(f"task fractions must be non-negative and sum to at most 1: share {share_fraction}, "
                         f"multi-GPU {multi_gpu_fraction}, CPU-only {cpu_fraction}.")
    kind = rng.choice(4, size=count, p=[cpu_fraction, share_fraction, whole, multi_gpu_fraction])
    share_weights = np.array(SHARE_WEIGHTS) / sum(SHARE_WEIGHTS)
    num_gpu = np.select([kind == 0, kind == 1, kind == 2], [0, 1, 1], rng.choice([2, 4, 8], size=count))
    gpu_milli = np.where(kind == 1, rng.choice(SHARES, size=count, p=share_weights), MILLI)
    gpu_milli = np.where(num_gpu == 0, 0, gpu_milli)
    cores = np.where(num_gpu == 0, rng.choice(CPU_TASK_CORES, size=count),
                     rng.choice(CORES_PER_GPU, size=count) * np.maximum(num_gpu, 1))
    cpu = np.round(cores * 1000).astype(np.int64)
    memory = (cpu // 1000 * 2048).astype(np.int64)
    return Tasks(tuple(f"task-{i:06d}" for i in range(count)), cpu, memory, num_gpu.astype(np.int64),
                 gpu_milli.astype(np.int64), tuple(frozenset() for _ in range(count)))
