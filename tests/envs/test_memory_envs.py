"""menger/CartPoleNoVel-v0: CartPole-v1 exactly, with the velocities left out of what the agent sees."""
import gymnasium as gym
import pytest
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

from menger.envs import make_vec_env
from menger.envs.memory import CartPoleNoVelVectorEnv


def test_the_vector_env_is_cartpole_with_positions_only_step_for_step():
    hidden, full = CartPoleNoVelVectorEnv(num_envs=8), CartPoleVectorEnv(num_envs=8)
    obs, _ = hidden.reset(seed=3)
    reference, _ = full.reset(seed=3)
    np.testing.assert_array_equal(obs, reference[:, [0, 2]])
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(700):  # long enough for episodes to end, autoreset and time out
        actions = rng.integers(0, 2, 8)
        obs, reward, terminated, truncated, _ = hidden.step(actions)
        reference, ref_reward, ref_terminated, ref_truncated, _ = full.step(actions)
        np.testing.assert_array_equal(obs, reference[:, [0, 2]])
        np.testing.assert_array_equal(reward, ref_reward)
        np.testing.assert_array_equal(terminated, ref_terminated)
        np.testing.assert_array_equal(truncated, ref_truncated)
        ended += int(terminated.sum())
        assert obs.shape == (8, 2) and obs.dtype == np.float32 and obs.flags.c_contiguous
    assert ended > 0
    assert hidden.single_observation_space.shape == (2,) and hidden.observation_space.shape == (8, 2)


def test_it_is_registered_vectorised_natively_and_as_a_single_env():
    env = make_vec_env("menger/CartPoleNoVel-v0", 4, seed=0)
    assert type(env).__name__ == "NativeVecEnv" and env.single_observation_space.shape == (2,)
    assert env.reset().shape == (4, 2) and env.get_state() is not None  # snapshots work, as for CartPole
    single = gym.make("menger/CartPoleNoVel-v0")
    obs, _ = single.reset(seed=0)
    assert obs.shape == (2,) and single.observation_space.contains(obs)
    assert single.spec.max_episode_steps == 500


@pytest.mark.parametrize("masked_id, env_id, seen", [
    ("menger/AcrobotNoVel-v0", "Acrobot-v1", [0, 1, 2, 3]),
    ("menger/MountainCarNoVel-v0", "MountainCar-v0", [0]),
    ("menger/PendulumNoVel-v0", "Pendulum-v1", [0, 1]),
    ("menger/MountainCarContinuousNoVel-v0", "MountainCarContinuous-v0", [0]),
])
def test_the_masked_classic_envs_are_gymnasiums_own_step_for_step_without_their_velocities(masked_id, env_id, seen):
    masked, full = gym.make(masked_id), gym.make(env_id)
    assert masked.observation_space.shape == (len(seen),) and masked.action_space == full.action_space
    obs, _ = masked.reset(seed=5)
    reference, _ = full.reset(seed=5)
    np.testing.assert_array_equal(obs, reference[seen].astype(np.float32))
    full.action_space.seed(0)
    ended = False
    for _ in range(1000):  # past every time limit: the wrapped env's own ends the episode
        action = full.action_space.sample()
        obs, reward, terminated, truncated, _ = masked.step(action)
        reference, ref_reward, ref_terminated, ref_truncated, _ = full.step(action)
        np.testing.assert_array_equal(obs, reference[seen].astype(np.float32))
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated)
        assert obs.dtype == np.float32 and masked.observation_space.contains(obs)
        if terminated or truncated:
            ended = True
            break
    assert ended
    vector = make_vec_env(masked_id, 3, seed=0)
    assert vector.reset().shape == (3, len(seen))
