"""The sanity envs reward exactly the behaviour they are meant to test."""

import numpy as np

from menger.envs import make_vec_env


def mean_reward(env, policy, steps: int) -> float:
    obs = env.reset()
    total = 0.0
    for _ in range(steps):
        result = env.step(policy(obs))
        total += float(result.reward.mean())
        obs = result.obs
    return total / steps


def test_bandit_pays_only_for_the_shown_context():
    env = make_vec_env("menger/Bandit-v0", 16, seed=0, kwargs={"num_arms": 4})
    assert mean_reward(env, lambda obs: obs.argmax(axis=1), 50) == 1.0
    assert 0.15 < mean_reward(env, lambda obs: np.zeros(len(obs), dtype=np.int64), 200) < 0.35


def test_memory_pays_only_a_policy_that_remembers_the_cue():
    env = make_vec_env("menger/Memory-v0", 16, seed=0, kwargs={"length": 4})
    remembered = np.zeros(16, dtype=np.int64)

    def with_memory(obs):
        cue_shown = obs[:, :2].sum(axis=1) > 0
        remembered[cue_shown] = obs[cue_shown, :2].argmax(axis=1)
        return remembered.copy()

    steps = 200
    assert mean_reward(env, with_memory, steps) == 1.0 / 4  # one answer per 4-step episode, always right
    memoryless = mean_reward(env, lambda obs: np.zeros(len(obs), dtype=np.int64), steps)
    assert 0.35 / 4 < memoryless < 0.65 / 4
