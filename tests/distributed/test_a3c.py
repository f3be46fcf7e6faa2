"""A3C and the sharded parameter server: shards, sync = all-reduce, staleness, and gradients never half-applied."""
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.nn.utils import parameters_to_vector

from menger import api
from menger.config import ConfigError
from menger.coordinator import make_coordinator
from menger.core import UnrollMeta
from menger.experiment import load_experiment
from menger.learners import A2CLearner, GradientLearner, make_learner
from menger.learners.a3c import A3CGradient, GRADIENT_STATS, gradient_size
from menger.learners.distributed import LearnerGroup, share_bounds
from menger.learners.learner import Adam, clip_gradients
from menger.models import build_policy
from menger.params.sharded import ShardedParameterServer, shard_bounds
from menger.transport import UnrollBuffers, UnrollSpec

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
T, COLUMNS = 8, 16


def _config(*extra):
    return load_experiment("cartpole-a3c", ["runtime.actors=2", "runtime.envs_per_actor=8", f"runtime.unroll_length={T}",
                                            "runtime.learner.device=cpu", *extra])


def _policy(seed: int = 0):
    torch.manual_seed(seed)
    return build_policy(OBS, ACT, _config().model, "a3c")


def _flat(policy) -> torch.Tensor:
    return parameters_to_vector([p.detach() for p in policy.parameters()]).clone()


def _unrolls(seed: int, columns: int = COLUMNS, gradient: int = 0) -> UnrollBuffers:
    """A random unroll slot of `columns` envs (and, with `gradient`, room for an actor-learner's gradient)."""
    g = torch.Generator().manual_seed(seed)
    buffers = UnrollBuffers(UnrollSpec(OBS, ACT, T, columns, gradient=gradient), 1, shared=False)
    slot = buffers.slot(0)
    slot["obs"].copy_(torch.rand(slot["obs"].shape, generator=g) * 2 - 1)
    slot["actions"].copy_(torch.randint(0, 2, slot["actions"].shape, generator=g))
    slot["rewards"].copy_(torch.rand(slot["rewards"].shape, generator=g))
    slot["dones"].copy_((torch.rand(slot["dones"].shape, generator=g) < 0.1).float())
    slot["valid"].copy_((torch.rand(slot["valid"].shape, generator=g) > 0.1).float())
    return buffers


# ----- the sharded server ------------------------------------------------------------------------
def test_shards_hold_contiguous_runs_of_whole_tensors_balanced_by_size():
    assert shard_bounds([10, 10, 10, 10], 2) == [(0, 2), (2, 4)]
    assert shard_bounds([100, 1, 1, 100], 2) == [(0, 2), (2, 4)]
    assert shard_bounds([5, 5, 5], 3) == [(0, 1), (1, 2), (2, 3)]
    assert shard_bounds([1000, 1, 1, 1], 3) == [(0, 1), (1, 2), (2, 4)]  # each shard keeps at least one tensor
    sizes = [p.numel() for p in _policy().parameters()]
    for shards in range(1, len(sizes) + 1):
        bounds = shard_bounds(sizes, shards)
        assert len(bounds) == shards and bounds[0][0] == 0 and bounds[-1][1] == len(sizes)
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(bounds, bounds[1:]))
    with pytest.raises(ValueError, match="has only 3 parameter tensors"):
        shard_bounds([1, 2, 3], 4)


@pytest.mark.parametrize("max_grad_norm", [0.5, 0.0])
def test_any_number_of_shards_steps_exactly_like_one_clipped_adam(max_grad_norm):
    """Adam is elementwise and the clip is global, so sharding changes no bit of the parameters."""
    reference = _policy()
    params = [p for p in reference.parameters() if p.requires_grad]
    adam = Adam(params, lr=1e-2, eps=1e-5)
    servers = []
    for shards in (1, 2, 3):
        policy = _policy()
        learned = [p for p in policy.parameters() if p.requires_grad]
        servers.append((policy, ShardedParameterServer(learned, shards, max_grad_norm,
                                                       lambda ps: Adam(ps, lr=1e-2, eps=1e-5))))
    g = torch.Generator().manual_seed(3)
    for _ in range(4):
        flat = torch.randn(gradient_size(reference), generator=g)
        offset = 0
        for p in params:
            p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        clip_gradients(params, max_grad_norm)
        adam.step()
        for _, server in servers:
            server.apply(flat.clone()[None], [1.0])
    for policy, server in servers:
        assert torch.equal(_flat(policy), _flat(reference)), f"{len(server.shards)} shard(s) differ"
    saved = servers[1][1].state_dict()
    assert saved["sizes"] == [s.size for s in servers[1][1].shards] and saved["applied"] == 4
    with pytest.raises(ValueError, match="runtime.parameter_server.shards"):
        servers[2][1].load_state_dict(saved)


def test_a_sync_round_of_two_pushed_gradients_equals_two_all_reduced_learners_bit_for_bit():
    """K actor-learners' gradients averaged by the server = K data-parallel learners' all-reduce, same unrolls."""
    allreduce = _config("runtime.learner.mode=allreduce", "runtime.learner.count=2",
                        "runtime.learner.collective_timeout_s=30")
    server = _config("runtime.parameter_server.update=sync")
    group, ps = LearnerGroup.start(allreduce, OBS, ACT), None
    try:
        torch.manual_seed(0)
        ranks = make_learner(allreduce, build_policy(OBS, ACT, allreduce.model, "a3c"), torch.device("cpu"))
        torch.manual_seed(0)  # both before attach, which sets the thread count (and so the initialisation's bits)
        ps = make_learner(server, build_policy(OBS, ACT, server.model, "a3c"), torch.device("cpu"))
        group.attach(ranks)
        assert isinstance(ranks, A2CLearner) and isinstance(ps, GradientLearner)
        assert torch.equal(_flat(ranks.policy), _flat(ps.policy))
        size = gradient_size(ps.policy)
        for step in range(3):
            batch = _unrolls(step).gather([0])
            group.update(ranks, batch, frames=step * T * COLUMNS)
            pushed = []
            for start, stop in share_bounds(COLUMNS, 2):  # each actor-learner's unroll, on the server's parameters
                worker = build_policy(OBS, ACT, server.model, "a3c")
                worker.load_state_dict(ps.policy.state_dict())
                share = _unrolls(step, stop - start, gradient=size)
                view = share.slot(0)
                for name in ("obs", "actions", "rewards", "dones", "valid"):
                    view[name].copy_(batch[name][:, start:stop])
                A3CGradient(worker, server.a3c).compute(view)
                pushed.append(share.gather([0]))
            stats = ps.update({name: torch.cat([p[name] for p in pushed]) for name in ("gradient", "gradient_stats")},
                              frames=step * T * COLUMNS)
            assert stats["gradients"] == 2 and math.isfinite(stats["loss"])
            assert torch.equal(_flat(ps.policy), _flat(ranks.policy)), f"differ after step {step + 1}"
            assert torch.equal(group.parameters(1), _flat(ranks.policy))
    finally:
        group.close()
        if ps is not None:
            ps.close()  # its shards are processes (the processes launcher's)


def test_the_actor_learners_gradient_is_the_learners_on_the_same_unroll():
    config = _config("runtime.learner.mode=allreduce")
    learner = make_learner(config, _policy(), torch.device("cpu"))
    buffers = _unrolls(7, gradient=gradient_size(learner.policy))
    view = buffers.slot(0)
    A3CGradient(learner.policy, config.a3c).compute(view)
    from menger.learners.a3c import a3c_unroll_loss

    loss, stats = a3c_unroll_loss(learner.policy, buffers.gather([0]), config.a3c)
    loss.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in learner.policy.parameters() if p.requires_grad])
    assert torch.equal(view["gradient"], expected)
    assert view["gradient_stats"][GRADIENT_STATS.index("loss")] == pytest.approx(float(loss.detach()))


def test_gae_lambda_trains_on_lambda_returns_and_one_is_the_papers_n_step_returns():
    """a3c.gae_lambda: the value target is the lambda-return and the advantage GAE's; at 1 both are the n-step
    returns bootstrapped from the unroll's last value, computed here by hand."""
    from menger.learners.a3c import a3c_unroll_loss
    from menger.losses import a3c_loss, gae

    policy, batch = _policy(), _unrolls(7).gather([0])
    ev = policy.evaluate(batch["obs"].float(), batch["actions"], batch["core_state"], batch["dones"])
    values, discounts = ev.values.detach().float(), 0.99 * (1.0 - batch["dones"])
    n_step = torch.zeros_like(batch["rewards"])
    following = values[-1]
    for t in reversed(range(T)):
        following = n_step[t] = batch["rewards"][t] + discounts[t] * following
    for lam, returns in ((1.0, n_step), (0.5, gae(batch["rewards"], values[:-1], values[-1], discounts, 0.5)[1])):
        config = _config(f"a3c.gae_lambda={lam}")
        loss, _ = a3c_unroll_loss(policy, batch, config.a3c)
        expected, _ = a3c_loss(ev.logp, ev.values[:-1], ev.entropy, returns, batch["valid"],
                               value_coef=config.a3c.value_coef, entropy_coef=config.a3c.entropy_coef)
        assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert not torch.allclose(returns, n_step)


def test_an_actor_learner_scales_rewards_with_the_statistics_its_version_carries():
    """With env.normalize.reward the network carries 1/std of the return (a parameter that never trains): the
    actor-learner's gradient is the loss on rewards scaled and clipped by it, as the trainer scales a learner's."""
    from menger.learners.a3c import a3c_unroll_loss
    from menger.models.normalize import Moments

    config = _config("env.normalize.reward=true", "env.normalize.clip_reward=2.0")
    policy = build_policy(OBS, ACT, config.model, "a3c", config.env.normalize)
    assert not policy.reward_scale.inv_std.requires_grad and gradient_size(policy) == gradient_size(_policy())
    policy.reward_scale.set(Moments.of(np.array([0.0, 0.5])), eps=0.0)  # std 0.25: rewards of up to 1 become 4 -> 2
    assert float(policy.reward_scale.inv_std) == 4.0
    buffers = _unrolls(7, gradient=gradient_size(policy))
    view = buffers.slot(0)
    A3CGradient(policy, config.a3c).compute(view)
    batch = buffers.gather([0])
    raw_loss, _ = a3c_unroll_loss(policy, batch, config.a3c)
    batch["rewards"] = (batch["rewards"] * 4.0).clamp(-2.0, 2.0)
    loss, _ = a3c_unroll_loss(policy, batch, config.a3c)
    loss.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in policy.parameters() if p.requires_grad])
    assert torch.equal(view["gradient"], expected)
    assert view["gradient_stats"][GRADIENT_STATS.index("loss")] == pytest.approx(float(loss.detach()))
    assert float(loss.detach()) != pytest.approx(float(raw_loss.detach()))


def test_a_checkpoint_saved_before_the_reward_scale_travelled_still_loads():
    config = _config("env.normalize.reward=true")
    policy = build_policy(OBS, ACT, config.model, "a3c", config.env.normalize)
    old = {name: tensor for name, tensor in _policy().state_dict().items()}
    assert "reward_scale.inv_std" not in old
    policy.load_state_dict(old)  # strict: only the scale may be missing, and the trainer sets it again
    with pytest.raises(RuntimeError, match="Missing key"):
        policy.load_state_dict({name: t for name, t in old.items() if not name.endswith("bias")})


def test_a_parameter_server_run_normalises_with_statistics_from_every_actor_learner(quiet, tmp_path):
    from menger.checkpoint import CheckpointManager, unflatten_state

    run = api.train("a3c", overrides=[*quiet, "env.id=Pendulum-v1", "runtime.launcher=processes",
                                      "runtime.actors=2", "runtime.envs_per_actor=4", f"runtime.unroll_length={T}",
                                      "runtime.learner.device=cpu", "checkpoint.interval_s=0",
                                      "env.normalize.obs=true", "env.normalize.reward=true",
                                      "stop.env_frames=2048"], run_dir=tmp_path / "run")
    checkpoint = CheckpointManager(run.run_dir / "checkpoints").load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    stats, model = state["normalization"], state["learner"]["model"]
    assert stats["obs"]["count"] == stats["ret"]["count"] == state["accounts"]["accepted"] >= 2048
    ret_var = stats["ret"]["m2"] / stats["ret"]["count"]
    assert float(model["reward_scale.inv_std"]) == pytest.approx(1 / math.sqrt(ret_var + 1e-8), rel=1e-6)
    obs_var = stats["obs"]["m2"] / stats["obs"]["count"]
    np.testing.assert_allclose(model["obs_normalizer.inv_std"].numpy(), 1 / np.sqrt(obs_var + 1e-8), rtol=1e-6)
    assert run.final_metrics["learner/updates"] > 0 and math.isfinite(run.final_metrics["learner/loss"])


# ----- staleness ---------------------------------------------------------------------------------
def _meta(actor: int, sequence: int, version: int) -> UnrollMeta:
    return UnrollMeta(actor, 0, sequence, version, T * 8, (), ())


def test_an_async_server_applies_each_gradient_alone_and_drops_those_staler_than_the_bound():
    config = _config("runtime.parameter_server.max_staleness=2")
    coordinator = make_coordinator(config)
    assert config.coordination == "async" and config.batch_columns == 8
    coordinator.attach(type("Transport", (), {"num_slots": lambda self: 4})())
    for actor in range(2):
        coordinator.actor_started(actor, 0)
    granted = dict((actor, slot) for actor, slot in reversed(coordinator.grants()))
    for version in range(1, 6):
        coordinator.published(version)
    fresh = coordinator.accept(granted[0], _meta(0, 1, 3))   # 5 - 3 = 2 versions old: within the bound
    stale = coordinator.accept(granted[1], _meta(1, 1, 2))   # 3 versions old: dropped
    assert fresh.accepted and fresh.reason is None
    assert not stale.accepted and stale.reason == "policy_lag"
    assert coordinator.batch_ready()
    batch = coordinator.take_batch(lambda slots: {"slots": slots})
    assert batch.data["slots"] == [granted[0]] and batch.lags == [2]
    assert not coordinator.batch_ready()
    # accepted within the bound, then older than it by the time it would be applied: dropped, its slot regranted
    slot = coordinator.grants()[0][1]
    assert coordinator.accept(slot, _meta(coordinator.owner(slot), 2, 5)).accepted
    coordinator.published(7)
    assert coordinator.batch_ready() and coordinator.take_expired() == []
    coordinator.published(8)
    assert [m.policy_version for m in coordinator.take_expired()] == [5] and coordinator.take_expired() == []
    assert not coordinator.batch_ready() and (coordinator.owner(slot), slot) in coordinator.grants()


def test_a_run_with_a_staleness_bound_of_zero_applies_only_fresh_gradients(quiet, tmp_path):
    result = api.train("cartpole-a3c", overrides=[*quiet, "runtime.launcher=threads", "runtime.actors=2",
                                                  "runtime.parameter_server.max_staleness=0", "stop.env_frames=20000",
                                                  "stop.target_return=null"], run_dir=tmp_path / "run")
    m = result.final_metrics
    assert m["learner/policy_lag_max"] == 0
    assert m["time/env_frames"] >= 20000 and m["learner/updates"] > 0


# ----- config ------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, words", [
    (["runtime.learner.count=2"], "runtime.learner.count=2: with a parameter server"),
    (["runtime.coordination.mode=sync"], "runtime.parameter_server.update='async'"),
    (["runtime.coordination.batch_unrolls=4"], "applies each gradient as it arrives"),
    (["runtime.inference.mode=central"], "runtime.inference.mode=central"),
])
def test_a_parameter_server_refuses_what_it_cannot_do_naming_the_key(extra, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _config(*extra)


def test_only_a3c_has_gradient_workers_for_now():
    with pytest.raises(ConfigError, match="gradient workers are built for a3c"):
        load_experiment("cartpole-impala", ["runtime.learner.mode=parameter_server"])


# ----- faults ------------------------------------------------------------------------------------
def test_an_actor_killed_while_writing_its_gradient_never_has_it_applied(quiet, tmp_path, monkeypatch):
    """One actor process writes NaN into half of its gradient slot and is killed before its tag goes out: the
    server never reads that slot, the actor's next incarnation takes over, and every update is a whole gradient."""
    import multiprocessing as mp

    killed, parent, real = mp.get_context("fork").Value("i", 0), os.getpid(), A3CGradient.compute
    calls = {"count": 0}

    def dies_half_way(self, view):
        calls["count"] += 1
        if os.getpid() != parent and calls["count"] == 3:
            with killed.get_lock():
                first = killed.value == 0
                killed.value = 1
            if first:
                flat = view["gradient"]
                flat[: flat.numel() // 2] = float("nan")
                os._exit(9)
        real(self, view)

    monkeypatch.setattr(A3CGradient, "compute", dies_half_way)
    result = api.train("cartpole-a3c", overrides=[*quiet, "runtime.launcher=processes", "runtime.actors=2",
                                                  "stop.env_frames=30000", "stop.target_return=null"],
                       run_dir=tmp_path / "run")
    m = result.final_metrics
    assert killed.value == 1 and m["actor/restarts"] >= 1
    assert m["transport/frames_dropped/actor_lost"] == 16 * 16  # the killed unroll, counted as lost
    assert m["time/env_frames"] == m["learner/updates"] * 16 * 16  # every update applied one whole gradient
    policy = api.load_policy(result.run_dir)
    finite = all(torch.isfinite(p).all() for p in policy.network.parameters())
    print(f"actor killed with half its gradient written: restarts {m['actor/restarts']:.0f}, frames lost "
          f"{m['transport/frames_dropped/actor_lost']:.0f}, {m['learner/updates']:.0f} updates of whole gradients, "
          f"parameters finite: {finite}")
    assert finite
