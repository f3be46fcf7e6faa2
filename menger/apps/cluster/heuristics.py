"""DeepRM's baseline schedulers, and the evaluation loop every scheduler is measured with.

A scheduler is any callable ``scheduler(state: ClusterState) -> action``. The environment calls it
repeatedly within a time step: each placed job leaves the clock where it is, and the scheduler returns
the void action once nothing more should start, which moves the clock on.

Like DeepRM's baselines, the heuristics only start jobs that fit *now* (offset 0): they are greedy,
work-conserving schedulers that never reserve resources in the future.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from menger.apps.cluster.env import ClusterSchedulingEnv
from menger.apps.cluster.simulator import ClusterState

Scheduler = Callable[[ClusterState], int]


def startable_now(state: ClusterState) -> np.ndarray:
    """[M] bool: the slot holds a job that can start at this step."""
    return state.slot_offsets() == 0


def shortest_job_first(state: ClusterState) -> int:
    """SJF: the shortest job that can start now (lowest slot on ties), else wait."""
    candidates = startable_now(state)
    if not candidates.any():
        return state.void_action
    return int(np.argmin(np.where(candidates, state.slot_duration, np.iinfo(np.int64).max)))


def packer(state: ClusterState) -> int:
    """Packer (Tetris): among jobs that can start now, the largest <available resources, demand>."""
    candidates = startable_now(state)
    if not candidates.any():
        return state.void_action
    available = state.capacity - state.used[0]
    alignment = state.slot_demand @ available
    return int(np.argmax(np.where(candidates, alignment, -1)))


class RandomScheduler:
    """Starts a uniformly random job among those that can start now; waits when none can."""

    def __init__(self, seed: int | None = None):
        self._rng = np.random.default_rng(seed)

    def __call__(self, state: ClusterState) -> int:
        candidates = np.flatnonzero(startable_now(state))
        if len(candidates) == 0:
            return state.void_action
        return int(self._rng.choice(candidates))


HEURISTICS: dict[str, Callable[[], Scheduler]] = {
    "sjf": lambda: shortest_job_first,
    "packer": lambda: packer,
    "random": lambda: RandomScheduler(seed=0),
}


def evaluate(policy: Scheduler, env_kwargs: dict, seeds: Iterable[int]) -> dict:
    """Run one episode per seed and pool the jobs.

    Returns mean slowdown and mean completion time over all jobs of all episodes, the standard error of
    that mean slowdown across episodes (each episode's workload is one independent draw), the mean
    utilisation over episodes, and the counts (episodes, jobs, unfinished jobs, truncated episodes).
    """
    env = ClusterSchedulingEnv(**env_kwargs)
    episodes = [_run_episode(env, policy, seed) for seed in seeds]
    if not episodes:
        raise ValueError("evaluate() needs at least one seed.")
    jobs = np.array([e["jobs_finished"] + e["jobs_unfinished"] for e in episodes], dtype=np.float64)
    return {
        "mean_slowdown": float(np.average([e["mean_slowdown"] for e in episodes], weights=jobs)),
        "slowdown_stderr": _pooled_stderr(np.array([e["mean_slowdown"] for e in episodes]), jobs),
        "mean_completion_time": float(np.average([e["mean_completion_time"] for e in episodes], weights=jobs)),
        "utilisation": float(np.mean([e["utilisation"] for e in episodes])),
        "episodes": len(episodes),
        "jobs": int(jobs.sum()),
        "unfinished_jobs": int(sum(e["jobs_unfinished"] for e in episodes)),
        "truncated_episodes": int(sum(e["truncated"] for e in episodes)),
    }


def _pooled_stderr(episode_means: np.ndarray, jobs: np.ndarray) -> float:
    """Standard error of the job-weighted mean of per-episode means (0 for a single episode)."""
    if len(episode_means) < 2:
        return 0.0
    weights = jobs / jobs.sum()
    mean = float(weights @ episode_means)
    spread = float(np.sum(weights * (episode_means - mean) ** 2)) * len(jobs) / (len(jobs) - 1)
    return float(np.sqrt(spread * np.sum(weights ** 2)))


def _run_episode(env: ClusterSchedulingEnv, policy: Scheduler, seed: int) -> dict:
    env.reset(seed=int(seed))
    while True:
        _, _, terminated, truncated, info = env.step(policy(env.state))
        if terminated or truncated:
            return {**info, "truncated": truncated}
