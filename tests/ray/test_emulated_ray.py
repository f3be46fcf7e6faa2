"""Emulated actors on Ray (`menger.launch.emulated_ray`): hundreds of virtual actors in a few async Ray actors,
against the real Ray transport, node caches, trainer, coordinator and supervisor, on the simulated cluster of
conftest.py. Checked: the accounting (every unroll judged once, none duplicated, every frame produced learned,
dropped with a reason or pending), that every virtual actor read its node's cache, and that a killed host's actors
come back as their next incarnation with their partial unrolls counted."""
from __future__ import annotations

import collections

import pytest

ray = pytest.importorskip("ray")

from ray_harness import ray_config  # noqa: E402

from menger.config import ConfigError  # noqa: E402
from menger.launch.emulated_ray import EmulatedRayLauncher  # noqa: E402
from menger.runtime import Trainer  # noqa: E402
from menger.runtime.observers import Observer  # noqa: E402

FLEET = ("runtime.envs_per_actor=2", "runtime.unroll_length=8", "runtime.coordination.batch_unrolls=16",
         "stop.target_return=null", "stop.env_frames=1000000000", "runtime.supervision.heartbeat_timeout_s=10")


class Ledger(Observer):
    """Every tag the trainer judged, and the verdicts; optionally kills host 0 after some updates and stops once
    its actors delivered again."""

    def __init__(self, kill_host_after: int | None = None, stop_when_back: range | None = None,
                 stop_when_all: int | None = None):
        self.stop_when_all = stop_when_all  # stop once this many actors delivered, and 10 updates were made
        self.tags: collections.Counter = collections.Counter()
        self.verdicts: collections.Counter = collections.Counter()
        self.kill_host_after, self.killed_at = kill_host_after, None
        self.stop_when_back, self.back = stop_when_back, set()

    def on_unroll(self, trainer, meta, verdict):
        self.tags[meta.actor_id, meta.incarnation, meta.sequence] += 1
        self.verdicts[verdict.reason or "accepted"] += 1
        if self.stop_when_all is not None and trainer.learner.updates >= 10 and \
                len({actor for actor, _, _ in self.tags}) == self.stop_when_all:
            trainer.request_stop()
        if self.stop_when_back is not None and meta.incarnation > 0:
            self.back.add(meta.actor_id)
            if self.back >= set(self.stop_when_back):
                trainer.request_stop()

    def on_update(self, trainer, stats):
        if self.kill_host_after is not None and self.killed_at is None and \
                trainer.learner.updates >= self.kill_host_after:
            self.killed_at = trainer.learner.updates
            trainer.launcher.kill_host(0)


def run_fleet(tmp_path, actors: int, hosts: int, seconds: float, ledger: Ledger, frames_per_s: float = 200.0):
    config = ray_config(*FLEET, f"runtime.actors={actors}", f"stop.wall_clock_s={seconds}", preset="cartpole-impala")
    launcher = EmulatedRayLauncher(config.runtime, hosts=hosts, frames_per_s=frames_per_s)
    trainer = Trainer(config, tmp_path / "run", launcher=launcher, observers=[ledger])
    result = trainer.run()
    return trainer, result.final_metrics


def pending_frames(trainer) -> int:
    return sum(meta.frames for _, meta in trainer.coordinator.pending)


def test_every_frame_of_a_fleet_of_hundreds_on_ray_is_accounted_once(cluster, tmp_path):
    ledger = Ledger(stop_when_all=256)
    trainer, metrics = run_fleet(tmp_path, actors=256, hosts=4, seconds=90.0, ledger=ledger)
    accounts = trainer.accounts
    assert trainer.learner.updates >= 10 and accounts.unrolls == sum(ledger.tags.values())
    assert max(ledger.tags.values()) == 1 and accounts.duplicates == 0
    assert accounts.produced == accounts.accepted + sum(accounts.dropped.values()) + pending_frames(trainer)
    assert set(ledger.verdicts) <= {"accepted", "policy_lag"}
    assert len({actor for actor, _, _ in ledger.tags}) == 256  # every virtual actor delivered
    assert trainer.launcher.host_starts == 4 and trainer.supervisor.metrics()["actor/restarts"] == 0
    assert metrics["params/cache_reads"] >= accounts.unrolls  # each unroll began with a read of its node's cache


def test_a_killed_emulated_ray_host_loses_its_actors_partial_unrolls_and_they_come_back(cluster, tmp_path):
    on_host_0 = range(64)
    ledger = Ledger(kill_host_after=3, stop_when_back=on_host_0)
    trainer, _ = run_fleet(tmp_path, actors=128, hosts=2, seconds=90.0, ledger=ledger)
    accounts = trainer.accounts
    assert ledger.killed_at is not None and trainer.launcher.host_starts == 3  # two hosts, one replacement
    assert all(trainer.supervisor.actors[a].incarnation == 1 for a in on_host_0)
    assert all(r.incarnation == 0 for r in trainer.supervisor.actors[64:])
    assert {actor for actor, incarnation, _ in ledger.tags if incarnation == 1} == set(on_host_0)
    assert max(ledger.tags.values()) == 1 and accounts.duplicates == 0
    assert accounts.dropped["actor_lost"] > 0  # the partial unrolls the host took with it, counted
    assert accounts.produced == accounts.accepted + sum(accounts.dropped.values()) + pending_frames(trainer)
    assert trainer.learner.updates > ledger.killed_at


def test_the_emulated_ray_launcher_refuses_what_it_cannot_emulate():
    config = ray_config("runtime.actors=4")
    with pytest.raises(ConfigError, match="emulated hosts: give 1 to runtime.actors=4"):
        EmulatedRayLauncher(config.runtime, hosts=8)
    with pytest.raises(ConfigError, match="frames_per_s must be > 0"):
        EmulatedRayLauncher(config.runtime, frames_per_s=0)
    with pytest.raises(ConfigError, match="runtime.inference.mode=local"):
        EmulatedRayLauncher(ray_config("runtime.actors=4", "runtime.inference.mode=central").runtime)
