"""SlotPolicyNet: the features it reads back from the image, slot symmetry, and per-episode loads."""

import numpy as np
import pytest
import torch

from menger.apps.cluster import ClusterConfig, ClusterConfigError, sample_jobs
from menger.apps.cluster.env import ClusterSchedulingEnv
from menger.apps.cluster.policy import SlotPolicyNet

SETTINGS = dict(num_slots=5, load=1.3, action_mask=True)
RES_SLOT, HORIZON = 10, 20


def _batch(obs: dict) -> dict:
    return {key: torch.as_tensor(value, dtype=torch.float32)[None] for key, value in obs.items()}


def _visited_states(steps: int = 200):
    """(observation, slot offsets, durations, demands) along a seeded run of random actions."""
    env = ClusterSchedulingEnv(**SETTINGS)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        state = env.state
        yield obs, state.slot_offsets(), state.slot_duration.copy(), state.slot_demand.copy()
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()


def test_reader_recovers_durations_demands_and_earliest_starts_from_the_image():
    env = ClusterSchedulingEnv(**SETTINGS)
    reader = SlotPolicyNet(env.observation_space, env.action_space).reader
    for obs, offsets, durations, demands in _visited_states():
        slots, _, present = reader(_batch(obs)["obs"])
        features = slots[0].numpy()
        assert features[:, 0].tolist() == (offsets == 0).tolist()
        assert np.allclose(features[:, 1] * HORIZON, durations)
        assert np.allclose(features[:, 3] * HORIZON, np.where(offsets < 0, HORIZON, offsets))
        assert np.allclose(features[:, 5:7] * RES_SLOT, demands)
        assert present[0].numpy().tolist() == (durations > 0).tolist()


def test_swapping_two_slots_swaps_their_logits_and_keeps_the_value():
    env = ClusterSchedulingEnv(**SETTINGS)
    torch.manual_seed(0)
    net = SlotPolicyNet(env.observation_space, env.action_space)
    obs, _ = env.reset(seed=5)
    while env.state.slot_present.sum() < 2:
        obs, *_ = env.step(env.action_space.n - 1)
    batch = _batch(obs)
    image = batch["obs"].clone()
    blocks = image[:, :, :2 * 6 * RES_SLOT].reshape(1, HORIZON, 2, 6, RES_SLOT)
    blocks[:, :, :, [1, 2]] = blocks[:, :, :, [2, 1]].clone()  # slot 0 <-> slot 1
    swapped = {"obs": image, "action_mask": batch["action_mask"][:, [1, 0, 2, 3, 4, 5]]}
    logits, value = net(batch)
    swapped_logits, swapped_value = net(swapped)
    assert torch.allclose(swapped_logits[0, [1, 0, 2, 3, 4, 5]], logits[0], atol=1e-5)
    assert torch.allclose(swapped_value, value, atol=1e-4)


def test_untrained_network_with_the_sjf_prior_acts_like_sjf():
    env = ClusterSchedulingEnv(**SETTINGS)
    torch.manual_seed(0)
    net = SlotPolicyNet(env.observation_space, env.action_space)
    for obs, offsets, durations, _ in _visited_states():
        logits, _ = net(_batch(obs))
        starts_now = offsets == 0
        expected = np.argmin(np.where(starts_now, durations, 99)) if starts_now.any() else len(durations)
        chosen = int(logits[0].argmax())
        assert chosen == expected or durations[chosen] == durations[expected]


def test_wrong_resource_settings_fail_with_the_kwargs_to_change():
    env = ClusterSchedulingEnv(**SETTINGS)
    with pytest.raises(ValueError, match="num_resources and res_slot"):
        SlotPolicyNet(env.observation_space, env.action_space, res_slot=40)


def test_load_range_draws_one_load_per_episode_and_the_seed_fixes_it():
    config = ClusterConfig(load_range=(0.2, 1.8), num_jobs=200)
    windows = [sample_jobs(config, np.random.default_rng(seed)).arrival[-1] for seed in range(20)]
    assert max(windows) > 2 * min(windows), "light and heavy episodes should both occur"
    again = sample_jobs(config, np.random.default_rng(3)).arrival
    assert np.array_equal(again, sample_jobs(config, np.random.default_rng(3)).arrival)


@pytest.mark.parametrize("kwargs, message", [
    (dict(load_range=(0.5, 0.2)), "0 < low <= high"),
    (dict(load_range=(0.2, 0.5), load=0.9), "load_range alone"),
])
def test_bad_load_range_fails_with_a_clear_message(kwargs, message):
    with pytest.raises(ClusterConfigError, match=message):
        ClusterConfig.from_kwargs(kwargs)
