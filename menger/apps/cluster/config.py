"""The cluster environment's settings: one frozen, validated record.

Every parameter of the DeepRM setup (Mao et al., HotNets 2016) is a field here, so that an experiment's
``env.kwargs`` maps one to one onto it and a mistyped key fails before anything runs.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

DEFAULT_ARRIVAL_RATE = 0.7  # DeepRM's default new_job_rate


class ClusterConfigError(ValueError):
    """A cluster setting is unknown, out of range or inconsistent with another one."""


@dataclass(frozen=True)
class ClusterConfig:
    """Settings of ``ClusterScheduling-v0``.

    Attributes:
        num_resources: d, the number of resource types (CPU, memory, ...).
        res_slot: units of each resource in the cluster; also the widest demand a job may have.
        horizon: T_h, how many future time steps the scheduler sees and may reserve.
        num_slots: M, jobs visible individually; the action space is Discrete(M + 1).
        backlog_size: how many further waiting jobs the observation can count.
        new_job_rate: mean jobs arriving per step (Bernoulli when <= 1; above 1, floor(rate) jobs plus
            one more with probability frac(rate)). Give this or ``load``, not both.
        load: target offered load (mean work per step over capacity, averaged over resources);
            converted to an arrival rate with the job distributions below.
        load_range: (low, high): each episode draws its load uniformly from this range, so one policy
            is trained across light and heavy traffic. Excludes ``load`` and ``new_job_rate``.
        num_jobs: jobs arriving in one episode; the episode then runs until all have finished.
        short_job_fraction: share of jobs drawn from ``short_duration`` (the rest from ``long_duration``).
        short_duration, long_duration: inclusive (low, high) duration ranges in time steps.
        dominant_demand: inclusive demand range of each job's one dominant resource.
        other_demand: inclusive demand range of its other resources.
        time_limit: the episode is truncated when time reaches this; None picks a bound that any
            schedule that keeps the cluster busy while jobs wait meets (last arrival + total work + T_h).
        trace: CSV file of jobs to replay instead of sampling (arrival, duration, demand per resource).
        action_mask: observe a dict {"obs", "action_mask"} that marks the slots holding a job that fits.
    """

    num_resources: int = 2
    res_slot: int = 10
    horizon: int = 20
    num_slots: int = 5
    backlog_size: int = 60
    new_job_rate: float | None = None
    load: float | None = None
    load_range: tuple[float, float] | None = None
    num_jobs: int = 50
    short_job_fraction: float = 0.8
    short_duration: tuple[int, int] = (1, 3)
    long_duration: tuple[int, int] = (10, 15)
    dominant_demand: tuple[int, int] = (5, 10)
    other_demand: tuple[int, int] = (1, 2)
    time_limit: int | None = None
    trace: str | None = None
    action_mask: bool = False

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> ClusterConfig:
        """Build from an experiment's ``env.kwargs``; an unknown key is named with the closest valid one."""
        valid = [field.name for field in dataclasses.fields(cls)]
        for key in kwargs:
            if key not in valid:
                close = difflib.get_close_matches(key, valid, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else f" Valid keys: {', '.join(valid)}."
                raise ClusterConfigError(f"Unknown ClusterScheduling-v0 setting {key!r}.{hint}")
        if "trace" in kwargs and "num_jobs" in kwargs:
            raise ClusterConfigError("num_jobs cannot be combined with trace: a trace replays all of its jobs.")
        ranges = {k: tuple(v) for k, v in kwargs.items()
                  if k.endswith(("_duration", "_demand", "_range")) and v is not None}
        return cls(**{**kwargs, **ranges})

    def __post_init__(self) -> None:
        self._check_sizes()
        if self.trace is None:  # a trace brings its own jobs; the job distributions go unused
            self._check_distributions()
            self._check_arrivals()
        else:
            _require(self.load is None and self.new_job_rate is None and self.load_range is None,
                     "load, load_range and new_job_rate cannot be combined with trace: the trace fixes the arrivals.")

    def _check_sizes(self) -> None:
        for name in ("num_resources", "res_slot", "horizon", "num_slots", "num_jobs"):
            _require(isinstance(getattr(self, name), int) and getattr(self, name) >= 1,
                     f"{name} must be a positive integer, got {getattr(self, name)!r}.")
        _require(isinstance(self.backlog_size, int) and self.backlog_size >= 0,
                 f"backlog_size must be a non-negative integer, got {self.backlog_size!r}.")
        _require(self.time_limit is None or (isinstance(self.time_limit, int) and self.time_limit >= 1),
                 f"time_limit must be None or a positive integer, got {self.time_limit!r}.")

    def _check_distributions(self) -> None:
        _require(0.0 <= self.short_job_fraction <= 1.0,
                 f"short_job_fraction must lie in [0, 1], got {self.short_job_fraction}.")
        for name, upper, upper_name in (("short_duration", self.horizon, "horizon"),
                                        ("long_duration", self.horizon, "horizon"),
                                        ("dominant_demand", self.res_slot, "res_slot"),
                                        ("other_demand", self.res_slot, "res_slot")):
            low, high = getattr(self, name)
            lowest = 1 if name.endswith("duration") else 0
            _require(lowest <= low <= high,
                     f"{name} must be (low, high) with {lowest} <= low <= high, got {(low, high)}.")
            _require(high <= upper, f"{name} reaches {high}, beyond {upper_name}={upper}: such a job could "
                                    f"never be placed. Lower {name} or raise {upper_name}.")

    def _check_arrivals(self) -> None:
        _require(self.new_job_rate is None or self.load is None,
                 "Give new_job_rate or load, not both: load is turned into an arrival rate.")
        _require(self.arrival_rate > 0, f"The arrival rate must be positive, got {self.arrival_rate}.")
        if self.load_range is not None:
            _require(self.new_job_rate is None and self.load is None,
                     "Give load_range alone: it replaces load and new_job_rate with a load drawn per episode.")
            low, high = self.load_range
            _require(0 < low <= high, f"load_range must be (low, high) with 0 < low <= high, got {self.load_range}.")

    @property
    def mean_duration(self) -> float:
        short = sum(self.short_duration) / 2
        long = sum(self.long_duration) / 2
        return self.short_job_fraction * short + (1 - self.short_job_fraction) * long

    @property
    def mean_demand(self) -> float:
        """Mean demand per resource; the dominant resource is drawn uniformly among the d."""
        dominant = sum(self.dominant_demand) / 2
        other = sum(self.other_demand) / 2
        return (dominant + (self.num_resources - 1) * other) / self.num_resources

    @property
    def load_per_unit_rate(self) -> float:
        """Offered load when one job arrives per step, as DeepRM measures it: work / capacity."""
        return self.mean_duration * self.mean_demand / self.res_slot

    @property
    def arrival_rate(self) -> float:
        if self.new_job_rate is not None:
            return float(self.new_job_rate)
        if self.load is not None:
            return float(self.load) / self.load_per_unit_rate
        return DEFAULT_ARRIVAL_RATE

    def episode_arrival_rate(self, rng) -> float:
        """The arrival rate of one episode: ``arrival_rate``, or a load drawn from ``load_range``."""
        if self.load_range is None:
            return self.arrival_rate
        return float(rng.uniform(*self.load_range)) / self.load_per_unit_rate

    @property
    def backlog_width(self) -> int:
        """Columns of the image that count the backlog, filled row by row."""
        return -(-self.backlog_size // self.horizon)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ClusterConfigError(message)
