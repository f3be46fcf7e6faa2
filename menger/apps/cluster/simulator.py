"""The cluster itself: jobs wait, get placed, run and leave; time moves one step at a time.

Kept apart from the gymnasium wrapper so that heuristics, tests and the environment drive the same
mechanics. The loop that drives it::

    simulator.reset(jobs)
    while not (simulator.finished or simulator.time >= simulator.time_limit):
        if not simulator.schedule(slot):      # a placed job takes no time...
            reward = simulator.advance()      # ...anything else moves the clock
    simulator.episode_metrics()
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from menger.apps.cluster.config import ClusterConfig
from menger.apps.cluster.jobs import JobSet
from menger.apps.cluster.placement import NO_FIT, earliest_offset, earliest_offsets

NOT_DONE = np.iinfo(np.int64).max


class ClusterState(NamedTuple):
    """What a scheduler may look at. The arrays are views, valid until the next step.

    Attributes:
        time: current step.
        capacity: units per resource (``res_slot``).
        used: [T_h, d] units reserved at each of the next T_h steps.
        slot_present: [M] bool, the slot holds a waiting job.
        slot_duration: [M] its duration (0 when empty).
        slot_demand: [M, d] its demand (0 when empty).
        backlog_count: waiting jobs beyond the M slots.
        since_last_arrival: steps since a job last arrived.
    """

    time: int
    capacity: int
    used: np.ndarray
    slot_present: np.ndarray
    slot_duration: np.ndarray
    slot_demand: np.ndarray
    backlog_count: int
    since_last_arrival: int

    @property
    def num_slots(self) -> int:
        return len(self.slot_present)

    @property
    def void_action(self) -> int:
        return len(self.slot_present)

    def slot_offsets(self) -> np.ndarray:
        """[M] earliest start offset of each slot's job, ``NO_FIT`` for misfits and empty slots.

        An empty slot has duration 0, and no run of zero rows is ever found, so it needs no special case.
        """
        return earliest_offsets(self.used, self.slot_duration, self.slot_demand, self.capacity)


class ClusterSimulator:
    """Discrete-time cluster of d resources with ``res_slot`` units each and a T_h-step reservation view."""

    def __init__(self, config: ClusterConfig):
        self.config = config
        self.used = np.zeros((config.horizon, config.num_resources), dtype=np.int64)
        self.slot_job = np.full(config.num_slots, -1, dtype=np.int64)
        self.slot_duration = np.zeros(config.num_slots, dtype=np.int64)
        self.slot_demand = np.zeros((config.num_slots, config.num_resources), dtype=np.int64)
        self.backlog: deque[int] = deque()
        self.reset(JobSet(np.zeros(0, np.int64), np.zeros(0, np.int64),
                          np.zeros((0, config.num_resources), np.int64)))

    def reset(self, jobs: JobSet) -> None:
        self.jobs = jobs
        self.inverse_duration = 1.0 / np.maximum(jobs.duration, 1)
        self.completion = np.full(len(jobs), NOT_DONE, dtype=np.int64)
        self.used[:] = 0
        self.slot_job[:] = -1
        self.slot_duration[:] = 0
        self.slot_demand[:] = 0
        self.backlog.clear()
        self.time = 0
        self.arrived = 0
        self.placed = 0
        self.last_completion = 0
        self.last_arrival_time = 0
        self.busy_units = 0
        self.time_limit = self.config.time_limit or self._default_time_limit()
        self._admit_arrivals()

    def _default_time_limit(self) -> int:
        if len(self.jobs) == 0:
            return 1
        return int(self.jobs.arrival[-1] + self.jobs.duration.sum()) + self.config.horizon

    @property
    def finished(self) -> bool:
        return self.placed == len(self.jobs) and self.last_completion <= self.time

    @property
    def state(self) -> ClusterState:
        return ClusterState(self.time, self.config.res_slot, self.used, self.slot_job >= 0,
                            self.slot_duration, self.slot_demand, len(self.backlog),
                            self.time - self.last_arrival_time)

    def schedule(self, slot: int) -> bool:
        """Place the job in ``slot`` at its earliest fitting offset; False (nothing changes) if it cannot."""
        job = int(self.slot_job[slot]) if 0 <= slot < len(self.slot_job) else -1
        if job < 0:
            return False
        duration = int(self.jobs.duration[job])
        demand = self.jobs.demand[job]
        offset = earliest_offset(self.used, duration, demand, self.config.res_slot)
        if offset == NO_FIT:
            return False
        self.used[offset:offset + duration] += demand
        self.completion[job] = self.time + offset + duration
        self.last_completion = max(self.last_completion, int(self.completion[job]))
        self.placed += 1
        self._fill_slot(slot, self.backlog.popleft() if self.backlog else -1)
        return True

    def advance(self) -> float:
        """Move the clock one step; return -sum(1/T_j) over the jobs in the system during that step."""
        in_system = self.completion[:self.arrived] > self.time
        reward = -float(self.inverse_duration[:self.arrived][in_system].sum())
        self.busy_units += int(self.used[0].sum())
        self.used[:-1] = self.used[1:]
        self.used[-1] = 0
        self.time += 1
        self._admit_arrivals()
        return reward

    def _admit_arrivals(self) -> None:
        arrival = self.jobs.arrival
        while self.arrived < len(arrival) and arrival[self.arrived] <= self.time:
            self._enqueue(self.arrived)
            self.arrived += 1
            self.last_arrival_time = self.time

    def _enqueue(self, job: int) -> None:
        empty = np.flatnonzero(self.slot_job < 0)
        if len(empty):
            self._fill_slot(int(empty[0]), job)
        else:
            self.backlog.append(job)

    def _fill_slot(self, slot: int, job: int) -> None:
        self.slot_job[slot] = job
        if job < 0:
            self.slot_duration[slot] = 0
            self.slot_demand[slot] = 0
        else:
            self.slot_duration[slot] = self.jobs.duration[job]
            self.slot_demand[slot] = self.jobs.demand[job]

    def episode_metrics(self) -> dict:
        """Slowdown, completion time and utilisation so far.

        Jobs still in the system (only after truncation) count their time up to now, so that the
        return always equals minus the sum of these slowdowns.
        """
        count = self.arrived
        ended = np.minimum(self.completion[:count], self.time)
        in_system_time = ended - self.jobs.arrival[:count]
        slowdown = in_system_time * self.inverse_duration[:count]
        capacity_time = self.config.res_slot * self.config.num_resources * max(self.time, 1)
        return {
            "mean_slowdown": float(slowdown.mean()) if count else 0.0,
            "mean_completion_time": float(in_system_time.mean()) if count else 0.0,
            "utilisation": self.busy_units / capacity_time,
            "jobs_finished": int(np.sum(self.completion[:count] <= self.time)),
            "jobs_unfinished": int(len(self.jobs) - np.sum(self.completion[:count] <= self.time)),
            "sum_slowdown": float(slowdown.sum()),
        }
