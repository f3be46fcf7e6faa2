"""The coordinator loop that runs in the learner's process.

Loop (`Trainer.run`)::

    start every actor (through the launcher) and grant it its slots
    while not stop condition:
        supervise actors: restart the dead and the stalled as new incarnations (back-off, a cap)
        receive unroll tags: accept, or drop and count (policy lag, duplicates)
        when a batch is ready: gather the slots, grant them again, learner.update, publish version += 1
            sync:  a batch is one unroll per actor, all acted with the newest params; grants follow the publish
            async: a batch is `batch_unrolls` unrolls; slots are granted again as soon as they are copied
        every log interval: metrics; every checkpoint interval: a crash-consistent checkpoint

No wait is without a deadline: with no live actor for `no_actor_deadline_s`, `NoActorsError` ends the run.
Everything that crosses to the actors goes through `self.transport` (`menger.transport.local.Transport`):
pipes and shared memory on one host, object references on Ray; the loop is the same.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from menger.checkpoint import CheckpointManager, flatten_state, unflatten_state
from menger.config import dump_yaml, to_dict
from menger.core import UnrollMeta
from menger.envs import make_vec_env
from menger.experiment import ExperimentConfig
from menger.inference import start_inference
from menger.learners import make_learner
from menger.learners.distributed import LearnerGroup
from menger.models import build_policy
from menger.runtime.accounting import FrameAccounts
from menger.transport import UnrollSpec
from menger.transport.local import LocalTransport, Transport

log = logging.getLogger("menger.trainer")


class NoActorsError(RuntimeError):
    """No actor was alive for longer than the deadline."""


@dataclass
class TrainResult:
    run_dir: Path
    final_metrics: dict
    reached_target: bool = False


@dataclass
class ActorRecord:
    actor_id: int
    slots: list[int]
    incarnation: int = 0
    handle: object = None
    started_at: float = 0.0
    restarts: int = 0
    failures_in_a_row: int = 0  # restarts since the last unroll this actor delivered: drives back-off and the cap
    restart_at: float | None = None
    given_up: bool = False
    last_sequence: int = 0
    owed_grant: bool = False  # sync: this actor still owes the unroll of the current version
    last_error: str = ""
    free: list[int] = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("runtime.device=cuda but no CUDA device is available; use device=auto or cpu")
    return torch.device(name)


class Trainer:
    def __init__(self, config: ExperimentConfig, run_dir: str | Path, *, launcher, loggers=(), progress=None,
                 resume: bool = False):
        self.cfg, self.run_dir, self.launcher = config, Path(run_dir), launcher
        self.loggers, self.progress = list(loggers), progress
        self.sync = config.coordination == "sync"
        self.resume = resume
        self.accounts = FrameAccounts()
        self.version = 0
        self.wall_offset = 0.0
        self.checkpoints = CheckpointManager(self.run_dir / "checkpoints", keep_last=config.checkpoint.keep_last)
        self._last_metrics: dict = {}
        self._restores: dict[int, dict] = {}
        self._snapshots: dict[int, dict] = {}
        self._saved_step: int | None = None
        self._stop_requested = False

    # ----- set-up --------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg, rt = self.cfg, self.cfg.runtime
        self.run_dir.mkdir(parents=True, exist_ok=True)
        dump_yaml(to_dict(cfg), self.run_dir / "config.yaml")
        probe = make_vec_env(cfg.env.id, 1, seed=rt.seed, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset)
        obs_space, action_space = probe.single_observation_space, probe.single_action_space
        probe.close()
        torch.manual_seed(rt.seed)
        self.device = resolve_device(rt.device)
        if self.device.type == "cpu":
            local_actors = 0 if rt.launcher == "ray" else rt.actors  # Ray actors may live on other nodes
            torch.set_num_threads(rt.learner_threads or max(1, (os.cpu_count() or 1) - local_actors))
        self.learner_group = LearnerGroup.start(cfg, obs_space, action_space, self.run_dir, resume=self.resume)
        policy = build_policy(obs_space, action_space, cfg.model)
        self.learner = make_learner(cfg, policy, self.device)
        spec = UnrollSpec(obs_space, action_space, rt.unroll_length, rt.envs_per_actor, cfg.model.lstm_size)
        slots_per_actor = 1 if self.sync else rt.slots_per_actor
        self.transport = self._make_transport(spec, policy, slots_per_actor)
        self.actors = [ActorRecord(i, list(range(i * slots_per_actor, (i + 1) * slots_per_actor)))
                       for i in range(rt.actors)]
        if self.resume:
            self._restore()
        self.learner_group.attach(self.learner)  # ranks 1..N-1 take rank 0's parameters
        self.transport.publish(self.learner.policy, self.version)
        self.inference = start_inference(cfg, self.learner.policy, self.transport, self.device, obs_space,
                                         action_space)

    def _make_transport(self, spec: UnrollSpec, policy, slots_per_actor: int) -> Transport:
        """The launcher's own transport (Ray: object references), else pipes and shared memory on this host."""
        rt = self.cfg.runtime
        make = getattr(self.launcher, "make_transport", None)
        if make is not None:
            return make(spec=spec, policy=policy, config=self.cfg, slots_per_actor=slots_per_actor)
        return LocalTransport(self.launcher, spec, policy, rt.actors, slots_per_actor, rt.startup_grace_s)

    # The local transport's shared state, under the names the fault tests read.
    buffers = property(lambda self: self.transport.buffers)
    params = property(lambda self: self.transport.params)
    heartbeat = property(lambda self: self.transport.heartbeat)
    progress_frames = property(lambda self: self.transport.progress_frames)

    # ----- the loop ------------------------------------------------------------------------
    def run(self) -> TrainResult:
        self._setup()
        self.start = time.monotonic()
        self._last_log = self._last_ckpt = self.start
        self._last_alive = self.start
        self.pending: list[tuple[int, UnrollMeta]] = []
        for record in self.actors:
            self._start_actor(record)
        reached = False
        try:
            while True:
                self._supervise()
                self._receive(timeout=0.005)
                if self._batch_ready():
                    self._learn()
                    reason = self._stop_reason()
                    if reason:
                        reached = reason == "target_return"
                        break
                    if self._checkpoint_due():
                        self._checkpoint()
                    if self.sync:
                        self._grant_round()
                elif self._stop_reason() in ("wall_clock", "requested"):
                    break
                self._maybe_log()
            stopped_at = self.elapsed()  # training ends here: the closing checkpoint and shutdown are not in its time
            self._checkpoint()
        except KeyboardInterrupt:
            log.warning("interrupted: writing a checkpoint before exiting")
            self._checkpoint()
            raise
        finally:
            self._shutdown()
        # read after shutdown, when transports and services have reported their last counts (Ray node caches,
        # central inference since the last record), but stamped with the time training stopped
        metrics = self._metrics(wall_s=stopped_at)
        self._write_metrics(metrics)
        return TrainResult(self.run_dir, metrics, reached)

    def elapsed(self) -> float:
        return self.wall_offset + time.monotonic() - self.start

    def request_stop(self) -> None:
        """Stop at the next chance, with a final checkpoint (safe to call from another thread)."""
        self._stop_requested = True

    # ----- actors ---------------------------------------------------------------------------
    def _start_actor(self, record: ActorRecord) -> None:
        cfg = self.cfg
        record.started_at = time.time()
        seed = cfg.runtime.seed * 100_003 + record.actor_id * 1009 + record.incarnation * 7919
        kwargs = dict(actor_id=record.actor_id, incarnation=record.incarnation, config=cfg, seed=seed,
                      restore=self._restores.pop(record.actor_id, None), **self.inference.actor_kwargs())
        record.handle = self.transport.start_actor(record.actor_id, kwargs)
        record.restart_at = None
        record.last_sequence = 0
        pending_slots = {slot for slot, _ in self.pending}
        record.free = [s for s in record.slots if s not in pending_slots]
        if self.sync:
            if record.owed_grant or record.incarnation == 0:
                self._grant(record, record.free.pop(0))
                record.owed_grant = True
        else:
            while record.free:
                self._grant(record, record.free.pop(0))

    def _grant(self, record: ActorRecord, slot: int) -> None:
        if not self.transport.grant(record.actor_id, slot):  # gone; supervision restarts it and re-grants
            record.free.append(slot)

    def _grant_round(self) -> None:
        for record in self.actors:
            if record.given_up or record.handle is None:
                record.owed_grant = not record.given_up
                continue
            record.owed_grant = True
            if record.free:
                self._grant(record, record.free.pop(0))

    def _supervise(self) -> None:
        now, rt = time.time(), self.cfg.runtime
        alive = 0
        for record in self.actors:
            if record.given_up:
                continue
            if record.handle is None:
                if record.restart_at is not None and now >= record.restart_at:
                    self._start_actor(record)
                    alive += 1  # just started: alive until its heartbeat says otherwise
                continue
            if not record.handle.is_alive():
                self._receive_from(record)
                code = getattr(record.handle, "exitcode", None)
                self._lose_actor(record, f"died (exit code {code})" + (f": {record.last_error}" if record.last_error else ""))
            elif self.transport.silent_for(record.actor_id) > rt.heartbeat_timeout_s:
                record.handle.kill()
                record.handle.join(0.5)  # a process dies at once; a stalled thread cannot be killed and is fenced
                self._lose_actor(record, f"stalled (no heartbeat for {rt.heartbeat_timeout_s:.1f} s)")
            else:
                alive += 1
        monotonic = time.monotonic()
        if alive:
            self._last_alive = monotonic
        elif monotonic - self._last_alive > rt.no_actor_deadline_s:
            errors = "; ".join(f"actor {r.actor_id}: {r.last_error}" for r in self.actors if r.last_error)
            raise NoActorsError(f"no actor has been alive for {rt.no_actor_deadline_s:.0f} s "
                                f"(runtime.no_actor_deadline_s); last errors: {errors or 'none reported'}")

    def _lose_actor(self, record: ActorRecord, why: str) -> None:
        lost = self.transport.frames_in_flight(record.actor_id)
        self.accounts.drop("actor_lost", lost)
        self.accounts.produced += lost
        self.transport.release(record.actor_id)
        record.handle = None
        record.restarts += 1
        record.failures_in_a_row += 1
        record.incarnation += 1
        if record.failures_in_a_row > self.cfg.runtime.max_restarts:
            record.given_up = True
            log.error("actor %d %s; restarted %d times in a row without delivering an unroll, giving it up "
                      "(runtime.max_restarts)", record.actor_id, why, record.failures_in_a_row - 1)
            return
        backoff = min(0.05 * 2 ** (record.failures_in_a_row - 1), 5.0)
        record.restart_at = time.time() + backoff
        log.warning("actor %d %s; %d frames of its partial unroll dropped; restarting as incarnation %d in %.2f s",
                    record.actor_id, why, lost, record.incarnation, backoff)

    # ----- receiving ------------------------------------------------------------------------
    def _receive(self, timeout: float) -> None:
        for actor_id, message in self.transport.receive(timeout):
            self._handle_message(self.actors[actor_id], message)

    def _receive_from(self, record: ActorRecord) -> None:
        for message in self.transport.drain(record.actor_id):
            self._handle_message(record, message)

    def _handle_message(self, record: ActorRecord, message: tuple) -> None:
        if message[0] == "unroll":
            self._accept(record, message[1], message[2])
        elif message[0] == "error":
            record.last_error = message[1]
            log.debug("actor %d traceback:\n%s", record.actor_id, message[2])
        elif message[0] == "snapshot":
            self._snapshots[record.actor_id] = message[1]

    def _accept(self, record: ActorRecord, slot: int, meta: UnrollMeta) -> None:
        acc = self.accounts
        acc.produced += meta.frames
        acc.record_episodes(meta.episode_returns, meta.episode_lengths)
        self._env_stats = dict(meta.env_stats)
        if meta.incarnation != record.incarnation:
            acc.drop("stale_incarnation", meta.frames)
            record.free.append(slot)
            return
        if meta.sequence <= record.last_sequence:
            acc.duplicates += 1
            acc.drop("duplicate", meta.frames)
            self._grant(record, slot)
            return
        record.last_sequence = meta.sequence
        record.failures_in_a_row = 0  # a healthy incarnation: back-off and the cap start over
        lag = self.version - meta.policy_version
        if not self.sync and lag > self.cfg.runtime.max_policy_lag:
            acc.drop("policy_lag", meta.frames)
            self._grant(record, slot)
            return
        if self.sync:
            record.owed_grant = False
        self.pending.append((slot, meta))

    def _batch_ready(self) -> bool:
        if self.sync:
            return bool(self.pending) and not any(r.owed_grant and not r.given_up for r in self.actors)
        want = self.cfg.runtime.batch_unrolls or len(self.actors)
        return len(self.pending) >= want

    # ----- learning -------------------------------------------------------------------------
    def _learn(self) -> None:
        want = len(self.pending) if self.sync else (self.cfg.runtime.batch_unrolls or len(self.actors))
        taken, self.pending = self.pending[:want], self.pending[want:]
        batch = self.transport.gather([slot for slot, _ in taken])
        for slot, meta in taken:
            record = self.actors[meta.actor_id]
            if self.sync or record.handle is None:
                record.free.append(slot)
            else:
                self._grant(record, slot)
        frames = sum(meta.frames for _, meta in taken)
        lags = [self.version - meta.policy_version for _, meta in taken]
        self.accounts.lags.extend(lags)
        stats = self.learner_group.update(self.learner, batch, self.accounts.accepted + frames)
        self.accounts.accepted += frames
        self.version += 1
        self.transport.publish(self.learner.policy, self.version)
        self._learner_stats = stats

    # ----- stopping, checkpoints, metrics ---------------------------------------------------
    def _stop_reason(self) -> str | None:
        if self._stop_requested:
            return "requested"
        stop = self.cfg.stop
        if stop.target_return is not None:
            mean = self.accounts.mean_return(stop.window)
            if mean is not None and mean >= stop.target_return:
                return "target_return"
        if stop.env_frames is not None and self.accounts.accepted >= stop.env_frames:
            return "env_frames"
        if stop.wall_clock_s is not None and self.elapsed() >= stop.wall_clock_s:
            return "wall_clock"
        return None

    def _checkpoint_due(self) -> bool:
        ck = self.cfg.checkpoint
        if ck.interval_updates and self.learner.updates % ck.interval_updates == 0:
            return True
        return ck.interval_s > 0 and time.monotonic() - self._last_ckpt >= ck.interval_s

    def _collect_actor_snapshots(self, timeout: float = 10.0) -> dict[int, dict]:
        """Sync mode only: actors are idle between rounds, so their state is a clean cut."""
        self._snapshots: dict[int, dict] = {}
        if not self.sync:
            return {}
        asked = [r for r in self.actors if r.handle is not None]
        for record in asked:
            self.transport.request_snapshot(record.actor_id)
        deadline = time.monotonic() + timeout
        while len(self._snapshots) < len(asked) and time.monotonic() < deadline:
            self._receive(timeout=0.01)
        return dict(self._snapshots)

    def _checkpoint(self) -> None:
        if self._saved_step == self.learner.updates:
            return  # nothing new since the last save
        snapshots = self._collect_actor_snapshots()
        state = {
            "learner": self.learner.state_dict(),
            "version": self.version,
            "accounts": self.accounts.state(),
            "wall_s": self.elapsed(),
            "torch_rng": torch.get_rng_state(),
            "actors": {str(k): v for k, v in snapshots.items()},
            "incarnations": [r.incarnation for r in self.actors],
        }
        tensors, meta = flatten_state(state)
        self.checkpoints.save(self.learner.updates, tensors, meta)
        self._saved_step = self.learner.updates
        self._last_ckpt = time.monotonic()

    def _restore(self) -> None:
        checkpoint = self.checkpoints.load_latest()
        if checkpoint is None:
            raise RuntimeError(f"nothing to resume in {self.run_dir}: it has no checkpoint")
        state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
        self.learner.load_state_dict(state["learner"])
        self.version = int(state["version"])
        self.accounts = FrameAccounts.from_state(state["accounts"])
        self.wall_offset = float(state["wall_s"])
        torch.set_rng_state(state["torch_rng"])
        self._restores = {int(k): v for k, v in state.get("actors", {}).items()}
        self._saved_step = self.learner.updates
        log.info("resumed from %s (update %d, %d frames)", checkpoint.path.name, self.learner.updates,
                 self.accounts.accepted)

    def _metrics(self, wall_s: float | None = None) -> dict:
        acc, elapsed = self.accounts, self.elapsed() if wall_s is None else wall_s
        last = self._last_metrics
        dt = max(1e-9, elapsed - last.get("time/wall_s", self.wall_offset))
        lags = acc.lags or [0]
        m = {
            "time/wall_s": elapsed,
            "time/env_frames": acc.accepted,
            "time/env_frames_produced": acc.produced,
            "actor/fps": (acc.produced - last.get("time/env_frames_produced", acc.produced if not last else 0)) / dt,
            "learner/fps": (acc.accepted - last.get("time/env_frames", acc.accepted if not last else 0)) / dt,
            "learner/updates": self.learner.updates,
            "learner/updates_per_s": (self.learner.updates - last.get("learner/updates", 0)) / dt,
            "learner/policy_lag_mean": float(np.mean(lags)),
            "learner/policy_lag_max": float(np.max(lags)),
            "learner/version": self.version,
            "episode/count": acc.episodes,
            "transport/frames_dropped": sum(acc.dropped.values()),
            "transport/duplicates": acc.duplicates,
            "actor/restarts": sum(r.restarts for r in self.actors),
            "actor/alive": sum(1 for r in self.actors if r.handle is not None and r.handle.is_alive()),
            **self.transport.metrics(),
            **self.inference.metrics(),
        }
        if not last:
            m["actor/fps"] = acc.produced / max(dt, 1e-9) if elapsed > 0 else 0.0
            m["learner/fps"] = acc.accepted / max(dt, 1e-9) if elapsed > 0 else 0.0
        for reason, frames in acc.dropped.items():
            m[f"transport/frames_dropped/{reason}"] = frames
        if acc.returns:
            window = list(acc.returns)[-self.cfg.stop.window:]
            m["episode/return_mean"] = float(np.mean(window))
            m["episode/length_mean"] = float(np.mean(list(acc.lengths)[-self.cfg.stop.window:]))
        for key, value in getattr(self, "_learner_stats", {}).items():
            m[f"learner/{key}"] = value
        for key, value in getattr(self, "_env_stats", {}).items():
            m[f"actor/env_{key}"] = value
        acc.lags = []
        return m

    def _write_metrics(self, metrics: dict) -> None:
        self._last_metrics = metrics
        for logger in self.loggers:
            logger.write(metrics, step=int(metrics["time/env_frames"]))
        if self.progress is not None:
            self.progress.write(metrics, step=int(metrics["time/env_frames"]))

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._last_log >= self.cfg.log.interval_s:
            self._last_log = now
            self._write_metrics(self._metrics())

    def _shutdown(self) -> None:
        if hasattr(self, "transport"):
            self.transport.shutdown([r.handle for r in self.actors if r.handle is not None])
        for part in ("inference", "learner_group"):  # after the actors: they finish their unrolls first
            if hasattr(self, part):
                getattr(self, part).close()
        self.launcher.shutdown()
