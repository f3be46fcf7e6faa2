"""The parameter server's shards as processes of their own (the processes launcher): the same steps as the
in-process server bit for bit, interchangeable checkpoints, and a shard that dies ends the run naming it."""
import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from menger import api
from menger.checkpoint import CheckpointManager, unflatten_state
from menger.experiment import load_experiment
from menger.learners import GradientLearner, make_learner
from menger.learners.learner import Adam
from menger.models import build_policy
from menger.params.sharded import ParameterServerError, ShardedParameterServer, ShardProcesses
from menger.runtime import Observer

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
LR = 1e-2


def _config(*extra):
    return load_experiment("cartpole-a3c", ["runtime.actors=2", "runtime.envs_per_actor=8",
                                            "runtime.learner.device=cpu", *extra])


def _params(seed: int = 0) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    return [p for p in build_policy(OBS, ACT, _config().model, "a3c").parameters() if p.requires_grad]


def _adam(params):
    return Adam(params, lr=LR, eps=1e-5)


def _steps(servers, count: int, seed: int, first: int = 0):
    """`count` steps of every server on the same gradients: 1, 2 or 3 at a time (async, or sync rounds), with
    the LR the schedule moves; the returned norms must agree too."""
    size = sum(p.numel() for p in servers[0][0])
    g = torch.Generator().manual_seed(seed)
    for step in range(first, first + count):
        k = 1 + step % 3
        gradients = torch.randn(k, size, generator=g) * (1 + step % 4)  # some steps clip, some do not
        norms = []
        for _, server in servers:
            for group in server.param_groups:
                group["lr"] = LR * (1 - step / 100)
            norms.append(server.apply(gradients.clone(), [1.0 / k] * k))  # the in-process one scales in place
        assert all(torch.equal(norm, norms[0]) for norm in norms), f"norms differ at step {step + 1}: {norms}"


def _assert_same(a, b):
    params_a, server_a = a
    params_b, server_b = b
    assert all(torch.equal(x, y) for x, y in zip(params_a, params_b)), "parameters differ"
    state_a, state_b = server_a.state_dict(), server_b.state_dict()
    assert state_a["sizes"] == state_b["sizes"] and state_a["applied"] == state_b["applied"]
    for shard_a, shard_b in zip(state_a["shards"], state_b["shards"]):
        assert shard_a["param_groups"] == shard_b["param_groups"]
        assert shard_a["state"].keys() == shard_b["state"].keys()
        for i, entry in shard_a["state"].items():
            for name in ("step", "exp_avg", "exp_avg_sq"):
                assert torch.equal(entry[name], shard_b["state"][i][name]), f"{name} of tensor {i} differs"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


# ----- the same server, in processes -------------------------------------------------------------
@pytest.mark.parametrize("max_grad_norm", [0.5, 0.0])
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_shard_processes_step_bit_for_bit_like_the_in_process_server(shards, max_grad_norm):
    local, remote = _params(), _params()
    reference = (local, ShardedParameterServer(local, shards, max_grad_norm, _adam))
    processes = ShardProcesses(remote, shards, max_grad_norm, _adam)
    try:
        assert len(processes.pids) == shards and processes.sizes == [s.size for s in reference[1].shards]
        start = [p.clone() for p in remote]
        _steps([reference, (remote, processes)], 12, seed=shards)
        _assert_same(reference, (remote, processes))
        assert processes.applied == 24 and any(not torch.equal(p, q) for p, q in zip(remote, start))
    finally:
        processes.close()


def test_checkpoints_move_between_the_in_process_server_and_shard_processes_either_way():
    local, remote = _params(), _params()
    reference = (local, ShardedParameterServer(local, 2, 0.5, _adam))
    processes = ShardProcesses(remote, 2, 0.5, _adam)
    resumed_params = _params(seed=1)  # other parameters and fresh moments: the load must replace both
    resumed = ShardProcesses(resumed_params, 2, 0.5, _adam)
    back_params = _params(seed=2)
    back = (back_params, ShardedParameterServer(back_params, 2, 0.5, _adam))
    try:
        _steps([reference, (remote, processes)], 5, seed=7)
        with torch.no_grad():  # as Learner.load_state_dict does it: the model first, then the optimizer
            for mine, saved in zip(resumed_params, local):
                mine.copy_(saved)
        resumed.load_state_dict(reference[1].state_dict())
        for mine, saved in zip(back_params, remote):
            mine.data.copy_(saved)
        back[1].load_state_dict(processes.state_dict())
        _steps([reference, (remote, processes), (resumed_params, resumed), back], 5, seed=8, first=5)
        for other in ((remote, processes), (resumed_params, resumed), back):
            _assert_same(reference, other)
        with pytest.raises(ValueError, match="runtime.parameter_server.shards"):
            resumed.load_state_dict(ShardedParameterServer(_params(), 3, 0.5, _adam).state_dict())
    finally:
        processes.close()
        resumed.close()


def test_the_learner_builds_shard_processes_on_the_processes_launcher_only_and_close_ends_them():
    threads = make_learner(_config("runtime.launcher=threads"), build_policy(OBS, ACT, _config().model, "a3c"),
                           torch.device("cpu"))
    assert isinstance(threads, GradientLearner) and isinstance(threads.optimizer, ShardedParameterServer)
    learner = make_learner(_config("runtime.launcher=processes"), build_policy(OBS, ACT, _config().model, "a3c"),
                           torch.device("cpu"))
    server = learner.optimizer
    assert isinstance(server, ShardProcesses)
    pids = server.pids
    assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
    learner.update({"gradient": torch.randn(1, server.size), "gradient_stats": torch.zeros(1, 5)}, frames=0)
    assert all(torch.equal(p, v) for p, v in zip(learner.params, server._views))  # the step reached the learner
    learner.close()
    assert all(_gone(pid) for pid in pids) and server.pids == []
    learner.close()  # twice: nothing left to do


def test_answers_to_a_round_an_interrupt_cut_short_are_dropped(monkeypatch):
    """Ctrl-C while the driver waits: the trainer still saves a checkpoint, through the same pipes."""
    local, remote = _params(), _params()
    reference = (local, ShardedParameterServer(local, 2, 0.5, _adam))
    server = ShardProcesses(remote, 2, 0.5, _adam)
    try:
        answer, calls = ShardProcesses._answer, []

        def interrupted(self, *args):
            calls.append(args)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return answer(self, *args)

        monkeypatch.setattr(ShardProcesses, "_answer", interrupted)
        gradient = torch.randn(1, server.size)
        with pytest.raises(KeyboardInterrupt):
            server.apply(gradient.clone(), [1.0])  # the shards step; the driver stops waiting for their answers
        reference[1].apply(gradient.clone(), [1.0])  # the shards took the step; the next round settles it
        assert server.state_dict()["applied"] == reference[1].applied
        _assert_same(reference, (remote, server))  # what a closing checkpoint saves: parameters match moments
        _steps([reference, (remote, server)], 3, seed=5)
        _assert_same(reference, (remote, server))
    finally:
        server.close()


# ----- faults ------------------------------------------------------------------------------------
def test_a_shard_killed_between_steps_ends_the_next_apply_naming_it():
    server = ShardProcesses(_params(), 2, 0.5, _adam)
    try:
        gradient = torch.randn(1, server.size)
        server.apply(gradient, [1.0])
        victim = server.processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        words = (rf"parameter server shard 1 \(pid {victim.pid}, exit code -9, killed by SIGKILL\) died during the "
                 r"step on pushed gradient 2; the run cannot go on without it: resume from the last checkpoint "
                 r"with `menger resume RUN_DIR`")
        with pytest.raises(ParameterServerError, match=words):
            server.apply(gradient, [1.0])
        with pytest.raises(ParameterServerError, match="shard 1"):
            server.state_dict()
    finally:
        pids = server.pids
        server.close()
    assert all(_gone(pid) for pid in pids)


def _broken_optimizer(params):
    raise ValueError("this optimizer cannot be built")


def test_a_shards_own_error_is_reported_with_its_traceback_and_leaves_no_process():
    with pytest.raises(ParameterServerError, match=r"shard 0 \(pid \d+\) failed during start-up: ValueError: "
                                                   "this optimizer cannot be built") as info:
        ShardProcesses(_params(), 2, 0.5, _broken_optimizer)
    (role, (text, child_tb)), = list(info.value.child_errors.items())[:1]
    assert role == "parameter server shard 0" and "_broken_optimizer" in child_tb
    assert not [child for child in mp.active_children() if child.name.startswith("menger-ps-shard")]


def test_a_silent_shard_is_named_when_its_deadline_passes():
    server = ShardProcesses(_params(), 2, 0.5, _adam, timeout_s=0.5)
    stopped = server.pids[0]
    os.kill(stopped, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(ParameterServerError, match=rf"shard 0 \(pid {stopped}\) gave no answer during the step "
                                                       r"on pushed gradient 1 for 0.5 s; the run cannot go on"):
            server.apply(torch.randn(1, server.size), [1.0])
        assert time.monotonic() - started < 5
    finally:
        os.kill(stopped, signal.SIGCONT)
        server.close()


# ----- a run: a shard killed, then resumed from the checkpoint -----------------------------------
class KillShard(Observer):
    """SIGKILLs shard 1 after `after` updates, once, and waits until it is gone: the next step meets a dead shard."""

    def __init__(self, after: int):
        self.after, self.pid = after, None

    def on_update(self, trainer, stats):
        if self.pid is None and trainer.learner.updates == self.after:
            victim = trainer.learner.optimizer.processes[1]
            self.pid = victim.pid
            os.kill(victim.pid, signal.SIGKILL)
            victim.join(10)


class ResumedAt(Observer):
    """What the resumed run started from: its update count, its server's state, its parameters."""

    def on_start(self, trainer):
        learner = trainer.learner
        self.updates, self.state = learner.updates, learner.optimizer.state_dict()
        self.params = [p.detach().clone() for p in learner.params]
        self.shard_params = [v.clone() for v in learner.optimizer._views]
        self.pids = learner.optimizer.pids


def test_a_run_whose_shard_is_killed_fails_naming_it_and_resumes_from_its_checkpoint(tmp_path, quiet):
    run_dir = tmp_path / "run"
    kill = KillShard(after=10)
    overrides = [*quiet, "runtime.launcher=processes", "stop.target_return=null", "stop.env_frames=60000",
                 "checkpoint.interval_updates=4", "checkpoint.interval_s=0"]
    with pytest.raises(ParameterServerError, match=r"parameter server shard 1 \(pid \d+, exit code -9, killed by "
                                                   r"SIGKILL\) died during the step on pushed gradient 11"):
        api.train("cartpole-a3c", overrides, run_dir=str(run_dir), observers=[kill])
    error = (run_dir / "error.txt").read_text()
    assert f"parameter server shard 1 (pid {kill.pid}, exit code -9" in error and "menger resume RUN_DIR" in error
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    saved = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    saved_updates, saved_frames = int(saved["learner"]["updates"]), int(saved["accounts"]["accepted"])
    assert saved_updates == 8

    resumed = ResumedAt()
    result = api.resume(run_dir, [f"stop.env_frames={saved_frames + 3000}"], observers=[resumed])
    assert resumed.updates == saved_updates and len(resumed.pids) == 2
    policy = build_policy(OBS, ACT, _config().model, "a3c")
    policy.load_state_dict(saved["learner"]["model"])
    checkpointed = [p for p in policy.parameters() if p.requires_grad]
    assert all(torch.equal(mine, saved_p) for mine, saved_p in zip(resumed.params, checkpointed))
    assert all(torch.equal(mine, shard) for mine, shard in zip(resumed.params, resumed.shard_params))
    for shard, loaded in zip(saved["learner"]["optimizer"]["shards"], resumed.state["shards"]):
        for i, entry in loaded["state"].items():
            entry_saved = shard["state"].get(i, shard["state"].get(str(i)))
            assert all(torch.equal(entry[name], entry_saved[name]) for name in ("exp_avg", "exp_avg_sq"))
    assert result.final_metrics["learner/updates"] > saved_updates
    assert result.final_metrics["time/env_frames"] >= saved_frames + 3000
    assert all(_gone(pid) for pid in resumed.pids)
    print(f"shard 1 SIGKILLed after update 10: the run ended naming it; resumed at update {resumed.updates} "
          f"(its checkpoint's), parameters and moments as saved, went on to {result.final_metrics['learner/updates']:.0f}")
