"""`menger.api.Policy.act`: one observation or a batch, and a recurrent state kept per env from call to call."""
import gymnasium as gym
import numpy as np
import torch

from menger.api import Policy
from menger.experiment import load_experiment
from menger.models import build_policy

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def _policy(lstm_size=8, action_space=gym.spaces.Discrete(4)):
    torch.manual_seed(0)
    config = load_experiment("cartpole-ppo", [f"model.lstm_size={lstm_size}"])
    return Policy(build_policy(OBS, action_space, config.model, "ppo"), config)


def _reference_actions(network, obs, state):
    """The network stepped by hand: obs [steps, N, 3] from `state`."""
    actions = []
    for step in obs:
        out = network.act(torch.from_numpy(step), state, deterministic=True)
        actions.append(out.action.numpy())
        state = out.state
    return np.stack(actions), state


def test_a_batch_keeps_one_state_per_env_across_calls():
    policy = _policy()
    obs = np.random.default_rng(0).uniform(-1, 1, (12, 3, 3)).astype(np.float32)  # 12 steps of 3 envs
    expected, _ = _reference_actions(policy.network, obs, policy.network.initial_state(3))
    assert np.array_equal(np.stack([policy.act(step) for step in obs]), expected)
    stateless = np.stack([_reference_actions(policy.network, step[None], policy.network.initial_state(3))[0][0]
                          for step in obs])
    assert not np.array_equal(expected, stateless)  # the state did matter, so carrying it was tested


def test_reset_state_zeroes_only_the_envs_whose_episode_ended():
    policy = _policy()
    obs = np.random.default_rng(1).uniform(-1, 1, (6, 3, 3)).astype(np.float32)
    for step in obs[:3]:
        policy.act(step)
    before = policy.state.clone()
    policy.reset_state(np.array([False, True, False]))
    assert torch.equal(policy.state[:, 1], torch.zeros_like(policy.state[:, 1]))
    assert torch.equal(policy.state[:, [0, 2]], before[:, [0, 2]])
    policy.reset_state()
    assert policy.state is None  # every env starts afresh on the next call


def test_one_observation_at_a_time_carries_the_state_of_that_one_env():
    policy = _policy()
    obs = np.random.default_rng(2).uniform(-1, 1, (10, 1, 3)).astype(np.float32)
    expected, _ = _reference_actions(policy.network, obs, policy.network.initial_state(1))
    actions = [policy.act(step[0]) for step in obs]
    assert all(np.shape(action) == () for action in actions)  # the action alone, not a batch of one
    assert np.array_equal(np.array(actions), expected[:, 0])
    policy.reset_state(True)
    assert torch.equal(policy.state, torch.zeros_like(policy.state))


def test_a_feed_forward_box_policy_clips_to_the_space_for_one_observation_or_a_batch():
    policy = _policy(lstm_size=0, action_space=gym.spaces.Box(-0.001, 0.001, (2,), np.float32))
    obs = np.random.default_rng(3).uniform(-1, 1, (5, 3)).astype(np.float32)
    batch = policy.act(obs)
    assert batch.shape == (5, 2) and np.all(np.abs(batch) <= 0.001) and np.any(np.abs(batch) == 0.001)
    np.testing.assert_allclose(policy.act(obs[0]), batch[0], rtol=1e-6, atol=1e-9)
    assert policy.state is None or policy.state.numel() == 0
