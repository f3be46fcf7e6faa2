"""The emulated fleet: hundreds of virtual actors from two host processes against the real trainer, coordinator,
supervisor and local transport. What is checked is the accounting (every unroll judged once, none duplicated,
every frame produced is learned, dropped with a reason or still pending), that a turn's cost follows the actors
with something to say (calls counted, not seconds), and that a killed host's actors come back."""
from __future__ import annotations

import collections

import pytest

from menger.experiment import load_experiment
from menger.launch.emulated import EmulatedHandle, EmulatedLauncher
from menger.runtime import Trainer
from menger.runtime.observers import Observer
from menger.runtime.supervisor import LIVENESS_CHECKS, ActorSupervisor
from menger.transport.local import LocalTransport

SETTINGS = ["runtime.envs_per_actor=2", "runtime.unroll_length=8", "runtime.coordination.batch_unrolls=16",
            "runtime.learner.threads=1", "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0",
            "stop.target_return=null", "stop.env_frames=1000000000"]


class Ledger(Observer):
    """Every tag the trainer judged, and the verdicts; optionally kills a host after some updates."""

    def __init__(self, kill_host_after: int | None = None, stop_when_back: range | None = None):
        self.tags = collections.Counter()
        self.verdicts = collections.Counter()
        self.kill_host_after, self.killed_at = kill_host_after, None
        self.stop_when_back, self.back = stop_when_back, set()

    def on_unroll(self, trainer, meta, verdict):
        self.tags[meta.actor_id, meta.incarnation, meta.sequence] += 1
        self.verdicts[verdict.reason or "accepted"] += 1
        if self.stop_when_back is not None and meta.incarnation > 0:
            self.back.add(meta.actor_id)
            if self.back >= set(self.stop_when_back):  # every actor of the killed host delivered again
                trainer.request_stop()

    def on_update(self, trainer, stats):
        if self.kill_host_after is not None and self.killed_at is None and trainer.learner.updates >= \
                self.kill_host_after:
            self.killed_at = trainer.learner.updates
            trainer.launcher.kill_host(0)


def run_fleet(tmp_path, actors: int, hosts: int, seconds: float, ledger: Ledger, frames_per_s: float = 400.0):
    config = load_experiment("cartpole-impala", [*SETTINGS, f"runtime.actors={actors}", f"stop.wall_clock_s={seconds}",
                                                 "runtime.supervision.heartbeat_timeout_s=5"])
    launcher = EmulatedLauncher(config.runtime, hosts=hosts, frames_per_s=frames_per_s)
    trainer = Trainer(config, tmp_path / "run", launcher=launcher, observers=[ledger])
    trainer.run()
    return trainer


def pending_frames(trainer) -> int:
    return sum(meta.frames for _, meta in trainer.coordinator.pending)


def test_every_frame_of_a_fleet_of_hundreds_is_accounted_once(tmp_path, monkeypatch):
    drains, checks, per_tick = collections.Counter(), collections.Counter(), []
    drain, is_alive, tick = LocalTransport.drain, EmulatedHandle.is_alive, ActorSupervisor.tick
    monkeypatch.setattr(LocalTransport, "drain", lambda self, a: drains.update([a]) or drain(self, a))
    monkeypatch.setattr(EmulatedHandle, "is_alive", lambda self: checks.update(["is_alive"]) or is_alive(self))

    def counted_tick(self):
        before = checks["is_alive"]
        tick(self)
        per_tick.append(checks["is_alive"] - before)

    monkeypatch.setattr(ActorSupervisor, "tick", counted_tick)
    ledger = Ledger()
    trainer = run_fleet(tmp_path, actors=300, hosts=2, seconds=3.0, ledger=ledger)
    accounts = trainer.accounts
    assert trainer.learner.updates > 5 and accounts.unrolls == sum(ledger.tags.values())
    assert max(ledger.tags.values()) == 1 and accounts.duplicates == 0  # no tag judged twice
    assert accounts.produced == accounts.accepted + sum(accounts.dropped.values()) + pending_frames(trainer)
    assert set(ledger.verdicts) <= {"accepted", "policy_lag"}
    assert len({actor for actor, _, _ in ledger.tags}) == 300  # every virtual actor delivered
    # a receive drains the pipes that had something to say: about one drain per unroll, not one per actor per turn
    assert sum(drains.values()) <= 1.2 * accounts.unrolls + 300
    # the supervisor asks LIVENESS_CHECKS handles per tick, not all 300
    assert len(per_tick) > 10 and max(per_tick) == LIVENESS_CHECKS
    assert trainer.supervisor.metrics()["actor/restarts"] == 0


def test_a_killed_host_loses_its_actors_partial_unrolls_and_they_come_back(tmp_path):
    on_host_0 = range(100)
    ledger = Ledger(kill_host_after=5, stop_when_back=on_host_0)
    trainer = run_fleet(tmp_path, actors=200, hosts=2, seconds=60.0, ledger=ledger)  # stops when they are back
    accounts = trainer.accounts
    assert ledger.killed_at is not None and trainer.launcher.host_starts == 3  # two hosts, one replacement
    restarted = [trainer.supervisor.actors[a] for a in on_host_0]
    assert all(r.incarnation == 1 and r.lost == 1 for r in restarted)
    assert all(r.incarnation == 0 for r in trainer.supervisor.actors[100:])
    came_back = {actor for actor, incarnation, _ in ledger.tags if incarnation == 1}
    assert came_back == set(on_host_0)  # every actor of the lost host delivered again, as its next incarnation
    assert max(ledger.tags.values()) == 1 and accounts.duplicates == 0
    assert accounts.dropped["actor_lost"] > 0  # the partial unrolls the host took with it, counted
    assert accounts.produced == accounts.accepted + sum(accounts.dropped.values()) + pending_frames(trainer)
    assert accounts.accepted > 0 and trainer.learner.updates > ledger.killed_at


def test_the_launcher_refuses_what_it_cannot_emulate():
    config = load_experiment("cartpole-impala", ["runtime.actors=4"])
    with pytest.raises(ValueError, match="emulated hosts: give 1 to runtime.actors=4"):
        EmulatedLauncher(config.runtime, hosts=8)
    with pytest.raises(ValueError, match="frames_per_s must be > 0"):
        EmulatedLauncher(config.runtime, frames_per_s=0)
    central = load_experiment("cartpole-impala", ["runtime.actors=4", "runtime.inference.mode=central"])
    with pytest.raises(ValueError, match="runtime.inference.mode=local"):
        EmulatedLauncher(central.runtime)


def test_actors_are_spread_over_hosts_in_blocks():
    config = load_experiment("cartpole-impala", ["runtime.actors=10"])
    launcher = EmulatedLauncher(config.runtime, hosts=3)
    blocks = [list(launcher.actors_of(h)) for h in range(3)]
    assert sum(blocks, []) == list(range(10))
    assert all(launcher.host_of(a) == h for h, block in enumerate(blocks) for a in block)
    assert LIVENESS_CHECKS < 300  # the fleet test above runs more actors than a tick checks
