"""Envs stepped in a loop can reset on the next step (as native vector envs do), so that replay sees the last
observation of a truncated episode and bootstraps from it: a time limit is not a terminal state."""
import numpy as np
import pytest
import torch

from menger.envs import make_vec_env
from menger.losses import n_step_items


def _run(next_step: bool, steps: int):
    envs = make_vec_env("Pendulum-v1", 2, seed=3, kwargs={"max_episode_steps": 5}, next_step_autoreset=next_step)
    obs = [envs.reset(seed=3)]
    results = []
    for _ in range(steps):
        result = envs.step(np.zeros((2, 1), np.float32))
        results.append(result)
        obs.append(result.obs)
    state = envs.get_state()
    envs.close()
    return obs, results, state


def test_the_last_observation_of_a_truncated_episode_comes_back_and_the_next_step_only_resets():
    obs, results, _ = _run(True, 7)
    assert results[4].truncated.all() and results[4].valid.all()  # step 5: the time limit
    assert not results[5].valid.any()                             # step 6: the reset, no transition
    assert results[6].valid.all()
    same_obs, same_results, _ = _run(False, 7)
    assert np.allclose(obs[5], obs[4], atol=1.0) and not np.allclose(obs[5], same_obs[5])  # the last obs, not a reset
    assert np.allclose(obs[6], same_obs[5])  # the reset observation arrives one step later


def test_a_time_limit_bootstraps_from_the_last_observation_and_a_termination_does_not():
    rewards = torch.ones(4, 1)
    valid = torch.tensor([[1.0], [1.0], [0.0], [1.0]])   # step 2 only resets (the episode ended at step 1)
    for terminated, expected_discount in ((0.0, 0.9 ** 2), (1.0, 0.0)):
        ends = torch.tensor([[0.0], [terminated], [0.0], [0.0]])
        index = torch.arange(5).view(5, 1)
        items = n_step_items(index, torch.zeros(4, 1, dtype=torch.int64), rewards, 0.9 * (1 - ends), valid, 3)
        first = int((items.start == 0).nonzero()[0])
        assert int(items.next_obs[first]) == 2          # obs[2]: the truncated episode's last observation
        assert float(items.discounts[first]) == pytest.approx(expected_discount)


def test_the_pending_reset_is_part_of_the_snapshot():
    _, _, state = _run(True, 5)
    assert state["reset_next"] == [True, True]
