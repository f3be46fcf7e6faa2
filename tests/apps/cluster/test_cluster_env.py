"""ClusterScheduling-v0: placement, reward accounting, metrics, observation, seeding, gymnasium API."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import menger.apps.cluster  # noqa: F401  (registers the id)
from menger.apps.cluster import ClusterConfigError
from menger.apps.cluster.env import ClusterSchedulingEnv
from menger.apps.cluster.jobs import offered_load, sample_jobs
from menger.apps.cluster.config import ClusterConfig

SMALL = dict(num_resources=2, res_slot=10, horizon=5, num_slots=2, backlog_size=5)
# j0 and j1 cannot run side by side (6 + 5 > 10); j2 waits in the backlog at first.
THREE_JOBS = "arrival,duration,cpu,mem\n0,3,6,1\n0,2,5,1\n0,1,1,1\n"


@pytest.fixture
def three_jobs(write_trace):
    env = ClusterSchedulingEnv(trace=write_trace(THREE_JOBS), **SMALL)
    env.reset()
    return env


def test_placing_a_job_takes_no_time_and_reserves_its_rows(three_jobs):
    _, reward, *_ = three_jobs.step(0)
    state = three_jobs.state
    assert (reward, state.time) == (0.0, 0)
    assert state.used[:, 0].tolist() == [6, 6, 6, 0, 0]
    assert state.slot_duration.tolist() == [1, 2], "the backlog's head refills the freed slot"


def test_a_job_that_cannot_start_now_goes_to_its_earliest_fitting_offset(three_jobs):
    three_jobs.step(0)
    _, reward, *_ = three_jobs.step(1)
    assert (reward, three_jobs.state.time) == (0.0, 0)
    assert three_jobs.state.used[:, 0].tolist() == [6, 6, 6, 5, 5], "no preemption: j0 keeps rows 0..2"
    assert three_jobs.simulator.completion[1] == 5


def test_void_empty_slot_and_misfit_all_advance_time(write_trace):
    env = ClusterSchedulingEnv(trace=write_trace("0,5,10,1\n0,1,1,1\n"), **SMALL)
    env.reset()
    env.step(0)  # fills resource 0 for the whole horizon
    _, reward, *_ = env.step(1)  # job 1 needs 1 unit of resource 0: no fit anywhere
    assert env.state.time == 1 and reward == pytest.approx(-(1 / 5 + 1))
    env.step(0)  # empty slot
    env.step(2)  # void
    assert env.state.time == 3


def test_rewards_sum_to_minus_the_slowdowns_and_metrics_match_by_hand(three_jobs):
    rewards = [three_jobs.step(a)[1] for a in (0, 1, 1)]
    assert rewards[-1] == pytest.approx(-(1 / 3 + 1 / 2 + 1))
    three_jobs.step(0)  # j2 at time 1
    while True:
        _, reward, terminated, truncated, info = three_jobs.step(2)
        rewards.append(reward)
        if terminated or truncated:
            break
    assert terminated and not truncated and three_jobs.state.time == 5
    slowdowns = [3 / 3, 5 / 2, 2 / 1]  # (C_j - a_j) / T_j with C = 3, 5, 2
    assert sum(rewards) == pytest.approx(-sum(slowdowns))
    assert info["mean_slowdown"] == pytest.approx(np.mean(slowdowns))
    assert info["mean_completion_time"] == pytest.approx(10 / 3)
    assert info["utilisation"] == pytest.approx((7 + 9 + 7 + 6 + 6) / (10 * 2 * 5))
    assert (info["jobs_finished"], info["jobs_unfinished"]) == (3, 0)


@pytest.mark.parametrize("load", [0.5, 1.5])
def test_return_equals_minus_sum_of_slowdowns_on_random_episodes(load):
    env = ClusterSchedulingEnv(load=load, num_jobs=30)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    total = 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(6)))
        total += reward
        if terminated or truncated:
            break
    sim = env.simulator
    by_hand = np.sum((sim.completion - sim.jobs.arrival) / sim.jobs.duration)
    assert terminated and total == pytest.approx(-by_hand)
    assert info["mean_slowdown"] * 30 == pytest.approx(by_hand)


def test_truncation_counts_time_in_system_so_far(three_jobs):
    env = ClusterSchedulingEnv(trace=three_jobs.config.trace, time_limit=2, **SMALL)
    env.reset()
    total = 0.0
    for _ in range(2):
        _, reward, terminated, truncated, info = env.step(2)
        total += reward
    assert truncated and not terminated
    assert info["jobs_unfinished"] == 3
    assert total == pytest.approx(-info["mean_slowdown"] * 3)


def test_default_time_limit_lets_a_waiting_policy_end():
    env = ClusterSchedulingEnv(num_jobs=5)
    env.reset(seed=0)
    steps = 0
    while not any(env.step(5)[2:4]):
        steps += 1
    assert steps < 200


def test_image_draws_occupancy_jobs_backlog_and_arrival_clock(three_jobs):
    image = three_jobs._encoder.encode(three_jobs.state)
    res, slots = 10, 2
    assert image.shape == (5, 2 * (1 + slots) * res + 1 + 1)
    assert image[:, 0:10].sum() == 0, "nothing placed yet"
    assert image[:, 10:20].sum() == 3 * 6 and image[:3, 10:16].all(), "j0: 3 rows x 6 units"
    assert image[:, 20:30].sum() == 2 * 5
    assert image[:, 40:50].sum() == 3 * 1, "j0 on resource 1"
    assert image[:, 60].tolist() == [1, 0, 0, 0, 0], "one job in the backlog"
    three_jobs.step(0)
    image = three_jobs._encoder.encode(three_jobs.state)
    assert image[:, 0:10].sum() == 18 and image[:, 60].sum() == 0


def test_action_mask_marks_fitting_slots_and_void(write_trace):
    env = ClusterSchedulingEnv(trace=write_trace("0,3,6,1\n0,3,5,1\n"), action_mask=True, **SMALL)
    obs, _ = env.reset()
    assert obs["action_mask"].tolist() == [1, 1, 1]
    obs, *_ = env.step(0)
    assert obs["action_mask"].tolist() == [0, 0, 1], "j1 needs rows 3..5, past the horizon; slot 0 empty"
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize("mask", [False, True])
def test_passes_gymnasium_check_env(mask):
    check_env(gym.make("ClusterScheduling-v0", action_mask=mask).unwrapped, skip_render_check=True)


def test_registered_id_builds_with_kwargs():
    env = gym.make("ClusterScheduling-v0", num_slots=10, horizon=15, long_duration=[8, 12])
    assert env.action_space.n == 11 and env.observation_space.shape[0] == 15


def test_seed_fixes_the_job_sequence_and_the_trajectory():
    def trajectory(seed):
        env = ClusterSchedulingEnv(load=1.0)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in [0, 1, 5, 2, 5, 5, 0, 5]:
            out.append(env.step(action)[0])
        return env.simulator.jobs, np.stack(out)

    jobs_a, obs_a = trajectory(7)
    jobs_b, obs_b = trajectory(7)
    jobs_c, _ = trajectory(8)
    assert np.array_equal(obs_a, obs_b)
    for field in ("arrival", "duration", "demand"):
        assert np.array_equal(getattr(jobs_a, field), getattr(jobs_b, field))
    assert not np.array_equal(jobs_a.duration, jobs_c.duration)


def test_actions_do_not_change_the_jobs_of_a_seed():
    env = ClusterSchedulingEnv()
    env.reset(seed=11)
    before = env.simulator.jobs.arrival.copy()
    env.reset(seed=11)
    for _ in range(50):
        env.step(0)
    assert np.array_equal(env.simulator.jobs.arrival, before)


@pytest.mark.parametrize("load", [0.5, 1.9])
def test_load_sets_the_offered_load(load):
    config = ClusterConfig(load=load, num_jobs=20000)
    jobs = sample_jobs(config, np.random.default_rng(0))
    assert offered_load(jobs, config.res_slot) == pytest.approx(load, rel=0.05)
    assert np.all(jobs.duration <= config.horizon) and np.all(jobs.demand <= config.res_slot)
    assert np.mean(jobs.duration <= 3) == pytest.approx(0.8, abs=0.02)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_slot": 3}, "Did you mean 'num_slots'"),
    ({"load": 1.0, "new_job_rate": 0.5}, "not both"),
    ({"long_duration": (10, 25)}, "beyond horizon=20"),
    ({"dominant_demand": (5, 11)}, "beyond res_slot=10"),
    ({"horizon": 0}, "horizon must be a positive integer"),
    ({"trace": "x.csv", "num_jobs": 3}, "num_jobs cannot be combined with trace"),
])
def test_bad_settings_fail_with_a_clear_message(kwargs, message):
    with pytest.raises(ClusterConfigError, match=message):
        ClusterSchedulingEnv(**kwargs)


def test_out_of_range_action_is_refused():
    env = ClusterSchedulingEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside Discrete"):
        env.step(6)
