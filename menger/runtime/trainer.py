"""The trainer: the loop that wires the roles together in the learner's process. Every rule lives in a role.

    launcher     places actors and owns their transport and inference service (threads, processes, Ray)
    supervisor   restarts the dead and the stalled as new incarnations (`ActorSupervisor`)
    coordinator  grants slots, accepts or drops unrolls, says when a batch is ready (`menger.coordinator`);
                 with replay (apex, sac) it turns unrolls into replay items and samples batches
    evaluator    deterministic episodes on its own envs every few seconds (apex, sac: what the stop rule reads)
    video        every eval.video_interval_s, a video of one deterministic episode, written in its own thread
    steps        the learner's side: a learner stepping on each batch, data-parallel over N ranks, or learner
                 processes pushing gradients to a parameter server (`menger.coordinator.steps`)
    learner      pure losses and an optimizer step
    observers    metrics, checkpoints watchers, tests (`menger.runtime.observers`)

No wait is without a deadline: with no live actor for `no_actor_deadline_s`, `NoActorsError` ends the run.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from menger.checkpoint import CheckpointManager, flatten_state
from menger.config import ConfigError, dump_yaml, to_dict
from menger.coordinator import make_coordinator
from menger.coordinator.steps import make_steps
from menger.core import InferenceBackend, Launcher, Transport
from menger.device import resolve_device
from menger.experiment import ExperimentConfig
from menger.forking import FORK_GATE
from menger.learners import make_learner
from menger.learners.a3c import gradient_size
from menger.models import build_policy
from menger.models.normalize import RunningNormalization
from menger.runtime.accounting import FrameAccounts
from menger.runtime.actors import make_actor
from menger.runtime.evaluation import Evaluator, VideoRecorder
from menger.runtime.keeping import CheckpointKeeping, params_digest
from menger.runtime.league import LeagueHub, LeagueKeeper
from menger.runtime.metrics import MetricsRecorder
from menger.runtime.observers import Observer, episodes_of
from menger.runtime.restore import check_same_inputs, restore, saved_config
from menger.runtime.spaces import check_fit
from menger.runtime.stopping import StopRules, TrainingFailed
from menger.runtime.supervisor import ActorSupervisor, NoActorsError
from menger.transport import UnrollSpec

log = logging.getLogger("menger.trainer")

NO_UPDATE_FAILURE_S = 10.0  # a resume with less wall clock left than this may end without an update, unblamed

__all__ = ["NoActorsError", "Trainer", "TrainResult"]


@dataclass
class TrainResult:
    run_dir: Path
    final_metrics: dict
    reached_target: bool = False


class Trainer:
    def __init__(self, config: ExperimentConfig, run_dir: str | Path, *, launcher: Launcher, observers=(),
                 resume: bool = False, league: tuple | None = None, active_actors: int | None = None,
                 resume_from: str | int = "latest"):
        """Checks the coordination arithmetic (a config that can never fill a batch is refused here, before
        anything starts); `run()` does the rest. `league`: (LeagueHub, player) when this learner is one of a
        league's several (`menger.runtime.league`); a self-play run (`league.mode: selfplay`) makes its own.
        `active_actors`: an elastic run starts this many of its `runtime.actors` and parks the rest
        (`ActorSupervisor.set_active`). `resume_from`: the checkpoint a resume goes on from, latest, best or a step
        (the newer ones are set aside, `menger.runtime.restore`)."""
        self.cfg, self.run_dir, self.launcher, self.resume = config, Path(run_dir), launcher, resume
        self.resume_from = resume_from
        self.observers = list(observers)
        rt = config.runtime
        self.coordinator = make_coordinator(config)
        self.supervisor = ActorSupervisor(rt.supervision, rt.actors, _Fleet(self), active=active_actors)
        # actors that explore (Ape-X's epsilons) make the greedy evaluation the target's; the others act as the
        # policy does, so an evaluation switched on for them is watched but does not move when the run stops
        self.stop_rules = StopRules(config.stop, use_eval=config.evaluates
                                    and config.algorithm.evaluation == "greedy")
        self._publish_every = config.replay.publish_every if config.coordination == "replay" else 1
        self.evaluator: Evaluator | None = None
        self.video: VideoRecorder | None = None
        self.eval_stats: dict = {}
        self.checkpoint_stats: dict = {}
        self.accounts, self.version, self.wall_offset = FrameAccounts(), 0, 0.0
        self.learner_stats: dict = {}
        self.stopping = False  # the loop has ended: closing checkpoint and shutdown follow
        self._stop_requested = False
        self._restores: dict[int, dict] = {}
        self.config_changes: dict[str, tuple] = {}  # a resume: dotted key -> (saved value, this run's value)
        self._snapshots: dict[int, dict] = {}
        self._saved_step: int | None = None
        self._spaces: tuple | None = None
        self.normalization: RunningNormalization | None = None  # env.normalize: built with the spaces
        self._league_given = league
        self.league: LeagueKeeper | None = None  # multi-agent runs with a league: this learner's side of it
        # the learner's side: one learner stepping on batches, or learner processes pushing gradients (GORILA)
        self.steps = make_steps(self, config)

    actors = property(lambda self: self.supervisor.actors)  # per actor: incarnation, handle, restarts, errors

    # ----- the loop ---------------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        with FORK_GATE.working():  # other trainers of this process fork only between our sections (menger.forking)
            self._setup()
        reason = None
        try:
            self.supervisor.start_all()
            self.notify("on_start")
            # a resume whose stop rule was already met stops before its first turn: a first turn whose unrolls
            # came in at once would update before any rule is read
            if self.resume:
                reason = self._stop_after_update()
            while reason is None:
                with FORK_GATE.working():
                    reason = self._turn()
            with FORK_GATE.working():
                self.stopping, stopped_at = True, self.elapsed()  # training ends here, not after the closing save
                self._check_learned(reason)
                self.notify("on_stop", reason)
                self._checkpoint()
        except KeyboardInterrupt:
            log.warning("interrupted: writing a checkpoint before exiting")
            self.stopping = True
            self._checkpoint()
            raise
        finally:
            self._shutdown()
        # after shutdown, when transports and services have reported their last counts (Ray node caches,
        # central inference since the last record), but stamped with the time training stopped
        return TrainResult(self.run_dir, self._write_metrics(stopped_at), reason == "target_return")

    def _turn(self) -> str | None:
        """One turn of the loop; the reason to stop, or None."""
        self.supervisor.tick()                      # restart the dead and the stalled
        self.send_grants()                         # slots the coordinator hands out
        ready = self.steps.ready()
        self._receive(timeout=0.0 if ready else self.steps.wait_s)  # accept or drop each unroll tag
        if (ready or self.steps.ready()) and self._learn():  # gather, update, publish version += 1
            self.stop_rules.check_health(self.accounts, self.learner_stats)  # TrainingFailed
            if self.evaluator is not None and self.evaluator.due(self.elapsed(), self.accounts.accepted):
                self._evaluate()                    # deterministic episodes on the evaluator's own envs
            if self.video is not None and self.video.due(self.elapsed()):
                self.video.start(self.learner.policy, self.accounts.accepted, self.elapsed())
            reason = self._stop_after_update()
            if reason is None:
                if self._checkpoint_due():
                    self._checkpoint()              # sync: before the next round's grants go out
                self.send_grants()                 # sync: the next round, at once
        else:
            reason = self.stop_rules.while_waiting(self.elapsed(), self._stop_requested)
        if reason is None:
            self._maybe_log()                       # the closing record is written after shutdown
        return reason

    def _stop_after_update(self) -> str | None:
        """The stop rules read as after an update: a budget, the target return, a stop request."""
        return self.stop_rules.after_update(self.accounts, self.elapsed(), self._stop_requested,
                                            self.eval_stats.get("eval/return_mean"))

    def elapsed(self) -> float:
        return self.wall_offset + time.monotonic() - self.start

    def preflight(self) -> tuple:
        """Build the env once (for its spaces) and the network once, before the run directory is written: an
        unknown env id, bad env kwargs, a network that does not build or (with eval.video_interval_s) an env
        that cannot render end here with one clear error (`menger.runtime.spaces`)."""
        if self._spaces is None:
            self._spaces, self._multiagent = check_fit(self.cfg)
            if self.cfg.eval.video_interval_s > 0:  # an env that cannot render fails here too
                self.video = VideoRecorder(self.cfg, *self._spaces, self.run_dir)
        return self._spaces

    def request_stop(self) -> None:
        """Stop at the next chance, with a final checkpoint (safe to call from another thread)."""
        self._stop_requested = True

    # ----- set-up -----------------------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg, rt = self.cfg, self.cfg.runtime
        obs_space, action_space = self.preflight()  # before any file is written
        self.run_dir.mkdir(parents=True, exist_ok=True)
        saved = saved_config(self.run_dir) if self.resume else None  # before this run's replaces it
        if saved is not None:
            check_same_inputs(saved, cfg)
        dump_yaml(to_dict(cfg), self.run_dir / "config.yaml")
        self.checkpoints = CheckpointManager(self.run_dir / "checkpoints", keep_last=cfg.checkpoint.keep_last)
        torch.manual_seed(rt.seed)
        self.device = resolve_device(rt.learner.device)
        if self.device.type == "cpu":
            torch.set_num_threads(rt.learner.threads or max(1, (os.cpu_count() or 1) - self.launcher.local_actors))
        # forked before anything touches CUDA: data-parallel ranks, or GORILA's learner processes
        self.learner_group = self.steps.start_learners(cfg, obs_space, action_space, self.run_dir, self.resume)
        self.learner = make_learner(cfg, build_policy(obs_space, action_space, cfg.model, cfg.algo, cfg.env.normalize),
                                    self.device)
        if cfg.env.normalize.active:
            self.normalization = RunningNormalization(cfg.env.normalize, getattr(obs_space, "shape", ()) or ())
        fields = {"terminated": cfg.coordination == "replay",
                  "gradient": gradient_size(self.learner.policy) if cfg.learner_mode == "parameter_server" else 0}
        fields.update(cfg.algorithm.unroll_fields(cfg))  # what its actors write beside the steps
        spec = UnrollSpec(obs_space, self.learner.policy.action_space, rt.unroll_length, rt.envs_per_actor,
                          cfg.model.lstm_size, **fields)
        self.transport: Transport = self.launcher.make_transport(spec, self.learner.policy,
                                                                 self.coordinator.slots_per_actor)
        self.coordinator.attach(self.transport)
        if cfg.evaluates:
            self.evaluator = Evaluator(cfg, obs_space, action_space)
        self.league = self._make_league()
        if self.resume:
            restore(self, saved, self.resume_from)
        self.keeping = CheckpointKeeping(cfg.checkpoint, self.checkpoints.best(), self.accounts.accepted)
        if self.league is not None:
            self.league.start(self.learner.policy)
        self.learner_group.attach(self.learner)  # ranks 1..N-1 take rank 0's parameters
        self._publish()
        self.inference: InferenceBackend = self.launcher.start_inference(self.learner.policy, self.transport,
                                                                         self.device)
        self.metrics = MetricsRecorder(cfg.stop.window, self.wall_offset)
        self._updates_at_start = self.learner.updates
        self.start = self._last_log = self._last_ckpt = time.monotonic()

    def _make_league(self) -> LeagueKeeper | None:
        if self._league_given is not None:
            hub, player = self._league_given
            return LeagueKeeper(hub, player, self.cfg.league.publish_s)
        if self.cfg.league.mode == "none":
            return None
        if not getattr(self, "_multiagent", False):
            raise ConfigError(f"league.mode={self.cfg.league.mode} needs a multi-agent env (a PettingZoo env given as "
                              f"env.id: package.module:factory); {self.cfg.env.id!r} is a single-agent env")
        if self.cfg.league.mode != "selfplay":
            raise ConfigError("league.mode=league runs several learners: train it with `menger train` or "
                              "menger.api.train, which start one learner per league player")
        hub = LeagueHub(self.cfg.league, self.run_dir / "league", seed=self.cfg.runtime.seed)
        return LeagueKeeper(hub, hub.league.learners()[0], self.cfg.league.publish_s)

    # ----- messages and batches ---------------------------------------------------------------------------
    def send_grants(self) -> None:
        for actor_id, slot in self.coordinator.grants():
            if not self.transport.grant(actor_id, slot):  # gone: the supervisor restarts it
                self.coordinator.grant_failed(actor_id, slot)

    def _receive(self, timeout: float) -> None:
        for actor_id, message in self.transport.receive(timeout):
            self._handle(actor_id, message)

    def _handle(self, actor_id: int, message: tuple) -> None:
        if message[0] == "unroll":
            meta = message[2]
            verdict = self.coordinator.accept(message[1], meta)
            self.accounts.record(meta, verdict)
            if meta.episode_returns:  # episodes are facts whatever becomes of the unroll's frames
                self._episodes_ended(meta)
            if self.league is not None:  # the games are over whatever becomes of the unroll
                self.league.record(meta.match_results)
            if verdict.delivered:
                self.supervisor.delivered(actor_id)
            self.notify("on_unroll", meta, verdict)
        elif message[0] == "error":
            self.supervisor.report_error(actor_id, message[1], message[2])
            log.debug("actor %d traceback:\n%s", actor_id, message[2])
        elif message[0] == "snapshot":
            self._snapshots[actor_id] = message[1]

    def _episodes_ended(self, meta) -> None:
        """`on_episode_end` of each episode of the unroll, to the observers that define it (most do not: no
        `Episode` is made for them)."""
        watchers = [o for o in self.observers
                    if getattr(type(o), "on_episode_end", Observer.on_episode_end) is not Observer.on_episode_end]
        if watchers:
            for episode in episodes_of(meta):
                for observer in watchers:
                    observer.on_episode_end(self, episode)

    def _learn(self) -> bool:
        """One update by the learner's side (`self.steps`); False: nothing was applied, which only gradient rounds
        leave undone."""
        return self.steps.learn()

    def applied(self, stats: dict) -> None:
        """An update was applied: a new version, published (every `replay.publish_every`), reported."""
        self.version += 1
        if self.version % self._publish_every == 0:
            self._publish()
        else:  # the actors go on with the last version published; the coordinator counts lags from this one
            self.coordinator.published(self.version)
        self.learner_stats = stats
        self.notify("on_update", stats)

    def _evaluate(self) -> None:
        self.eval_stats = self.evaluator.run(self.learner.policy, self.elapsed(), self.accounts.accepted)
        log.debug("evaluation: %s", self.eval_stats)
        if self.keeping.beaten_by(self.eval_stats):  # saved now, before any update moves the parameters evaluated
            self._checkpoint(best=self.keeping.record(
                self.eval_stats, params_digest(self.evaluator.network.state_dict()), step=self.learner.updates,
                frames=self.accounts.accepted, version=self.version))
        self._last_log = time.monotonic()  # every evaluation gets a metrics row of its own: a curve point each
        self._write_metrics(self.elapsed())

    def _publish(self) -> None:
        if self.normalization is not None:  # the statistics travel with the parameters (ObsNormalizer)
            self.normalization.write_into(self.learner.policy)
        self.transport.publish(self.learner.policy, self.version)
        self.learner_group.publish(self.learner, self.version)  # GORILA's learner processes read it too
        self.coordinator.published(self.version)
        for meta in self.coordinator.take_expired():  # a parameter server's gradients that grew too stale waiting
            self.accounts.drop("policy_lag", meta.frames)

    def _check_learned(self, reason: str) -> None:
        """A run that ran out of time without a single update learned nothing: that is a failure, not a result.
        A resume that had less time left than that (or none: already met) stopped where it was: not a failure."""
        ran_s = self.elapsed() - self.wall_offset
        if reason == "wall_clock" and self.learner.updates == self._updates_at_start and \
                ran_s >= min(self.cfg.stop.wall_clock_s, NO_UPDATE_FAILURE_S):
            errors = "; ".join(f"actor {r.actor_id}: {r.last_error}" for r in self.actors if r.last_error)
            error = TrainingFailed(f"stop.wall_clock_s={self.cfg.stop.wall_clock_s} passed without a single update "
                                   f"({self.accounts.produced} frames produced); last actor errors: "
                                   f"{errors or 'none reported'}")
            error.child_errors = self.supervisor.child_errors()
            raise error

    # ----- checkpoints ------------------------------------------------------------------------------------
    def _checkpoint_due(self) -> bool:
        ck = self.cfg.checkpoint
        if self.keeping.pin_due(self.accounts.accepted):
            return True
        if ck.interval_updates and self.learner.updates % ck.interval_updates == 0:
            return True
        return ck.interval_s > 0 and time.monotonic() - self._last_ckpt >= ck.interval_s

    def _checkpoint(self, best: dict | None = None) -> None:
        """Save the trainer's state; `best`: the record of the evaluation of exactly these parameters that beat
        the best (`menger.runtime.keeping`), so this checkpoint becomes the best."""
        if self._saved_step == self.learner.updates:  # nothing new since the last save
            if best is not None:
                self._mark_best(best, params_digest(self.learner.policy.state_dict()))
            return
        started = time.monotonic()  # the loop grants nothing until the save is done: writers wait this long
        state = {"learner": self.learner.state_dict(), "version": self.version, "accounts": self.accounts.state(),
                 "wall_s": self.elapsed(), "torch_rng": torch.get_rng_state(),
                 "actors": {str(k): v for k, v in self._collect_actor_snapshots().items()},
                 "incarnations": [r.incarnation for r in self.actors]}
        replay = self.coordinator.state()
        if replay is not None:
            state["replay"] = replay
        if self.evaluator is not None:
            state["evaluator"] = self.evaluator.state()
        if self.normalization is not None:
            state["normalization"] = self.normalization.state()
        if self.league is not None:
            state["league"] = self.league.hub.state()
            self.league.hub.save_state()  # for `menger league RUN`
        tensors, structure = flatten_state(state)
        pinned, frames = self.keeping.pin_due(self.accounts.accepted), self.accounts.accepted
        path = self.checkpoints.save(self.learner.updates, tensors, {**structure, "evaluation": best}, pinned=pinned,
                                     summary={"frames": frames, "version": self.version})
        if pinned:
            self.keeping.pinned(frames)
        if best is not None:
            self._mark_best(best, params_digest(state["learner"]["model"]))
        self._saved_step, self._last_ckpt = self.learner.updates, time.monotonic()
        self.checkpoint_stats = {"checkpoint/count": self.checkpoint_stats.get("checkpoint/count", 0) + 1,
                                 "checkpoint/last_s": self._last_ckpt - started}
        self.notify("on_checkpoint", self.learner.updates, path)

    def _mark_best(self, record: dict, saved_digest: str) -> None:
        """Name the checkpoint just saved the best, if it holds the parameters the evaluator played."""
        if saved_digest != record["params_sha256"]:
            log.warning("the best evaluation (eval/return_mean %.4g) is not kept: the parameters saved at step %d "
                        "are not the ones evaluated", record["return_mean"], self.learner.updates)
            return
        self.checkpoints.mark_best(self.learner.updates, record)
        self.keeping.kept_best(record)
        log.info("best checkpoint: step %d, eval/return_mean %.4g", self.learner.updates, record["return_mean"])

    def _collect_actor_snapshots(self, timeout_s: float = 10.0) -> dict[int, dict]:
        """Only where actors are idle between batches (sync), so their state is a clean cut. An actor that is
        dead, or dies while we wait, is not waited for: it has nothing to say, and its restart starts afresh."""
        self._snapshots = {}
        if not self.coordinator.idle_between_batches:
            return {}
        asked = {r.actor_id: r.handle for r in self.actors if r.handle is not None and r.handle.is_alive()}
        for actor_id in asked:
            self.transport.request_snapshot(actor_id)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            waiting = [a for a, handle in asked.items() if a not in self._snapshots and handle.is_alive()]
            if not waiting:
                break
            self._receive(timeout=0.01)
        return dict(self._snapshots)

    # ----- metrics, observers, shutdown -------------------------------------------------------------------
    def _maybe_log(self) -> None:
        if time.monotonic() - self._last_log >= self.cfg.log.interval_s:
            self._last_log = time.monotonic()
            self._write_metrics(self.elapsed())

    def _write_metrics(self, elapsed: float) -> dict:
        components = {**self.supervisor.metrics(), **self.transport.metrics(), **self.inference.metrics(),
                      **self.coordinator.metrics(), **self.eval_stats, **self.checkpoint_stats,
                      **(self.video.metrics() if self.video is not None else {}),
                      **(self.normalization.metrics() if self.normalization is not None else {}),
                      **self.steps.metrics(),
                      **getattr(self.learner, "metrics", dict)(),  # a parameter server's shards
                      **(self.league.metrics() if self.league is not None else {})}
        metrics = self.metrics.record(elapsed, self.accounts, self.learner.updates, self.version,
                                      learner_stats=self.learner_stats, env_stats=self.accounts.env_totals(),
                                      components=components)
        self.notify("on_metrics", metrics)
        return metrics

    def notify(self, hook: str, *args) -> None:
        for observer in self.observers:
            getattr(observer, hook)(self, *args)

    def _shutdown(self) -> None:
        self.supervisor.final_pass()  # deaths since the last pass count, though nothing restarts them now
        if hasattr(self, "transport"):
            self.transport.shutdown(self.supervisor.handles())
        # after the actors: they finish their unrolls
        for part in ("inference", "learner_group", "learner", "evaluator", "video"):
            close = getattr(getattr(self, part, None), "close", None)  # a learner closes shard processes, if any
            if close is not None:
                close()
        self.coordinator.close()
        self.launcher.shutdown()


class _Fleet:
    """The supervisor's hands (`menger.runtime.supervisor.Fleet`): what starting and losing an actor means here."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def start(self, actor_id: int, incarnation: int):
        t = self.trainer
        seed = t.cfg.runtime.seed * 100_003 + actor_id * 1009 + incarnation * 7919
        kwargs = dict(build=make_actor, actor_id=actor_id, incarnation=incarnation, config=t.cfg, seed=seed,
                      restore=t._restores.pop(actor_id, None), **t.inference.actor_kwargs())
        if t.league is not None:
            kwargs["league"] = t.league.link()
        handle = t.transport.start_actor(actor_id, kwargs)
        t.coordinator.actor_started(actor_id, incarnation)
        return handle

    def silent(self, seconds: float) -> list[int]:
        return self.trainer.transport.silent(seconds)

    def closed(self) -> list[int]:
        return self.trainer.transport.closed()

    def retire(self, actor_id: int) -> int:
        t = self.trainer
        for message in t.transport.drain(actor_id):  # unrolls and the error it sent before it went
            t._handle(actor_id, message)
        lost = t.transport.frames_in_flight(actor_id)
        t.accounts.lose(lost)
        t.transport.release(actor_id)
        t.coordinator.actor_lost(actor_id)
        return lost

    def give_up(self, actor_id: int) -> None:
        self.trainer.coordinator.actor_given_up(actor_id)

    def park(self, actor_id: int) -> None:
        self.trainer.coordinator.actor_parked(actor_id)

    def unpark(self, actor_id: int) -> None:
        self.trainer.coordinator.actor_unparked(actor_id)
