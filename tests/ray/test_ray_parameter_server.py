"""The parameter server's shards as Ray actors: the same steps as in one process, a killed shard remade from its
snapshot, and A3C trained through them on the simulated cluster."""
from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from torch.nn.utils import parameters_to_vector

ray = pytest.importorskip("ray")

from ray_harness import SMALL_RAY_RUN  # noqa: E402

from menger import api  # noqa: E402
from menger.experiment import load_experiment  # noqa: E402
from menger.learners.learner import Adam  # noqa: E402
from menger.models import build_policy  # noqa: E402
from menger.params.ray import RayShards  # noqa: E402
from menger.params.sharded import ShardedParameterServer  # noqa: E402

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)


def _servers(shards: int, snapshot_every: int = 100):
    model = load_experiment("cartpole-a3c").model
    out = []
    for make in (ShardedParameterServer, RayShards):
        torch.manual_seed(0)
        policy = build_policy(OBS, ACT, model, "a3c")
        params = [p for p in policy.parameters() if p.requires_grad]
        kwargs = {"snapshot_every": snapshot_every} if make is RayShards else {}
        out.append((policy, make(params, shards, 0.5, lambda ps: Adam(ps, lr=1e-2, eps=1e-5), **kwargs)))
    return out


def _flat(policy) -> torch.Tensor:
    return parameters_to_vector([p.detach() for p in policy.parameters()])


def _gradients(step: int, size: int, count: int = 2) -> torch.Tensor:
    return torch.randn(count, size, generator=torch.Generator().manual_seed(step))


def test_shards_on_ray_step_exactly_like_shards_in_one_process(cluster):
    (local_policy, local), (ray_policy, remote) = _servers(3)
    try:
        for step in range(4):
            gradients = _gradients(step, local.size)
            for group in local.param_groups + remote.param_groups:
                group["lr"] = 1e-2 / (step + 1)  # the LR schedule reaches every shard
            local.apply(gradients.clone(), [0.5, 0.5])
            remote.apply(gradients.clone(), [0.5, 0.5])
            assert torch.equal(_flat(local_policy), _flat(ray_policy)), f"differ after step {step + 1}"
        saved = remote.state_dict()
        for mine, theirs in zip(local.state_dict()["shards"], saved["shards"]):
            for i, entry in mine["state"].items():
                assert torch.equal(entry["exp_avg_sq"], theirs["state"][i]["exp_avg_sq"])
        assert saved["applied"] == local.applied == 8
    finally:
        remote.close()


def test_a_killed_shard_is_remade_from_its_last_snapshot_and_the_step_goes_on(cluster):
    (local_policy, local), (ray_policy, remote) = _servers(2, snapshot_every=2)
    try:
        for step in range(2):  # a snapshot after step 2
            gradients = _gradients(step, local.size)
            local.apply(gradients.clone(), [0.5, 0.5])
            remote.apply(gradients.clone(), [0.5, 0.5])
        ray.kill(remote.actors[1], no_restart=True)
        gradients = _gradients(2, local.size)
        local.apply(gradients.clone(), [0.5, 0.5])
        remote.apply(gradients.clone(), [0.5, 0.5])
        assert remote.restarts == 1 and remote.metrics() == {"ps/shard_restarts": 1}
        # the snapshot was taken at the last step, so nothing was lost: still the same parameters
        assert torch.equal(_flat(local_policy), _flat(ray_policy))
        assert torch.isfinite(_flat(ray_policy)).all()
        print(f"shard actor killed: remade {remote.restarts} time(s) from its snapshot, the step went on, parameters "
              "equal to the in-process server's")
    finally:
        remote.close()


def test_a3c_trains_through_shards_on_ray(cluster, tmp_path):
    result = api.train("cartpole-a3c", overrides=[*SMALL_RAY_RUN, "runtime.actors=2", "stop.env_frames=8192",
                                                  "stop.target_return=null", "runtime.parameter_server.shards=2"],
                       run_dir=str(tmp_path / "a3c"))
    m = result.final_metrics
    assert m["learner/updates"] >= 8192 // (4 * 32) - 4  # about one update per unroll, a few stale ones dropped
    assert m["ps/shard_restarts"] == 0
    assert m["learner/policy_lag_max"] <= 4
