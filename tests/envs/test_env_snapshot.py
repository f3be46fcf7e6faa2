"""get_state/set_state: a fresh env resumes the same trajectory bit for bit."""

import json

import numpy as np
import pytest

from menger.envs import make_vec_env


def run(env, actions):
    return [env.step(batch) for batch in actions]


def assert_same_trajectory(expected, actual):
    for step, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for field in want._fields:
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=f"{field} at step {step}")


def assert_plain_data(value):
    """Numpy arrays and JSON-able values only, so a checkpoint can store it without pickle."""
    if isinstance(value, dict):
        assert all(isinstance(key, str) for key in value)
        for item in value.values():
            assert_plain_data(item)
    elif isinstance(value, list):
        for item in value:
            assert_plain_data(item)
    elif not isinstance(value, np.ndarray):
        json.dumps(value)


@pytest.mark.parametrize("env_id, num_envs, warmup, window", [
    ("CartPole-v1", 8, 40, 120),        # native vector env; the window spans many NEXT_STEP resets
    ("Pendulum-v1", 2, 150, 80),        # loop mode; the window crosses TimeLimit's truncation at 200
    ("menger/Memory-v0", 4, 5, 30),     # sanity env
])
def test_fresh_env_resumes_the_same_trajectory(env_id, num_envs, warmup, window, action_sequence):
    original = make_vec_env(env_id, num_envs, seed=3)
    original.reset()
    actions = action_sequence(original, warmup + window, seed=1)
    run(original, actions[:warmup])
    state = original.get_state()
    assert state is not None
    assert_plain_data(state)
    expected = run(original, actions[warmup:])
    assert any((result.terminated | result.truncated).any() for result in expected)

    resumed = make_vec_env(env_id, num_envs, seed=999)  # a different seed: everything must come from the state
    resumed.set_state(state)
    assert_same_trajectory(expected, run(resumed, actions[warmup:]))


def test_state_survives_a_json_round_trip_of_its_plain_parts(action_sequence):
    env = make_vec_env("Pendulum-v1", 2, seed=0)
    env.reset()
    run(env, action_sequence(env, 5))
    state = env.get_state()
    json_parts = json.loads(json.dumps(state, default=lambda array: {"array": array.tolist()}))
    assert json_parts["kind"] == "loop" and len(json_parts["envs"]) == 2


def test_restoring_into_a_different_env_is_refused():
    state = make_vec_env("CartPole-v1", 8, seed=0).get_state()
    with pytest.raises(ValueError, match="same id, num_envs"):
        make_vec_env("CartPole-v1", 4, seed=0).set_state(state)


def test_env_with_state_outside_numpy_attributes_cannot_be_snapshotted():
    env = make_vec_env("menger/Faulty-v0", 2, seed=0)  # holds a FaultPlan object
    env.reset()
    assert env.get_state() is None
