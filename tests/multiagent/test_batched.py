"""BatchedMultiAgentVecEnv: a game's own batched core plays exactly as its games stepped one by one."""
from __future__ import annotations

import numpy as np
import pytest

from menger.envs import make_vec_env
from menger.envs.multiagent import AGENT_KEY, CRITIC_KEY, MASK_KEY, MultiAgentVecEnv, random_legal
from menger.envs.multiagent_batch import BatchedMultiAgentVecEnv
from menger.envs.wargame import make_bot, parallel_env
from menger.experiment import MultiAgentConfig

SMALL = dict(team=["infantry", "sniper", "tank"], max_steps=30)


class MixedOpponents:
    """Each game draws random play or a scripted bot, from a seeded stream; the bots are seeded too."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.bots = {name: make_bot(name, seed=seed, config=parallel_env(**SMALL).config)
                     for name in ("attack-nearest", "focus-fire")}
        self.calls = []

    def assign(self, game):
        return str(self.rng.choice(["random", "attack-nearest", "focus-fire"]))

    def act(self, name, raw, encoded):
        self.calls.append((name, len(raw)))
        if name == "random":
            return random_legal(encoded, self.rng)
        observations = np.stack([r["observation"] for r in raw])
        assert np.array_equal(observations, encoded["observation"])
        return self.bots[name].act_batch(observations, encoded[MASK_KEY])


def _pair(critic: str, games: int = 4, seed: int = 3):
    options = dict(seed=seed, env_id="wargame", learn=("red_*",), swap_seats=True, agent_id=True, critic=critic)
    one_by_one = MultiAgentVecEnv(lambda: parallel_env(**SMALL), games, **options)
    batched = BatchedMultiAgentVecEnv(parallel_env(**SMALL), games, **options)
    one_by_one.set_opponents(MixedOpponents(seed))
    batched.set_opponents(MixedOpponents(seed))
    return one_by_one, batched


@pytest.mark.parametrize("critic", ["state", "team", "local"])
def test_the_batched_core_plays_every_step_as_the_games_one_by_one(critic):
    one_by_one, batched = _pair(critic)
    assert batched.single_observation_space == one_by_one.single_observation_space
    assert batched.num_envs == one_by_one.num_envs == 12
    a, b = one_by_one.reset(), batched.reset()
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    ends = 0
    for step in range(150):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{key} differs at step {step}")
        x, y = one_by_one.step(random_legal(a, rng_a)), batched.step(random_legal(b, rng_b))
        for field in ("reward", "terminated", "truncated", "valid"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=f"{field} at step {step}")
        ends += int(x.terminated.sum() + x.truncated.sum())
        a, b = x.obs, y.obs
    results = one_by_one.pop_results()
    assert results == batched.pop_results() and len(results) >= 8  # games ended and restarted, scored alike
    assert {score for _, score in results} >= {0.0, 1.0} and ends > 0
    assert one_by_one.opponents.calls == batched.opponents.calls  # one call per opponent per step, same seats


def test_dead_rows_are_invalid_and_carry_no_observation():
    _, batched = _pair("state", games=2)
    obs = batched.reset()
    rng = np.random.default_rng(1)
    seen_dead = False
    for _ in range(200):
        result = batched.step(random_legal(obs, rng))
        obs = result.obs
        dead = ~batched._alive[np.arange(2)[:, None], batched._mine[batched._side]].reshape(-1)
        if dead.any():
            seen_dead = True
            assert not obs["observation"][dead].any() and not obs[AGENT_KEY][dead].any()
            assert (obs[MASK_KEY][dead] == 1).all()
            assert obs[CRITIC_KEY][dead].any()  # the game's state is still there for the value of its team
    assert seen_dead


def test_make_vec_env_steps_the_wargame_through_its_batched_core():
    config = MultiAgentConfig(learn=("red_*",), swap_seats=True, agent_id=True, critic="state")
    envs = make_vec_env("menger.envs.wargame:parallel_env", 15, seed=0, multiagent=config)
    assert isinstance(envs, BatchedMultiAgentVecEnv) and envs.num_games == 3 and envs.num_envs == 15
    obs = envs.reset()
    assert obs["observation"].shape == (15, envs.single_observation_space["observation"].shape[0])
    assert obs[CRITIC_KEY].shape[0] == 15
    aec = make_vec_env("menger.envs.wargame:env", 2, seed=0)  # the AEC form has no batched core
    assert type(aec) is MultiAgentVecEnv
