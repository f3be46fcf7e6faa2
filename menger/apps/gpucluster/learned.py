"""A trained ``GpuSharing-v0`` policy as a scheduler, measured by the same evaluation as the heuristics.

The policy sees every node of the cluster it schedules (its network scores nodes one by one, so a policy trained
on clusters of 64 nodes schedules 1,213), in the order of the run's random node rank: a greedy choice among equal
logits then falls to the first-ranked node, as the heuristics' ties do. A fractional task takes the GPU FGD
would pick on the chosen node, as in the environment.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from menger.apps.gpucluster.cluster import ClusterState, Task
from menger.apps.gpucluster.env import NODES_KEY, node_features
from menger.apps.gpucluster.frag import TargetWorkload
from menger.apps.gpucluster.policies import FragmentationGradientDescent, fullest_gpu
from menger.models.encoders import MASK_KEY


class LearnedScheduler:
    """Places tasks with ``policy.act`` (``menger.api.Policy``), greedily."""

    def __init__(self, policy, workload: TargetWorkload, rank: np.ndarray):
        self.policy = policy
        self.fgd = FragmentationGradientDescent(workload, rank)
        self.by_rank = np.argsort(rank)            # position -> node, first-ranked node first
        self.arrived_milli = 0

    def arrive(self, task: Task) -> None:
        self.arrived_milli += task.gpu_demand

    def place(self, state: ClusterState, task: Task, feasible: np.ndarray) -> tuple[int, np.ndarray]:
        if len(feasible) == 1:
            node = int(feasible[0])
            _, gpus = self.fgd.reductions(state, task, feasible)
        else:
            rows, gpus = node_features(state, task, feasible, self.fgd, self.arrived_milli)
            mask = np.zeros(len(state), np.int8)
            mask[feasible] = 1
            observation = {NODES_KEY: rows[self.by_rank][None], MASK_KEY: mask[self.by_rank][None]}
            node = int(self.by_rank[int(np.asarray(self.policy.act(observation, deterministic=True))[0])])
            if not mask[node]:
                raise RuntimeError(f"the policy chose node {node}, where the task does not fit; was it trained "
                                   "with action_mask?")
        if task.fractional:
            return node, np.array([gpus[int(np.searchsorted(feasible, node))]])
        return node, fullest_gpu(state, node, task)


def learned_factory(run_dir: str | Path, checkpoint: str | int = "latest"):
    """A factory for ``evaluate``: the run's policy, loaded once, scheduling with each run's node rank."""
    from menger.api import load_policy

    policy = load_policy(run_dir, checkpoint=checkpoint)

    def factory(workload: TargetWorkload, rank: np.ndarray, rng: np.random.Generator) -> LearnedScheduler:
        return LearnedScheduler(policy, workload, rank)

    return factory
