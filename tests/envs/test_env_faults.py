"""Broken envs (docs/guides/reliability.md promise 6): NaN/Inf dropped or fatal, crashed envs rebuilt, resets capped."""

import time

import gymnasium
import numpy as np
import pytest

from menger.envs import EnvError, FaultPolicy, NonFiniteValueError, make_vec_env

# In loop mode env index i is first reset with seed + i, so faulty_seed=SEED + 1 breaks env 1 alone.
SEED = 10


def step_n(env, count: int, action_sequence):
    return [env.step(actions) for actions in action_sequence(env, count)]


@pytest.mark.parametrize("fault", [{"nan_obs_at": 2}, {"inf_reward_at": 2}])
def test_loop_env_nonfinite_is_dropped_for_that_env_only(fault, action_sequence):
    env = make_vec_env("menger/Faulty-v0", 3, seed=SEED, kwargs={**fault, "faulty_seed": SEED + 1})
    env.reset()
    first, second, third = step_n(env, 3, action_sequence)
    assert first.valid.all() and third.valid.all()
    np.testing.assert_array_equal(second.valid, [True, False, True])
    assert np.isfinite(second.obs).all() and np.isfinite(second.reward).all()
    assert second.reward[1] == 0 and not second.terminated[1] and not second.truncated[1]
    assert env.stats == {"nonfinite_dropped": 1, "env_rebuilt": 0, "reset_failures": 0}


def test_nonfinite_in_a_dict_observation_is_dropped(user_envs_on_path, action_sequence):
    env = make_vec_env("menger_test_user_envs:DictObsEnv", 2, seed=0, kwargs={"nan_at": 3})
    env.reset()
    results = step_n(env, 3, action_sequence)
    assert not results[2].valid.any()
    assert np.isfinite(results[2].obs["position"]).all()
    assert env.stats["nonfinite_dropped"] == 2


def test_loop_env_nonfinite_fails_fast_naming_env_and_index(action_sequence):
    env = make_vec_env("menger/Faulty-v0", 3, seed=SEED, nonfinite="fail",
                       kwargs={"nan_obs_at": 2, "faulty_seed": SEED + 2})
    env.reset()
    env.step(action_sequence(env, 1)[0])
    with pytest.raises(NonFiniteValueError, match=r"menger/Faulty-v0: env index 2 \(of 3\)"):
        env.step(action_sequence(env, 1)[0])


def test_native_env_nonfinite_resets_the_whole_batch(action_sequence):
    env = make_vec_env("menger/FaultyVector-v0", 4, seed=0, kwargs={"nan_obs_at": 2, "faulty_index": 2})
    env.reset()
    first, second, third = step_n(env, 3, action_sequence)
    assert first.valid.all() and third.valid.all()
    assert not second.valid.any() and not (second.terminated | second.truncated).any()
    assert np.isfinite(second.obs).all() and (second.reward == 0).all()
    assert env.stats["nonfinite_dropped"] == 1


def test_native_env_nonfinite_fails_fast_naming_env_and_index(action_sequence):
    env = make_vec_env("menger/FaultyVector-v0", 4, seed=0, nonfinite="fail",
                       kwargs={"inf_reward_at": 1, "faulty_index": 3})
    env.reset()
    with pytest.raises(NonFiniteValueError, match=r"menger/FaultyVector-v0: env index 3 \(of 4\)"):
        env.step(action_sequence(env, 1)[0])


def test_loop_env_that_raises_in_step_is_rebuilt_alone(action_sequence):
    env = make_vec_env("menger/Faulty-v0", 3, seed=SEED, kwargs={"raise_at": 3, "faulty_seed": SEED + 1})
    env.reset()
    results = step_n(env, 25, action_sequence)
    np.testing.assert_array_equal(results[2].valid, [True, False, True])
    assert not results[2].terminated[1] and results[2].reward[1] == 0
    assert all(result.valid.all() for index, result in enumerate(results) if index != 2)
    assert env.stats["env_rebuilt"] == 1


def test_native_env_that_raises_in_step_is_rebuilt_whole(action_sequence):
    env = make_vec_env("menger/FaultyVector-v0", 4, seed=0, kwargs={"raise_at": 2})
    env.reset()
    results = step_n(env, 4, action_sequence)
    # Every fresh instance raises on its own second step: steps 2 and 4 hit a fault.
    assert [bool(result.valid.all()) for result in results] == [True, False, True, False]
    assert not results[1].valid.any() and np.isfinite(results[1].obs).all()
    assert env.stats["env_rebuilt"] == 2 * 4


@pytest.mark.parametrize("env_id, where", [
    ("menger/Faulty-v0", "env index 0 (of 2)"),
    ("menger/FaultyVector-v0", "vector env of 2"),
])
def test_reset_that_always_fails_backs_off_then_raises(env_id, where):
    env = make_vec_env(env_id, 2, seed=0, kwargs={"reset_failures": -1}, max_reset_retries=3)
    started = time.perf_counter()
    with pytest.raises(EnvError) as failure:
        env.reset()
    elapsed = time.perf_counter() - started
    message = str(failure.value)
    assert where in message and "4 times" in message and "injected reset failure" in message
    assert env.stats["reset_failures"] == 4
    assert 0.05 + 0.1 + 0.2 <= elapsed < 2.0  # waited 0.05 s doubling, and stopped at the cap


def test_reset_that_fails_a_few_times_recovers():
    env = make_vec_env("menger/Faulty-v0", 2, seed=0, kwargs={"reset_failures": 2})
    assert env.reset().shape == (2, 4)
    assert env.stats["reset_failures"] == 2 * 2


def test_unknown_nonfinite_policy_is_refused():
    with pytest.raises(ValueError, match="'drop'"):
        make_vec_env("CartPole-v1", 2, seed=0, nonfinite="ignore")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_env_failing_again_right_after_its_rebuild_is_an_error_not_a_loop(env_id):
    env = make_vec_env(env_id, 2, seed=0)
    env.reset()
    bad_actions = np.full((2, 1) if env_id == "Pendulum-v1" else 2, "not an action", dtype=object)
    for _ in range(1 + FaultPolicy().max_rebuild_retries):  # a crash, then rebuilds with back-off
        assert not env.step(bad_actions).valid.any()
    with pytest.raises(EnvError, match="again right after being rebuilt, 5 times in a row.*Check that the actions"):
        env.step(bad_actions)


class FlakyEnv(gymnasium.Env):
    """Raises in a tenth of its steps (seeded), first steps after a rebuild included: a flaky simulator."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    draws = np.random.default_rng(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if FlakyEnv.draws.random() < 0.1:
            raise RuntimeError("the simulator hiccuped")
        return np.zeros(2, np.float32), 1.0, False, False, {}


def test_an_env_that_fails_now_and_then_is_rebuilt_again_and_again_not_given_up():
    """A fault right after a rebuild used to end the actor; a flaky env must only cost its faulty steps."""
    env = make_vec_env(f"{__name__}:FlakyEnv", 4, seed=0)
    env.reset()
    valid = [env.step(np.zeros(4, np.int64)).valid for _ in range(300)]
    assert env.stats["env_rebuilt"] > 60 and 0.8 < float(np.mean(valid)) < 0.97


def test_wrong_number_of_actions_is_refused():
    env = make_vec_env("Pendulum-v1", 3, seed=0)
    env.reset()
    with pytest.raises(ValueError, match="got 2 actions for 3 envs"):
        env.step(np.zeros((2, 1), dtype=np.float32))
