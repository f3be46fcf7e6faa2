"""Replaying a user's CSV trace: the same jobs come out, and a bad file names its line."""

import numpy as np
import pytest

from menger.apps.cluster import ClusterConfig, TraceError, read_trace
from menger.apps.cluster.env import ClusterSchedulingEnv


def test_the_episode_replays_exactly_the_trace(write_trace):
    path = write_trace("arrival,duration,cpu,mem\n0,2,3,1\n1,15,1,9\n1,1,10,0\n7,20,2,2\n")
    env = ClusterSchedulingEnv(trace=path)
    for seed in (0, 1):
        env.reset(seed=seed)
        jobs = env.simulator.jobs
        assert jobs.arrival.tolist() == [0, 1, 1, 7]
        assert jobs.duration.tolist() == [2, 15, 1, 20]
        assert jobs.demand.tolist() == [[3, 1], [1, 9], [10, 0], [2, 2]]


def test_a_trace_episode_ends_when_its_jobs_are_done(write_trace):
    env = ClusterSchedulingEnv(trace=write_trace("0,2,3,1\n3,1,4,4\n"))
    env.reset()
    actions = iter([0, 5, 5, 5, 0, 5])
    for action in actions:
        *_, terminated, truncated, info = env.step(action)
        if terminated:
            break
    assert terminated and info["jobs_finished"] == 2 and info["mean_slowdown"] == pytest.approx(1.0)


def test_header_is_optional_and_jobs_are_sorted_by_arrival(write_trace):
    jobs = read_trace(write_trace("5,1,1,1\n0,2,2,2\n5,3,3,3\n"), ClusterConfig())
    assert jobs.arrival.tolist() == [0, 5, 5] and jobs.duration.tolist() == [2, 1, 3]


def test_three_resources_need_three_demand_columns(write_trace):
    path = write_trace("0,2,1,2,3\n")
    assert read_trace(path, ClusterConfig(num_resources=3)).demand.tolist() == [[1, 2, 3]]
    with pytest.raises(TraceError, match=r"line 1: expected 4 columns.*found 5.*num_resources"):
        ClusterSchedulingEnv(trace=path)


@pytest.mark.parametrize("text, message", [
    ("arrival,duration,a,b\n0,1,1,1\n2,x,1,1\n", r"line 3: duration must be a whole number, found 'x'"),
    ("0,1,1,1\n1,2.5,1,1\n", r"line 2: duration must be a whole number, found '2.5'"),
    ("0,1,1,1\n0,21,1,1\n", r"line 2: duration 21 must lie in 1..horizon=20"),
    ("0,0,1,1\n", r"line 1: duration 0 must lie in 1..horizon=20"),
    ("0,1,11,1\n", r"line 1: demand_1 11 must lie in 0..res_slot=10"),
    ("-3,1,1,1\n", r"line 1: arrival -3 is negative"),
    ("0,1,1\n", r"line 1: expected 4 columns"),
    ("arrival,duration,a,b\n", r"no jobs found"),
])
def test_bad_traces_name_the_line_and_the_problem(write_trace, text, message):
    path = write_trace(text)
    with pytest.raises(TraceError, match=message):
        ClusterSchedulingEnv(trace=path)


def test_missing_trace_file_says_so(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        ClusterSchedulingEnv(trace=str(tmp_path / "absent.csv"))


def test_trace_refuses_a_load(write_trace):
    with pytest.raises(ValueError, match="trace fixes the arrivals"):
        ClusterSchedulingEnv(trace=write_trace("0,1,1,1\n"), load=0.5)


def test_trace_jobs_are_integer_arrays(write_trace):
    jobs = read_trace(write_trace("0,1.0,1,1\n"), ClusterConfig())
    assert jobs.duration.dtype == np.int64 and jobs.duration.tolist() == [1]
