"""A short learning test: gpushare-ppo, from a network with no FGD prior, learns to place tasks on a small
synthetic cluster better than placing them at random (held-out episodes, greedy policy)."""

import numpy as np
import pytest

from menger import api
from menger.apps.gpucluster.env import GpuSharingEnv
from menger.models.encoders import MASK_KEY

pytestmark = pytest.mark.slow

SMALL = {"num_nodes": 8, "synthetic_tasks": 300}
HELD_OUT = range(1_000_000, 1_000_030)


def mean_return(env, choose) -> float:
    returns = []
    for seed in HELD_OUT:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, _ = env.step(choose(obs))
            total += reward
        returns.append(total)
    return float(np.mean(returns))


def test_gpushare_ppo_learns_to_pack_better_than_random(tmp_path, quiet):
    overrides = [*quiet, "runtime.launcher=processes", "checkpoint.interval_s=0", "runtime.seed=1",
                 "model.kwargs.fgd_prior=0", "env.kwargs.num_nodes=8", "env.kwargs.synthetic_tasks=300",
                 "runtime.envs_per_actor=8", "runtime.unroll_length=64", "stop.env_frames=60000",
                 "stop.wall_clock_s=null", "ppo.gamma=0.99", "ppo.lr=0.001"]
    api.train("gpushare-ppo", overrides=overrides, run_dir=str(tmp_path / "run"))
    policy = api.load_policy(tmp_path / "run")
    env = GpuSharingEnv(**SMALL)
    rng = np.random.default_rng(0)
    trained = mean_return(env, lambda obs: int(policy.act({k: v[None] for k, v in obs.items()})[0]))
    random = mean_return(env, lambda obs: int(rng.choice(np.flatnonzero(obs[MASK_KEY]))))
    assert trained > random + 2.5, (trained, random)   # seeds 1-3 here: -42.6, -42.8, -42.5 against -47.9
