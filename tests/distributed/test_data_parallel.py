"""Data-parallel learners: identical parameters on every rank after every step, and the same step as one learner."""
import os
import signal

import gymnasium as gym
import pytest
import torch
from torch.nn.utils import parameters_to_vector

from menger import api
from menger.experiment import load_experiment
from menger.learners import make_learner
from menger.config import ConfigError
from menger.learners.distributed import LearnerGroup, LearnerProcessError, share_bounds
from menger.runtime import Observer
from menger.models import build_policy
from menger.transport import UnrollBuffers, UnrollSpec

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
T, COLUMNS = 8, 16


def _config(*extra):
    return load_experiment("cartpole-impala", ["runtime.actors=2", "runtime.envs_per_actor=8", f"runtime.unroll_length={T}",
                                               "runtime.learner.device=cpu", "runtime.learner.count=2",
                                               "runtime.learner.collective_timeout_s=30", *extra])


def _batch(seed: int) -> dict:
    """A random all-valid batch: averaged share gradients equal the whole batch's only when every step counts."""
    g = torch.Generator().manual_seed(seed)
    buffers = UnrollBuffers(UnrollSpec(OBS, ACT, T, COLUMNS), 1, shared=False)
    slot = buffers.slot(0)
    slot["obs"].copy_(torch.rand(slot["obs"].shape, generator=g) * 2 - 1)
    slot["actions"].copy_(torch.randint(0, 2, slot["actions"].shape, generator=g))
    slot["logp"].fill_(-0.6931)
    slot["rewards"].copy_(torch.rand(slot["rewards"].shape, generator=g))
    slot["dones"].copy_((torch.rand(slot["dones"].shape, generator=g) < 0.1).float())
    slot["valid"].fill_(1.0)
    return buffers.gather([0])


def _flat(learner) -> torch.Tensor:
    return parameters_to_vector([p.detach() for p in learner.policy.parameters()]).clone()


def _learner(config):
    torch.manual_seed(config.runtime.seed)
    return make_learner(config, build_policy(OBS, ACT, config.model), torch.device("cpu"))


def test_share_bounds_cover_every_column_once():
    assert share_bounds(16, 2) == [(0, 8), (8, 16)]
    assert share_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]


def test_a_split_too_small_for_the_minibatches_is_refused_when_the_config_is_read():
    with pytest.raises(ConfigError, match="fewer than the 9 minibatch"):
        _config("vtrace.minibatches=9")


def test_two_learners_stay_identical_and_step_like_one_learner_on_the_whole_batch():
    config = _config()
    group = LearnerGroup.start(config, OBS, ACT)
    try:
        learner, reference = _learner(config), _learner(config)
        group.attach(learner)
        start = _flat(learner)
        assert torch.equal(group.parameters(1), start)
        for step in range(3):
            batch = _batch(step)
            group.update(learner, batch, frames=step * T * COLUMNS)
            reference.update(batch, frames=step * T * COLUMNS)
            assert torch.equal(group.parameters(1), _flat(learner)), f"ranks differ after step {step + 1}"
            torch.testing.assert_close(_flat(learner), _flat(reference), rtol=1e-4, atol=1e-5)
        assert (_flat(learner) - start).abs().max() > 1e-3  # the steps moved the parameters
    finally:
        group.close()


def test_a_dead_learner_process_is_named_instead_of_a_hang():
    group = LearnerGroup.start(_config(), OBS, ACT)
    try:
        learner = _learner(_config())
        group.attach(learner)
        os.kill(group.processes[0].pid, signal.SIGKILL)
        group.processes[0].join(5.0)
        with pytest.raises(LearnerProcessError, match=r"rank 1 \(pid \d+, exit code -9\) died"):
            group.update(learner, _batch(0), frames=0)
    finally:
        group.close()


class RankDrift(Observer):
    """After every update: the largest difference between rank 1's parameters and rank 0's."""

    def __init__(self):
        self.checks: list[float] = []

    def on_update(self, trainer, stats):
        self.checks.append(float((trainer.learner_group.parameters(1) - _flat(trainer.learner)).abs().max()))


@pytest.mark.parametrize("preset", ["cartpole-impala", "cartpole-ppo"])
def test_trainer_with_two_learners_keeps_them_identical_after_every_step(tmp_path, quiet, preset):
    drift = RankDrift()
    result = api.train(preset, quiet + ["runtime.learner.count=2", "runtime.launcher=processes", "runtime.actors=2",
                                        "runtime.envs_per_actor=8", "stop.env_frames=3000", "stop.target_return=null"],
                       run_dir=str(tmp_path / "run"), observers=[drift])
    checks = drift.checks
    assert len(checks) >= 3 and checks == [0.0] * len(checks), checks
    assert result.final_metrics["learner/updates"] == len(checks)


def test_resumed_learners_start_from_the_same_checkpoint_and_stay_identical(tmp_path, quiet):
    """Rank 1 loads the checkpoint itself: a different optimizer state would make the ranks drift apart."""
    run_dir = tmp_path / "run"
    overrides = quiet + ["runtime.learner.count=2", "runtime.actors=2", "runtime.envs_per_actor=8",
                         "stop.target_return=null", "checkpoint.interval_updates=1"]
    api.train("cartpole-impala", overrides + ["stop.env_frames=1500"], run_dir=str(run_dir))
    drift = RankDrift()
    result = api.resume(run_dir, ["stop.env_frames=4000"], observers=[drift])
    checks = drift.checks
    assert len(checks) >= 3 and checks == [0.0] * len(checks), checks
    assert result.final_metrics["time/env_frames"] >= 4000


def _listening_sockets(pids: list[int]) -> list[str]:
    """Local addresses of the TCP sockets in LISTEN state that any of `pids` holds, from /proc (no ss needed)."""
    inodes = set()
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.append(fields[1])
    return addresses


def _is_loopback(address: str) -> bool:
    host = address.split(":")[0]
    if len(host) == 8:  # IPv4, little-endian hex: 127.x.x.x ends in 7F
        return host.endswith("7F")
    return host in ("00000000000000000000000001000000", "0000000000000000FFFF00000100007F")  # ::1, ::ffff:127.0.0.1


def test_the_learners_rendezvous_and_collectives_listen_on_no_outside_address():
    """With N learners nothing reachable from the network may listen: no TCP store on all interfaces, gloo on lo."""
    config = _config()
    group = LearnerGroup.start(config, OBS, ACT)
    try:
        learner = _learner(config)
        group.attach(learner)
        group.update(learner, _batch(0), frames=T * COLUMNS)
        pids = [os.getpid()] + [process.pid for process in group.processes]
        listening = _listening_sockets(pids)
        print(f"listening sockets of the {len(pids)} learner processes: {listening}")
        assert all(_is_loopback(address) for address in listening), listening
    finally:
        group.close()
