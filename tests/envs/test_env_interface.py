"""Every kind of env behind the one VecEnv interface, and the two autoreset modes."""

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from menger.envs import LoopVecEnv, NativeVecEnv, StepResult, VecEnv, make_vec_env


def check_conformance(env, action_sequence, steps: int = 25) -> list[StepResult]:
    """Types, shapes and the valid-row rule of the interface, over a short random run."""
    count = env.num_envs
    assert isinstance(env, VecEnv)
    assert set(env.stats) == {"nonfinite_dropped", "env_rebuilt", "reset_failures"}
    batched_space = batch_space(env.single_observation_space, count)
    assert batched_space.contains(env.reset())
    results = []
    for actions in action_sequence(env, steps):
        result = env.step(actions)
        assert isinstance(result, StepResult)
        assert batched_space.contains(result.obs)
        assert result.reward.dtype == np.float32 and result.reward.shape == (count,)
        for flags in (result.terminated, result.truncated, result.valid):
            assert flags.dtype == np.bool_ and flags.shape == (count,)
        assert not ((result.terminated | result.truncated) & ~result.valid).any()
        results.append(result)
    env.close()
    return results


def test_cartpole_uses_its_native_vector_env(action_sequence):
    env = make_vec_env("CartPole-v1", 8, seed=0)
    assert isinstance(env, NativeVecEnv) and env.autoreset_mode == AutoresetMode.NEXT_STEP
    check_conformance(env, action_sequence)


def test_pendulum_is_stepped_in_a_loop(action_sequence):
    env = make_vec_env("Pendulum-v1", 3, seed=0)
    assert isinstance(env, LoopVecEnv) and env.autoreset_mode == AutoresetMode.SAME_STEP
    assert env.reset().shape == (3, 3)
    check_conformance(env, action_sequence)


@pytest.mark.parametrize("target, kind", [
    ("menger_test_user_envs:CounterEnv", LoopVecEnv),
    ("menger_test_user_envs:make_counter", LoopVecEnv),
    ("menger_test_user_envs:make_bandit_vector", NativeVecEnv),
    ("menger.envs.sanity:BanditVectorEnv", NativeVecEnv),
])
def test_user_env_classes_and_factories(target, kind, user_envs_on_path, action_sequence):
    env = make_vec_env(target, 4, seed=0)
    assert isinstance(env, kind)
    check_conformance(env, action_sequence)


def test_dict_observations_are_batched_per_key(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:DictObsEnv", 3, seed=0)
    obs = env.reset()
    assert obs["position"].shape == (3, 2) and obs["position"].dtype == np.float32
    assert obs["mask"].shape == (3, 3) and obs["mask"].dtype == np.int8
    results = check_conformance(env, action_sequence, steps=6)
    assert results[4].truncated.all() and results[4].valid.all()


def test_next_step_reset_rows_and_only_those_are_invalid(action_sequence):
    env = make_vec_env("CartPole-v1", 8, seed=1)
    env.reset()
    previous_done = np.zeros(8, dtype=bool)
    episodes_ended = 0
    for actions in action_sequence(env, 200):
        result = env.step(actions)
        np.testing.assert_array_equal(result.valid, ~previous_done)
        assert (result.reward[~result.valid] == 0).all()
        previous_done = result.terminated | result.truncated
        episodes_ended += int(previous_done.sum())
    assert episodes_ended > 20


def test_same_step_obs_after_an_episode_ends_is_the_reset_obs(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:CounterEnv", 2, seed=0, kwargs={"episode_length": 3})
    env.reset()
    seen = [env.step(actions) for actions in action_sequence(env, 7)]
    counts = [int(result.obs[0, 0]) for result in seen]
    assert counts == [1, 2, 0, 1, 2, 0, 1]
    assert [bool(result.terminated[0]) for result in seen] == [False, False, True] * 2 + [False]
    assert all(result.valid.all() for result in seen)


def test_returned_arrays_are_not_overwritten_by_later_steps(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:CounterEnv", 2, seed=0, kwargs={"episode_length": 10})
    env.reset()
    actions = action_sequence(env, 2)
    first = env.step(actions[0])
    kept = first.obs.copy()
    env.step(actions[1])
    np.testing.assert_array_equal(first.obs, kept)


def test_atari_preset_gives_stacked_grey_frames_and_next_step_resets():
    env = make_vec_env("ALE/Pong-v5", 2, seed=0, preset="atari", kwargs={"max_num_frames_per_episode": 120})
    obs = env.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    assert env.single_action_space.n == 6
    assert env.get_state() is None  # ALE's emulators live in C++ and cannot be snapshotted
    previous_done = np.zeros(2, dtype=bool)
    ended = 0
    for _ in range(45):
        result = env.step(np.ones(2, dtype=np.int64))
        assert result.obs.shape == (2, 4, 84, 84) and result.reward.dtype == np.float32
        np.testing.assert_array_equal(result.valid, ~previous_done)
        previous_done = result.terminated | result.truncated
        ended += int(previous_done.sum())
    assert ended >= 2
    env.close()


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "pong"])
def test_atari_preset_accepts_v4_ids_and_rom_names(env_id):
    env = make_vec_env(env_id, 1, seed=0, preset="atari")
    assert env.reset().shape == (1, 4, 84, 84)
    env.close()


def test_disabled_autoreset_envs_are_reset_per_env_in_the_same_step(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:CounterVectorEnv", 2, seed=0, kwargs={"episode_length": 2})
    env.reset()
    seen = [env.step(actions) for actions in action_sequence(env, 6)]
    assert [result.obs[:, 0].tolist() for result in seen] == [[1, 1], [0, 2], [1, 0], [0, 1], [1, 2], [0, 0]]
    assert all(result.valid.all() for result in seen)
    assert [result.terminated.tolist() for result in seen][:3] == [[False, False], [True, False], [False, True]]


def test_disabled_autoreset_env_drops_only_the_nonfinite_row(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:CounterVectorEnv", 2, seed=0,
                       kwargs={"episode_length": 5, "nan_at": 2})
    env.reset()
    first, second = [env.step(actions) for actions in action_sequence(env, 2)]
    np.testing.assert_array_equal(second.valid, [False, True])
    assert second.obs[:, 0].tolist() == [0, 2] and second.reward.tolist() == [0, 1]
    assert env.stats["nonfinite_dropped"] == 1
