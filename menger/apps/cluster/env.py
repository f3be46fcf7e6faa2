"""``ClusterScheduling-v0``: DeepRM's multi-resource job scheduling as a gymnasium environment.

Action k < M places the job in slot k at its earliest fitting offset and leaves the clock where it is,
so several jobs can start in one time step. The void action M, an empty slot or a job that does not fit
moves the clock one step, and only then is there a reward: -sum(1/T_j) over the jobs in the system, so an
episode's return is minus the sum of the jobs' slowdowns.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

from menger.apps.cluster.config import ClusterConfig
from menger.apps.cluster.jobs import read_trace, sample_jobs
from menger.apps.cluster.observation import ImageEncoder, observation_space, observe
from menger.apps.cluster.simulator import ClusterSimulator, ClusterState


class ClusterSchedulingEnv(gym.Env):
    """Schedules a seeded (or replayed) sequence of jobs; keyword arguments are ``ClusterConfig`` fields.

    The episode ends once all ``num_jobs`` jobs have arrived and finished (terminated), or when time
    reaches ``time_limit`` (truncated). The final ``info`` holds ``mean_slowdown``,
    ``mean_completion_time``, ``utilisation``, ``jobs_finished`` and ``jobs_unfinished``.
    """

    metadata = {"render_modes": []}

    def __init__(self, **kwargs):
        self.config = ClusterConfig.from_kwargs(kwargs)
        self._trace_jobs = read_trace(self.config.trace, self.config) if self.config.trace else None
        self._simulator = ClusterSimulator(self.config)
        self._encoder = ImageEncoder(self.config)
        self.action_space = spaces.Discrete(self.config.num_slots + 1)
        self.observation_space = observation_space(self.config)

    @property
    def state(self) -> ClusterState:
        """The cluster as a scheduler sees it (what the heuristics take)."""
        return self._simulator.state

    @property
    def simulator(self) -> ClusterSimulator:
        return self._simulator

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        jobs = self._trace_jobs if self._trace_jobs is not None else sample_jobs(self.config, self.np_random)
        self._simulator.reset(jobs)
        return observe(self._encoder, self._simulator.state), {}

    def step(self, action):
        slot = int(action)
        if slot != action or not 0 <= slot <= self.config.num_slots:
            raise ValueError(f"Action {action!r} is outside Discrete({self.action_space.n}): use 0..."
                             f"{self.config.num_slots - 1} for a job slot or {self.config.num_slots} to wait.")
        simulator = self._simulator
        reward = 0.0 if simulator.schedule(slot) else simulator.advance()
        terminated = simulator.finished
        truncated = not terminated and simulator.time >= simulator.time_limit
        info = simulator.episode_metrics() if terminated or truncated else {}
        return observe(self._encoder, simulator.state), reward, terminated, truncated, info
