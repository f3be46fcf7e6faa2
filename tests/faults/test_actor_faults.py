"""Actors are expendable (docs/guides/reliability.md, promises 1-3 and 6): kill, stall and break them; training goes on.

Each test drives a real `Trainer` in a thread (the `harness` fixture of conftest.py), injects one fault from the fault
table and prints the figure the table names.
"""
import logging
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from menger.runtime import NoActorsError, Observer

UNROLL = 64
ENVS_PER_ACTOR = 4
FRAMES_PER_UNROLL = UNROLL * ENVS_PER_ACTOR


def kill_mid_unroll(harness, run, actor_id: int) -> int:
    """SIGKILL an actor process while it is writing an unroll; return the frames it had written (its progress)."""
    progress = run.trainer.transport.progress_frames
    harness.wait_until(lambda: int(progress[actor_id]) > 0, 30, f"actor {actor_id} to be mid-unroll", poll_s=0.0002)
    written = int(progress[actor_id])
    os.kill(run.trainer.actors[actor_id].handle.pid, signal.SIGKILL)
    return written


def delivered_again(trainer, record, old_pid: int) -> bool:
    """The replacement runs its loop (it overwrote the start-up grace heartbeat) and an unroll of it was accepted."""
    handle = record.handle
    return (handle is not None and handle.pid != old_pid
            and float(trainer.transport.heartbeat[record.actor_id]) <= time.time()
            and delivered(trainer, record) >= 1)


def delivered(trainer, record) -> int:
    """Unrolls the actor's current incarnation has delivered (its last sequence number the coordinator took)."""
    return trainer.coordinator.last_sequence[record.actor_id]


def process_state(pid: int) -> str:
    """The state letter of a process (Linux /proc): R running, S sleeping, T stopped, Z zombie."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def dropped(metrics: dict, reason: str) -> int:
    return int(metrics.get(f"transport/frames_dropped/{reason}", 0))


@pytest.mark.parametrize("preset", ["cartpole-ppo", "cartpole-impala"])
def test_sigkill_one_actor_mid_unroll_restarts_it_and_loses_at_most_one_unroll(harness, preset):
    updates_wanted = 40
    config = harness.config("runtime.launcher=processes", "runtime.actors=3", f"runtime.unroll_length={UNROLL}",
                            f"runtime.envs_per_actor={ENVS_PER_ACTOR}", "stop.target_return=null",
                            f"stop.env_frames={updates_wanted * 3 * FRAMES_PER_UNROLL}", preset=preset)
    run = harness.start(config)
    harness.wait_until(lambda: run.actors_ready() and run.updates() >= 3, 60, "three updates")
    victim = run.trainer.actors[1]
    old_pid = victim.handle.pid

    written = kill_mid_unroll(harness, run, victim.actor_id)
    killed_at, updates_at_kill = time.monotonic(), run.updates()
    detection_s = harness.wait_until(lambda: victim.restarts >= 1, 30, "the dead actor to be noticed")
    recover_s = harness.wait_until(lambda: delivered_again(run.trainer, victim, old_pid), 30,
                                   "an unroll from the new incarnation", poll_s=0.001) + detection_s
    new_pid = victim.handle.pid if victim.handle is not None else None
    result = run.join()

    metrics = result.final_metrics
    lost = dropped(metrics, "actor_lost") + dropped(metrics, "stale_incarnation")
    print(f"{preset}: detection_s={detection_s:.3f}, recover_s={recover_s:.3f}, frames_written_at_kill={written}, "
          f"frames_lost={lost} (one unroll = {FRAMES_PER_UNROLL}), duplicates={metrics['transport/duplicates']}, "
          f"updates at kill {updates_at_kill} -> {metrics['learner/updates']}")
    assert new_pid != old_pid, "the actor was not restarted as a new process"
    assert metrics["actor/restarts"] == 1 and victim.incarnation == 1
    assert lost <= FRAMES_PER_UNROLL
    assert metrics["transport/duplicates"] == 0
    assert metrics["learner/updates"] > updates_at_kill, "the learner stopped learning after the kill"
    assert time.monotonic() - killed_at < 60
    if config.coordination == "sync":  # nothing is in flight when a sync run stops: the books must balance
        accounts = run.trainer.accounts
        assert accounts.produced == accounts.accepted + sum(accounts.dropped.values())


@pytest.mark.slow
def test_random_actor_kills_during_learning_still_reach_the_target(harness):
    """Kills land at random actors on a schedule of updates, not of seconds: a fast learner meets every one of
    them, and each is seen by the supervisor (restarted, and counted as lost) before the run can end."""
    target, kills, every_updates = 200.0, 5, 2  # CartPole reaches 200 after about 25 updates of 512 frames
    config = harness.config("runtime.launcher=processes", "runtime.actors=2", "runtime.envs_per_actor=8",
                            "runtime.unroll_length=32", "ppo.epochs=10", "ppo.lr_schedule=constant",
                            f"stop.target_return={target}", "stop.env_frames=200000")
    run = harness.start(config)
    harness.wait_until(run.actors_ready, 60, "the actors to start")
    chooser = random.Random(7)
    injected, killed = 0, set()
    while injected < kills and not run.trainer.stopping:
        time.sleep(0.002)
        handle = chooser.choice(run.trainer.actors).handle
        # wait for the next kill's update, and for a victim that is running (not one still being restarted,
        # nor one already killed but not yet noticed: a zombie until reaped)
        if run.updates() < (injected + 1) * every_updates or handle is None or handle.pid in killed:
            continue
        os.kill(handle.pid, signal.SIGKILL)
        killed.add(handle.pid)
        injected += 1
    result = run.join(timeout_s=240)
    metrics = result.final_metrics
    print(f"kills survived / injected = {metrics['actor/restarts']}/{injected} (lost {metrics['actor/lost']}), "
          f"mean return {metrics.get('episode/return_mean')}, updates {metrics['learner/updates']}, "
          f"wall {metrics['time/wall_s']:.1f} s, frames dropped {metrics['transport/frames_dropped']}")
    assert injected == kills, f"the run ended after {run.updates()} updates, before kill {injected + 1} was due"
    assert result.reached_target, f"did not reach a mean return of {target} under {injected} actor kills"
    assert metrics["actor/lost"] == injected, "a kill went unnoticed"
    # sync: no update can complete until a killed actor's next incarnation delivered, so every kill is restarted
    assert metrics["actor/restarts"] == injected and not any(record.given_up for record in run.trainer.actors)
    assert metrics["transport/duplicates"] == 0


BACK_OFF_LOG = re.compile(r"actor (\d+) .* restarting as incarnation (\d+) in ([0-9.]+) s")


def test_restart_back_off_resets_once_an_incarnation_is_healthy(harness, caplog):
    """A crash loop backs off; an actor that delivered unrolls between kills restarts at once (a sync learner waits)."""
    kills = 5
    caplog.set_level(logging.WARNING, logger="menger.supervisor")
    config = harness.config("runtime.launcher=processes", "runtime.actors=2", "stop.target_return=null",
                            "stop.env_frames=10000000")
    run = harness.start(config)
    harness.wait_until(lambda: run.actors_ready() and run.updates() >= 2, 60, "two updates")
    trainer, victim = run.trainer, run.trainer.actors[0]
    for _ in range(kills):
        old_pid = victim.handle.pid
        os.kill(old_pid, signal.SIGKILL)
        harness.wait_until(lambda: delivered_again(trainer, victim, old_pid) and delivered(trainer, victim) >= 3, 60,
                           "the new incarnation to deliver three unrolls")
    back_offs = [float(match.group(3)) for match in map(BACK_OFF_LOG.search, caplog.messages) if match]
    print(f"restart back-off after each of {kills} kills of a healthy actor: {back_offs} s")
    assert len(back_offs) == kills
    assert max(back_offs) < 0.5, "an actor that ran healthily is restarted as slowly as one in a crash loop"


def failing_env_settings(max_restarts: int, deadline_s: float) -> list[str]:
    """Every reset of every env raises: each actor dies starting up, is restarted `max_restarts` times, given up."""
    return ["env.id=menger/Faulty-v0", "env.kwargs={reset_failures: -1}", "runtime.actors=2",
            f"runtime.supervision.max_restarts={max_restarts}", f"runtime.supervision.no_actor_deadline_s={deadline_s}",
            "stop.target_return=null", "stop.env_frames=100000"]


def test_actors_that_always_die_end_the_run_with_no_actors_error_within_the_deadline(harness):
    max_restarts, deadline_s = 2, 3.0
    config = harness.config("runtime.launcher=processes", *failing_env_settings(max_restarts, deadline_s))
    run = harness.start(config)
    with pytest.raises(NoActorsError, match="no_actor_deadline_s") as raised:
        run.join(timeout_s=90)
    time_to_exit = run.ended_at - run.started_at
    restarts = [record.incarnation - 1 for record in run.trainer.actors]
    print(f"time_to_exit_s={time_to_exit:.2f}, restarts per actor={restarts} (cap {max_restarts}), "
          f"error: {raised.value}")
    assert all(record.given_up for record in run.trainer.actors)
    assert all(count <= max_restarts for count in restarts)
    assert "reset failed" in str(raised.value), "the error does not say why the actors died"
    # it waited out the deadline, then ended: start-up and the capped restarts take seconds, not a hang
    assert deadline_s <= time_to_exit < deadline_s + 30


@pytest.mark.slow
def test_cli_exits_non_zero_when_every_actor_is_gone(harness):
    started = time.monotonic()
    overrides = [f"--set={item}" for item in failing_env_settings(max_restarts=1, deadline_s=1.0)]
    done = harness.run_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(harness.tmp_path / "run"),
                      "--launcher", "processes", *overrides, timeout_s=120)
    time_to_exit = time.monotonic() - started
    print(f"`menger train` exit code {done.returncode}, "
          f"time_to_exit_s={time_to_exit:.1f}; stderr tail: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode != 0
    assert "no actor has been alive" in done.stderr


def test_sigstopped_actor_is_flagged_replaced_and_its_stale_unrolls_rejected(harness):
    timeout_s = 1.0
    config = harness.config("runtime.launcher=processes", "runtime.actors=2",
                            f"runtime.supervision.heartbeat_timeout_s={timeout_s}", "stop.target_return=null",
                            "stop.env_frames=8000")
    run = harness.start(config)
    harness.wait_until(lambda: run.actors_ready() and run.updates() >= 2, 60, "two updates")
    trainer, victim = run.trainer, run.trainer.actors[0]
    accepted_stale = []

    class StaleWatch(Observer):
        def on_unroll(self, trainer, meta, verdict):  # an older incarnation than the supervisor's, yet accepted
            if verdict.accepted and meta.incarnation < trainer.actors[meta.actor_id].incarnation:
                accepted_stale.append(meta.frames)

    trainer.observers.append(StaleWatch())
    old_handle = victim.handle
    os.kill(old_handle.pid, signal.SIGSTOP)
    # signal delivery is asynchronous: read the last heartbeat once the process is stopped
    harness.wait_until(lambda: process_state(old_handle.pid) == "T", 5, "the SIGSTOP to land", poll_s=0.0005)
    last_beat = float(trainer.transport.heartbeat[victim.actor_id])  # a stopped process writes no more heartbeats
    try:
        flagged_s = harness.wait_until(lambda: victim.restarts >= 1, 30, "the stalled actor to be flagged")
        silent_s = time.time() - last_beat
        replaced_s = harness.wait_until(lambda: delivered_again(trainer, victim, old_handle.pid), 30,
                                        "an unroll from the replacement") + flagged_s
    finally:
        if old_handle.exitcode is None:  # never reaped, so the pid is still ours: let it run on with stale state
            os.kill(old_handle.pid, signal.SIGCONT)
    result = run.join()
    metrics = result.final_metrics
    print(f"flagged_s={flagged_s:.2f} after SIGSTOP, {silent_s:.2f} after its last heartbeat (timeout {timeout_s} s), "
          f"replaced_s={replaced_s:.2f}, "
          f"stale_frames_accepted={sum(accepted_stale)}, stale frames dropped "
          f"{dropped(metrics, 'stale_incarnation')}, partial unroll dropped {dropped(metrics, 'actor_lost')}")
    assert timeout_s <= silent_s and flagged_s < timeout_s + 5.0
    assert old_handle.exitcode is not None, "the stalled actor was replaced but left running"
    assert sum(accepted_stale) == 0
    assert metrics["actor/restarts"] == 1 and metrics["transport/duplicates"] == 0


class BatchWatch(Observer):
    """Counts non-finite values in every batch the learner is given."""

    def __init__(self):
        self.batches = 0
        self.nonfinite = 0

    def on_batch(self, trainer, batch):
        self.batches += 1
        self.nonfinite += sum(int((~torch.isfinite(value)).sum()) for value in batch_tensors(batch.data)
                              if value.is_floating_point())


def batch_tensors(batch):
    for value in batch.values():
        if isinstance(value, dict):
            yield from batch_tensors(value)
        else:
            yield value


@pytest.mark.parametrize("env_id", ["menger/Faulty-v0", "menger/FaultyVector-v0"])
def test_env_that_raises_or_returns_nan_is_rebuilt_and_nothing_nonfinite_reaches_the_learner(harness, env_id):
    watch = BatchWatch()
    faults = "{nan_obs_at: 5, inf_reward_at: 9, raise_at: 13}"
    config = harness.config("runtime.launcher=threads", "runtime.actors=1", f"env.id={env_id}",
                            f"env.kwargs={faults}", "stop.target_return=null", "stop.env_frames=1024")
    result = harness.start(config, observers=[watch]).join()
    metrics = result.final_metrics
    nonfinite_dropped = metrics.get("actor/env_nonfinite_dropped", 0)
    rebuilt = metrics.get("actor/env_env_rebuilt", 0)
    print(f"{env_id}: nonfinite_reaching_learner={watch.nonfinite} in {watch.batches} batches, "
          f"nonfinite_dropped={nonfinite_dropped}, env_rebuilt={rebuilt}")
    assert watch.batches > 0
    assert watch.nonfinite == 0
    assert nonfinite_dropped >= 2, "the NaN observation and the Inf reward were not both counted"
    assert rebuilt >= 1, "the env that raised in step was not rebuilt"


STALE_MARK = 7.0
STALL_S = 6.5  # longer than the heartbeat timeout plus the 5 s a trainer once waited to join a killed thread


class StallingEnv(gymnasium.Env):
    """4 floats in [-1, 1], 2 actions, reward 1. The first env to reach step `stall_at` (one per test) hangs for
    `stall_s`, then fills every later observation with STALE_MARK and steps slowly: whatever it writes after the
    hang belongs to a stale incarnation, and must never reach the learner."""

    stall_claimed = threading.Event()
    woke = threading.Event()  # the stalled env's hang is over: what it writes from now on is stale

    def __init__(self, stall_at: int = 400, stall_s: float = STALL_S, slow_step_s: float = 0.02):
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, (4,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.stall_at, self.stall_s, self.slow_step_s = stall_at, stall_s, slow_step_s
        self.steps = 0
        self.stale = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        if self.steps == self.stall_at and not StallingEnv.stall_claimed.is_set():
            StallingEnv.stall_claimed.set()
            time.sleep(self.stall_s)
            self.stale = True
            StallingEnv.woke.set()
        if self.stale:
            time.sleep(self.slow_step_s)
        return self._obs(), 1.0, self.steps % 20 == 0, False, {}

    def _obs(self) -> np.ndarray:
        if self.stale:
            return np.full(4, STALE_MARK, dtype=np.float32)
        return self.np_random.uniform(-1.0, 1.0, 4).astype(np.float32)


class UpdateTimes(Observer):
    """When each update started, and how many batches held STALE_MARK observations."""

    def __init__(self):
        self.started: list[float] = []
        self.stale_batches = 0

    def on_batch(self, trainer, batch):
        self.started.append(time.monotonic())
        self.stale_batches += bool((batch.data["obs"] == STALE_MARK).any())

    def longest_gap(self) -> float:
        return max(later - earlier for earlier, later in zip(self.started, self.started[1:]))


@pytest.mark.slow
def test_stalled_actor_thread_neither_blocks_the_learner_nor_writes_into_a_new_incarnations_slot(harness):
    """A thread cannot be killed: the learner must not wait for it, and what it writes on waking must be fenced off."""
    StallingEnv.stall_claimed.clear()
    StallingEnv.woke.clear()
    if "menger-tests/Stalling-v0" not in gymnasium.registry:
        gymnasium.register("menger-tests/Stalling-v0", entry_point=StallingEnv)
    watch = UpdateTimes()
    timeout_s = 0.5
    config = harness.config("runtime.launcher=threads", "runtime.actors=2", "env.id=menger-tests/Stalling-v0",
                            f"runtime.supervision.heartbeat_timeout_s={timeout_s}", "runtime.unroll_length=64",
                            "stop.target_return=null", "stop.env_frames=1000000")
    run = harness.start(config, observers=[watch])
    harness.wait_until(lambda: StallingEnv.stall_claimed.is_set(), 60, "an env to stall")
    harness.wait_until(lambda: any(record.incarnation >= 1 and delivered(run.trainer, record) >= 1
                                   for record in run.trainer.actors), 60, "the stalled actor to be replaced")
    harness.wait_until(StallingEnv.woke.is_set, STALL_S + 30, "the stalled env to wake up")
    time.sleep(1.0)  # the stale thread writes (slowly) for about a second: nothing of it may reach the learner
    gap = watch.longest_gap()
    run.abort()
    print(f"longest pause between learner updates {gap:.2f} s (heartbeat timeout {timeout_s} s); "
          f"batches holding stale frames: {watch.stale_batches} of {len(watch.started)}")
    assert watch.stale_batches == 0
    assert gap < timeout_s + 2.0, "the learner blocked on a stalled actor thread"


@pytest.mark.parametrize("env_id", ["menger/Faulty-v0", "menger/FaultyVector-v0"])
def test_episodes_a_fault_cut_short_are_counted_and_kept_out_of_the_returns(harness, env_id):
    """Every episode of this env returns exactly 10 (10 steps of reward 1). A NaN, an Inf and a raise cut some
    short; the rebuilt env starts a new episode. The reported returns must be exactly 10, never 14 or 19."""
    faults = "{nan_obs_at: 5, inf_reward_at: 27, raise_at: 43}"
    config = harness.config("runtime.launcher=threads", "runtime.actors=1", f"env.id={env_id}",
                            f"env.kwargs={faults}", "stop.target_return=null", "stop.env_frames=4096",
                            "stop.window=5")
    run = harness.start(config)
    result = run.join()
    metrics, accounts = result.final_metrics, run.trainer.accounts
    print(f"{env_id}: returns seen {sorted(set(accounts.returns))}, faulty episodes {metrics['episode/faulty']}, "
          f"env counters {accounts.env_totals()}")
    assert set(accounts.returns) == {10.0} and metrics["episode/return_mean"] == 10.0
    assert metrics["episode/faulty"] >= 2, "the episodes cut by the NaN and the rebuild were not counted"
    assert metrics.get("actor/env_env_rebuilt", 0) >= 1 and metrics.get("actor/env_nonfinite_dropped", 0) >= 2


def test_env_fault_counters_are_totals_over_every_incarnation():
    from menger.core import UnrollMeta, Verdict
    from menger.runtime.accounting import FrameAccounts

    accounts, ok = FrameAccounts(), Verdict(True, None, True)

    def tag(incarnation, rebuilt):
        return UnrollMeta(0, incarnation, 1, 0, 8, env_stats=(("env_rebuilt", rebuilt),))

    for incarnation, rebuilt in ((0, 1), (0, 3), (1, 2), (0, 99)):  # the last: a late word of a replaced one
        accounts.record(tag(incarnation, rebuilt), ok)
    assert accounts.env_totals() == {"env_rebuilt": 5}  # 3 from incarnation 0, then 2 from incarnation 1
    restored = FrameAccounts.from_state(accounts.state())
    restored.record(tag(0, 4), ok)  # after a resume the actors count from 0 again
    assert restored.env_totals() == {"env_rebuilt": 9}


def test_rows_an_env_keeps_idle_by_design_are_not_counted_as_faults():
    """AlphaZero's self-play games sit out the rest of their round after they end (`idle_rows`): 60 % of an
    unroll's rows can be idle with no fault, and the fault share must not stop the run for them."""
    from menger.core import UnrollMeta, Verdict
    from menger.runtime.accounting import FrameAccounts

    accounts = FrameAccounts()
    accounts.record(UnrollMeta(0, 0, 1, 0, 100, episode_returns=(1.0,) * 4, episode_lengths=(10,) * 4,
                               invalid_frames=64, env_stats=(("idle_rows", 60),)), Verdict(True, None, True))
    assert accounts.fault_frames == 0
    accounts.record(UnrollMeta(0, 0, 2, 0, 100, invalid_frames=10, env_stats=(("idle_rows", 60),)),
                    Verdict(True, None, True))
    assert accounts.fault_frames == 10  # the second unroll's invalid rows were not idle ones: faults


class HangingResetEnv(gymnasium.Env):
    """CartPole-shaped, but every reset hangs (as an env waiting on a server that never answers)."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        time.sleep(3600)

    def step(self, action):
        raise AssertionError("never reached: reset never returns")


def test_an_actor_hanging_in_reset_is_flagged_after_its_grace_and_the_run_ends_naming_the_deadlines(harness):
    """A hang in reset() at start-up: no heartbeat ever comes, so the actor is flagged once its start-up grace and
    heartbeat timeout have passed (not at the heartbeat timeout alone), the message names both settings, its
    restarts hang too, and with none left the run ends with NoActorsError instead of waiting forever."""
    if "menger-tests/HangingReset-v0" not in gymnasium.registry:
        gymnasium.register("menger-tests/HangingReset-v0", entry_point=HangingResetEnv)
    grace_s, timeout_s = 1.0, 1.0
    config = harness.config("runtime.launcher=processes", "runtime.actors=1", "env.id=menger-tests/HangingReset-v0",
                            f"runtime.supervision.startup_grace_s={grace_s}",
                            f"runtime.supervision.heartbeat_timeout_s={timeout_s}",
                            "runtime.supervision.max_restarts=1", "runtime.supervision.no_actor_deadline_s=2",
                            "stop.target_return=null", "stop.env_frames=100000")
    run = harness.start(config)
    flagged_s = harness.wait_until(lambda: run.trainer.actors[0].incarnation >= 1, 60, "the hung actor to be flagged")
    with pytest.raises(NoActorsError, match=r"startup_grace_s") as raised:
        run.join(90)
    print(f"hang in reset(): flagged after {flagged_s:.2f} s (grace {grace_s} s + heartbeat timeout {timeout_s} s); "
          f"run ended after {run.ended_at - run.started_at:.1f} s: {str(raised.value)[:160]}")
    assert grace_s <= flagged_s < grace_s + timeout_s + 10
    assert "stalled" in str(raised.value)
