"""Job sequences: sampled from DeepRM's distributions, or replayed from a user's CSV trace.

A whole episode's jobs are drawn at reset, so the seed alone fixes them: the agent's actions never
change which jobs arrive, and a held-out evaluation seed is a held-out workload.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from menger.apps.cluster.config import ClusterConfig


class TraceError(ValueError):
    """A job trace cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class JobSet:
    """Jobs of one episode, sorted by arrival time.

    Attributes:
        arrival: [N] time step at which each job becomes visible.
        duration: [N] T_j, time steps the job runs once started.
        demand: [N, d] units of each resource it holds while running.
    """

    arrival: np.ndarray
    duration: np.ndarray
    demand: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival)


def sample_jobs(config: ClusterConfig, rng: np.random.Generator) -> JobSet:
    """Draw ``config.num_jobs`` jobs: arrivals at ``config.episode_arrival_rate``, DeepRM's sizes."""
    count = config.num_jobs
    rate = config.episode_arrival_rate(rng)
    is_short = rng.random(count) < config.short_job_fraction
    duration = np.where(is_short, _uniform(rng, config.short_duration, count),
                        _uniform(rng, config.long_duration, count))
    demand = _uniform(rng, config.other_demand, (count, config.num_resources))
    dominant = rng.integers(config.num_resources, size=count)
    demand[np.arange(count), dominant] = _uniform(rng, config.dominant_demand, count)
    return JobSet(_arrival_times(rate, count, rng), duration, demand)


def _uniform(rng: np.random.Generator, bounds: tuple[int, int], size) -> np.ndarray:
    return rng.integers(bounds[0], bounds[1] + 1, size=size, dtype=np.int64)


def _arrival_times(rate: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """Arrival steps: floor(rate) jobs per step plus one more with probability frac(rate)."""
    whole, fraction = divmod(rate, 1.0)
    per_step: list[np.ndarray] = []
    arrived = 0
    while arrived < count:
        chunk = int(whole) + (rng.random(max(16, int(2 * (count - arrived) / rate))) < fraction)
        per_step.append(chunk)
        arrived += int(chunk.sum())
    counts = np.concatenate(per_step)
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)[:count]


def offered_load(jobs: JobSet, res_slot: int) -> float:
    """Work per step over capacity across the arrival window, averaged over resources (DeepRM's load)."""
    window = int(jobs.arrival.max()) + 1
    work = (jobs.duration[:, None] * jobs.demand).sum(axis=0)
    return float(np.mean(work / res_slot / window))


def read_trace(path: str | Path, config: ClusterConfig) -> JobSet:
    """Read a CSV of jobs: ``arrival, duration, demand_1 .. demand_d``, one job per line.

    A first line whose first field is not a number is taken as a header. Times are integer steps; jobs
    may come in any order and are replayed sorted by arrival (ties keep file order).
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"Trace file {str(path)!r} does not exist; pass trace= the path of a CSV file.")
    with path.open(newline="") as handle:
        rows = [(number, row) for number, row in enumerate(csv.reader(handle), start=1) if any(row)]
    if rows and not _is_integer(rows[0][1][0]):
        rows = rows[1:]
    if not rows:
        raise TraceError(f"{path}: no jobs found; each line must read arrival,duration,"
                         f"{','.join(f'demand_{i + 1}' for i in range(config.num_resources))}.")
    table = np.array([_parse_row(path, number, row, config) for number, row in rows], dtype=np.int64)
    order = np.argsort(table[:, 0], kind="stable")
    table = table[order]
    return JobSet(table[:, 0].copy(), table[:, 1].copy(), table[:, 2:].copy())


def _parse_row(path: Path, number: int, row: list[str], config: ClusterConfig) -> list[int]:
    where = f"{path} line {number}"
    expected = 2 + config.num_resources
    if len(row) != expected:
        raise TraceError(f"{where}: expected {expected} columns (arrival, duration and one demand per "
                         f"resource, num_resources={config.num_resources}), found {len(row)}: {row}. "
                         f"Fix the line or set num_resources to match the trace.")
    for column, text in zip(_column_names(config.num_resources), row):
        if not _is_integer(text):
            raise TraceError(f"{where}: {column} must be a whole number, found {text.strip()!r}.")
    arrival, duration, *demand = (int(float(text)) for text in row)
    _check(arrival >= 0, where, f"arrival {arrival} is negative.")
    _check(1 <= duration <= config.horizon, where,
           f"duration {duration} must lie in 1..horizon={config.horizon}; raise horizon or split the job.")
    for index, units in enumerate(demand):
        _check(0 <= units <= config.res_slot, where,
               f"demand_{index + 1} {units} must lie in 0..res_slot={config.res_slot}; raise res_slot.")
    return [arrival, duration, *demand]


def _column_names(num_resources: int) -> list[str]:
    return ["arrival", "duration", *(f"demand_{i + 1}" for i in range(num_resources))]


def _is_integer(text: str) -> bool:
    try:
        return float(text).is_integer()
    except ValueError:
        return False


def _check(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise TraceError(f"{where}: {message}")
