"""GORILA: DQN learner processes push gradients from the replay; staleness, a learner killed mid-push, resume."""
import multiprocessing as mp
import os

import pytest
import torch

from menger import api
from menger.config import ConfigError
from menger.experiment import load_experiment
from menger.learners import gorila

SHORT = ["stop.target_return=null", "stop.wall_clock_s=null", "eval.interval_s=0", "checkpoint.interval_s=0"]


def _train(tmp_path, quiet, *extra, name="run"):
    return api.train("cartpole-gorila", overrides=[*quiet, *SHORT, *extra], run_dir=tmp_path / name)


def test_an_async_server_drops_gradients_staler_than_its_bound(quiet, tmp_path):
    """Two learners start on one version: with a bound of 0 the second of them is always too late."""
    m = _train(tmp_path, quiet, "runtime.parameter_server.max_staleness=0", "stop.env_frames=6000").final_metrics
    assert m["learner/gradients_dropped_stale"] > 0
    assert m["learner/updates"] > 0 and m["learner/workers"] == 2


def test_a_sync_round_averages_one_gradient_of_every_learner_on_one_version(quiet, tmp_path):
    m = _train(tmp_path, quiet, "runtime.parameter_server.update=sync", "stop.env_frames=6000").final_metrics
    assert m["learner/gradients"] == 2 and m["learner/staleness_mean"] == 0
    assert m["learner/gradients_dropped_stale"] == 0


def test_a_learner_killed_while_writing_its_gradient_leaves_nothing_applied_and_the_other_goes_on(
        quiet, tmp_path, monkeypatch):
    killed, parent, real = mp.get_context("fork").Value("i", 0), os.getpid(), gorila.write_gradient
    calls = {"count": 0}

    def dies_half_way(flat, params, grads):
        calls["count"] += 1
        if os.getpid() != parent and calls["count"] == 20:
            with killed.get_lock():
                first = killed.value == 0
                killed.value = 1
            if first:
                flat[: flat.numel() // 2] = float("nan")
                os._exit(9)
        real(flat, params, grads)

    monkeypatch.setattr(gorila, "write_gradient", dies_half_way)
    result = _train(tmp_path, quiet, "stop.env_frames=12000")
    m = result.final_metrics
    assert killed.value == 1
    assert m["learner/workers_lost"] == 1 and m["learner/workers"] == 1
    assert m["learner/updates"] > 40  # the survivor went on
    policy = api.load_policy(result.run_dir)
    finite = all(torch.isfinite(p).all() for p in policy.network.parameters())
    print(f"learner killed with half its gradient written: learners lost {m['learner/workers_lost']:.0f} of 2, "
          f"{m['learner/updates']:.0f} updates, parameters finite: {finite}")
    assert finite


def test_a_gorila_run_resumes_from_its_checkpoint(quiet, tmp_path):
    first = _train(tmp_path, quiet, "stop.env_frames=5000")
    updates = first.final_metrics["learner/updates"]
    resumed = api.resume(first.run_dir, overrides=["stop.env_frames=9000"])
    assert resumed.final_metrics["learner/updates"] > updates
    assert resumed.final_metrics["time/env_frames"] >= 9000


@pytest.mark.parametrize("extra, words", [
    (["replay.lockstep=true"], "replay.lockstep with algo gorila"),
    (["replay.publish_every=4"], "replay.publish_every=4 with algo gorila"),
    (["runtime.learner.mode=allreduce"], "runtime.learner.mode=allreduce with algo gorila"),
])
def test_gorila_refuses_what_it_cannot_do(extra, words):
    with pytest.raises(ConfigError, match=words):
        load_experiment("cartpole-gorila", extra)


@pytest.mark.parametrize("preset", ["cartpole-a3c", "cartpole-gorila"])
def test_gradient_workers_on_one_host_open_no_network_port(preset, quiet, tmp_path):
    """Gradients travel through shared-memory slots and pipes: the trainer, its actors, its shard processes and
    GORILA's learners hold no listening TCP socket, on any address."""
    from menger.runtime import Observer
    from test_data_parallel import _listening_sockets

    class Look(Observer):
        seen: list = None

        def on_update(self, trainer, stats):
            if self.seen is None and trainer.learner.updates >= 20:
                import multiprocessing

                pids = [os.getpid()] + [child.pid for child in multiprocessing.active_children()]
                pids += [r.handle.pid for r in trainer.actors if getattr(r.handle, "pid", None)]
                self.seen = (sorted(set(pids)), _listening_sockets(sorted(set(pids))))

    look = Look()
    api.train(preset, overrides=[*quiet, *SHORT, "runtime.launcher=processes", "stop.env_frames=20000"],
              run_dir=tmp_path / "run", observers=[look])
    pids, listening = look.seen
    print(f"{preset}: {len(pids)} processes, listening TCP sockets: {len(listening)}")
    shards = 2  # both presets: runtime.parameter_server.shards=2, each a process
    assert len(pids) >= 1 + 2 + shards  # the trainer, 2 actors, the shards (and GORILA's 2 learners)
    assert listening == [], listening
