"""The trainer: the loop that wires the roles together in the learner's process. Every rule lives in a role.

    launcher     places actors and owns their transport and inference service (threads, processes, Ray)
    supervisor   restarts the dead and the stalled as new incarnations (`ActorSupervisor`)
    coordinator  grants slots, accepts or drops unrolls, says when a batch is ready (`menger.coordinator`);
                 with replay (apex, sac) it turns unrolls into replay items and samples batches
    evaluator    deterministic episodes on its own envs every few seconds (apex, sac: what the stop rule reads)
    video        every eval.video_interval_s, a video of one deterministic episode, written in its own thread
    learner      pure losses and an optimizer step, data-parallel over N ranks (`LearnerGroup`)
    observers    metrics, checkpoints watchers, tests (`menger.runtime.observers`)

No wait is without a deadline: with no live actor for `no_actor_deadline_s`, `NoActorsError` ends the run.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch

from menger import registry
from menger.checkpoint import CheckpointManager, flatten_state, unflatten_state
from menger.config import ConfigError, dump_yaml, from_dict, load_yaml, to_dict
from menger.coordinator import make_coordinator
from menger.core import InferenceBackend, Launcher, Transport
from menger.device import resolve_device
from menger.envs import EnvError, UnknownEnvError, make_vec_env
from menger.experiment import ExperimentConfig, migrate_legacy_keys
from menger.forking import FORK_GATE
from menger.learners import make_learner
from menger.learners.a3c import gradient_size
from menger.learners.distributed import LearnerGroup
from menger.learners.gorila import GorilaWorkers
from menger.models import build_policy
from menger.models.normalize import RunningNormalization
from menger.runtime.accounting import FrameAccounts
from menger.runtime.actors import make_actor
from menger.runtime.evaluation import Evaluator, VideoRecorder
from menger.runtime.league import LeagueHub, LeagueKeeper
from menger.runtime.metrics import MetricsRecorder
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
                 resume: bool = False, league: tuple | None = None, active_actors: int | None = None):
        """Checks the coordination arithmetic (a config that can never fill a batch is refused here, before
        anything starts); `run()` does the rest. `league`: (LeagueHub, player) when this learner is one of a
        league's several (`menger.runtime.league`); a self-play run (`league.mode: selfplay`) makes its own.
        `active_actors`: an elastic run starts this many of its `runtime.actors` and parks the rest
        (`ActorSupervisor.set_active`)."""
        self.cfg, self.run_dir, self.launcher, self.resume = config, Path(run_dir), launcher, resume
        self.observers = list(observers)
        rt = config.runtime
        self.coordinator = make_coordinator(config)
        self.supervisor = ActorSupervisor(rt.supervision, rt.actors, _Fleet(self), active=active_actors)
        # actors that explore (Ape-X's epsilons) make the greedy evaluation the target's; the others act as the
        # policy does, so an evaluation switched on for them is watched but does not move when the run stops
        self.stop_rules = StopRules(config.stop, use_eval=config.eval_interval_s > 0
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
        self.gorila = config.algorithm.gradient_learners  # learner processes push gradients (GORILA)
        self._wait_s = 0.001 if self.gorila else 0.005  # how long to wait for actors when nothing is to learn
        self._round: list = []  # gorila, sync: the gradients of the round so far, and how many were handed out
        self._dispatched = 0
        self._stale_gradients = 0

    actors = property(lambda self: self.supervisor.actors)  # per actor: incarnation, handle, restarts, errors

    # ----- the loop ---------------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        with FORK_GATE.working():  # other trainers of this process fork only between our sections (menger.forking)
            self._setup()
        reason = None
        try:
            self.supervisor.start_all()
            self._notify("on_start")
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
                self._notify("on_stop", reason)
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
        self._send_grants()                         # slots the coordinator hands out
        ready = self._learn_ready()
        self._receive(timeout=0.0 if ready else self._wait_s)  # accept or drop each unroll tag
        if (ready or self._learn_ready()) and self._learn():  # gather, update, publish version += 1
            self.stop_rules.check_health(self.accounts, self.learner_stats)  # TrainingFailed
            if self.evaluator is not None and self.evaluator.due(self.elapsed()):
                self._evaluate()                    # deterministic episodes on the evaluator's own envs
            if self.video is not None and self.video.due(self.elapsed()):
                self.video.start(self.learner.policy, self.accounts.accepted, self.elapsed())
            reason = self._stop_after_update()
            if reason is None:
                if self._checkpoint_due():
                    self._checkpoint()              # sync: before the next round's grants go out
                self._send_grants()                 # sync: the next round, at once
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
        that cannot render end here with one clear error."""
        if self._spaces is None:
            cfg = self.cfg
            facts: dict = {}
            spaces = probe_spaces(cfg.env, cfg.runtime.seed, cfg.runtime.supervision.startup_grace_s,
                                  cfg.runtime.envs_per_actor, facts)
            self._multiagent = facts["multiagent"]
            if self._multiagent and not cfg.algorithm.multi_agent:
                raise ConfigError(f"algo {cfg.algo!r} with the multi-agent env {cfg.env.id!r}: its opponents and "
                                  "unfinished agents are not given to the replay algorithms yet; train it with "
                                  f"{registry.listing(lambda a: a.multi_agent)}")
            try:
                with torch.random.fork_rng(devices=[]):
                    build_policy(*spaces, cfg.model, cfg.algo, cfg.env.normalize)
            except Exception as exc:  # noqa: BLE001 - a user's network can fail in any way
                if cfg.model.network is None and isinstance(exc, ValueError):  # Menger's own: a misfit, named
                    raise ConfigError(f"algo {cfg.algo!r} does not fit the env {cfg.env.id!r}: {exc}") from exc
                raise NetworkBuildError(f"model: building the network for this env failed ({type(exc).__name__}: "
                                        f"{exc}; observations {_space_text(spaces[0])}, actions {_space_text(spaces[1])}); check "
                                        "model.network, model.kwargs and model.hidden") from exc
            self._spaces = spaces
            if cfg.eval.video_interval_s > 0:  # an env that cannot render fails here too
                self.video = VideoRecorder(cfg, *spaces, self.run_dir)
        return self._spaces

    def request_stop(self) -> None:
        """Stop at the next chance, with a final checkpoint (safe to call from another thread)."""
        self._stop_requested = True

    # ----- set-up -----------------------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg, rt = self.cfg, self.cfg.runtime
        obs_space, action_space = self.preflight()  # before any file is written
        self.run_dir.mkdir(parents=True, exist_ok=True)
        saved_config = _saved_config(self.run_dir) if self.resume else None  # before this run's replaces it
        if saved_config is not None:
            _check_same_inputs(saved_config, cfg)
        dump_yaml(to_dict(cfg), self.run_dir / "config.yaml")
        self.checkpoints = CheckpointManager(self.run_dir / "checkpoints", keep_last=cfg.checkpoint.keep_last)
        torch.manual_seed(rt.seed)
        self.device = resolve_device(rt.learner.device)
        if self.device.type == "cpu":
            torch.set_num_threads(rt.learner.threads or max(1, (os.cpu_count() or 1) - self.launcher.local_actors))
        if self.gorila:  # GORILA's learner processes push gradients (forked before CUDA, as data-parallel ranks)
            self.learner_group = GorilaWorkers.start(cfg, obs_space, action_space)
        else:
            self.learner_group = LearnerGroup.start(cfg, obs_space, action_space, self.run_dir, resume=self.resume)
        self.learner = make_learner(cfg, build_policy(obs_space, action_space, cfg.model, cfg.algo, cfg.env.normalize),
                                    self.device)
        if cfg.env.normalize.active:
            self.normalization = RunningNormalization(cfg.env.normalize, getattr(obs_space, "shape", ()) or ())
        spec = UnrollSpec(obs_space, self.learner.policy.action_space, rt.unroll_length, rt.envs_per_actor,
                          cfg.model.lstm_size,
                          terminated=cfg.coordination == "replay",
                          gradient=gradient_size(self.learner.policy) if cfg.learner_mode == "parameter_server" else 0,
                          **cfg.algorithm.unroll_fields(cfg))  # what its actors write beside the steps
        self.transport: Transport = self.launcher.make_transport(spec, self.learner.policy,
                                                                 self.coordinator.slots_per_actor)
        self.coordinator.attach(self.transport)
        if cfg.eval_interval_s > 0:
            self.evaluator = Evaluator(cfg, obs_space, action_space)
        self.league = self._make_league()
        if self.resume:
            self._restore(saved_config)
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
    def _send_grants(self) -> None:
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
            if self.league is not None:  # the games are over whatever becomes of the unroll
                self.league.record(meta.match_results)
            if verdict.delivered:
                self.supervisor.delivered(actor_id)
            self._notify("on_unroll", meta, verdict)
        elif message[0] == "error":
            self.supervisor.report_error(actor_id, message[1], message[2])
            log.debug("actor %d traceback:\n%s", actor_id, message[2])
        elif message[0] == "snapshot":
            self._snapshots[actor_id] = message[1]

    def _learn_ready(self) -> bool:
        if not self.gorila:
            return self.coordinator.batch_ready()
        workers = self.learner_group
        return workers.has_results() or (self._may_submit() and self.coordinator.batch_ready())

    def _learn(self) -> bool:
        """One update (False: nothing was applied, which only GORILA's learner processes can leave undone)."""
        if self.gorila:
            return self._learn_pushed()
        batch = self.coordinator.take_batch(self.transport.gather)  # a copy: its slots may be granted again
        if batch is None:  # replay on Ray: every sampled item was on a node that just died; sample again
            return True
        self._send_grants()                                         # async: actors go on while the learner steps
        self._notify("on_batch", batch)
        self.accounts.lags.extend(batch.lags)
        if self.normalization is not None:  # rewards scaled for the loss only: episode returns stay raw
            self.normalization.merge(batch.metas)
            batch.data["rewards"] = self.normalization.scale_rewards(batch.data["rewards"])
        stats = self.learner_group.update(self.learner, batch.data, self.accounts.accepted + batch.frames)
        self.coordinator.learned(batch, stats)                      # replay: new priorities go back
        self.accounts.accepted += batch.frames
        if self.league is not None:
            self.league.after_update(self.learner, self.accounts.accepted)  # a snapshot, an exploiter's reset
        self.version += 1
        if self.version % self._publish_every == 0:
            self._publish()
        else:  # the actors go on with the last version published; the coordinator counts lags from this one
            self.coordinator.published(self.version)
        self.learner_stats = stats
        self._notify("on_update", stats)
        return True

    # ----- GORILA: learner processes push gradients ---------------------------------------------------------
    def _may_submit(self) -> bool:
        """async: whenever a learner process is idle; sync: a new round once the last one is applied."""
        workers = self.learner_group
        if self.cfg.runtime.parameter_server.update == "async":
            return bool(workers.idle())
        return bool(workers.idle()) and self._dispatched < workers.alive()  # nothing is applied mid-round

    def _learn_pushed(self) -> bool:
        """Apply what the learner processes pushed (each as it came, or a whole round), then hand out batches."""
        workers, ps = self.learner_group, self.cfg.runtime.parameter_server
        workers.check()
        pushed = workers.finished()
        applied = False
        if ps.update == "async":
            for one in pushed:
                applied = self._apply_pushed([one]) or applied
        else:
            self._round.extend(pushed)
            if self._round and not workers.busy() and self._dispatched >= workers.alive():  # all of it is back
                applied = self._apply_pushed(self._round)
                self._round, self._dispatched = [], 0
        while self._may_submit() and self.coordinator.batch_ready():
            batch = self.coordinator.take_batch(self.transport.gather)
            if batch is None:
                continue
            self._notify("on_batch", batch)
            self.accounts.lags.extend(batch.lags)
            self.accounts.accepted += batch.frames
            workers.submit(workers.idle()[0], batch)
            self._dispatched += ps.update == "sync"
        self._send_grants()
        return applied

    def _apply_pushed(self, pushed: list) -> bool:
        """One server step on the gradients that are fresh enough (a sync round's all are); the priorities of
        every batch go back to the replay. False when every gradient was too stale."""
        bound = self.cfg.runtime.parameter_server.max_staleness
        staleness = [self.version - one.base_version for one in pushed]
        fresh = [one for one, lag in zip(pushed, staleness) if lag <= bound]
        self._stale_gradients += len(pushed) - len(fresh)
        for one in pushed:  # |TD| measured on the parameters the learner had: still news for the replay
            self.coordinator.learned(one.batch, {"priorities": one.priorities.numpy()})
        if not fresh:
            return False
        stats = {key: sum(one.stats[key] for one in fresh) / len(fresh) for key in fresh[0].stats}
        stats = self.learner.update({"gradient": torch.stack([one.gradient for one in fresh]), "stats": stats},
                                    self.accounts.accepted)
        stats.update(staleness_mean=sum(staleness) / len(staleness), gradients_dropped_stale=self._stale_gradients)
        self.version += 1
        self._publish()
        self.learner_stats = stats
        self._notify("on_update", stats)
        return True

    def _evaluate(self) -> None:
        self.eval_stats = self.evaluator.run(self.learner.policy, self.elapsed())
        log.debug("evaluation: %s", self.eval_stats)

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
        if ck.interval_updates and self.learner.updates % ck.interval_updates == 0:
            return True
        return ck.interval_s > 0 and time.monotonic() - self._last_ckpt >= ck.interval_s

    def _checkpoint(self) -> None:
        if self._saved_step == self.learner.updates:
            return  # nothing new since the last save
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
        path = self.checkpoints.save(self.learner.updates, *flatten_state(state))
        self._saved_step, self._last_ckpt = self.learner.updates, time.monotonic()
        self.checkpoint_stats = {"checkpoint/count": self.checkpoint_stats.get("checkpoint/count", 0) + 1,
                                 "checkpoint/last_s": self._last_ckpt - started}
        self._notify("on_checkpoint", self.learner.updates, path)

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

    def _restore(self, saved_config: dict | None = None) -> None:
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
        if "replay" in state:
            self.coordinator.load_state(state["replay"])
        if self.normalization is not None and "normalization" in state:
            self.normalization.load_state(state["normalization"])
        if self.league is not None and "league" in state and self._league_given is None:
            self.league.hub.load_state(state["league"])  # a league of several learners is restored by its runner
        if self.evaluator is not None and "evaluator" in state:
            self.evaluator.load_state(state["evaluator"])
            self.eval_stats = self.evaluator.last
        if self.video is not None:  # the first video of a resumed run comes an interval after where it resumed
            self.video.next_at = self.wall_offset + self.video.interval_s
        self._saved_step = self.learner.updates
        log.info("resumed from %s (update %d, %d frames, parameter version %d)", checkpoint.path.name,
                 self.learner.updates, self.accounts.accepted, self.version)
        changes = _config_changes(saved_config, to_dict(self.cfg)) if saved_config is not None else {}
        self.config_changes = changes
        for key, (old, new) in changes.items():
            log.info("config changed for this resume: %s: %r -> %r", key, old, new)
        eval_return = self.eval_stats.get("eval/return_mean") if self.eval_stats else None
        met = self.stop_rules.met(self.accounts, self.wall_offset, eval_return)
        set_aside = self.stop_rules.resumed(self.accounts, self.wall_offset, eval_return, set(changes))
        if set_aside:
            log.info("already met when the run stopped, set aside for this resume (a stop rule was moved, so "
                     "training goes on): %s", ", ".join(set_aside))
        elif met:
            log.warning("already met when the run stopped: %s, so this resume stops at once; move a stop rule "
                        "to go on (e.g. --set stop.env_frames=N, stop.target_return=R, stop.wall_clock_s=S)",
                        ", ".join(met))

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
                      **(self.learner_group.metrics() if self.gorila else {}),
                      **getattr(self.learner, "metrics", dict)(),  # a parameter server's shards
                      **(self.league.metrics() if self.league is not None else {})}
        metrics = self.metrics.record(elapsed, self.accounts, self.learner.updates, self.version,
                                      learner_stats=self.learner_stats, env_stats=self.accounts.env_totals(),
                                      components=components)
        self._notify("on_metrics", metrics)
        return metrics

    def _notify(self, hook: str, *args) -> None:
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


def _saved_config(run_dir: Path) -> dict | None:
    """The run directory's config before a resume rewrites it, normalised (None when it cannot be read)."""
    try:
        return to_dict(from_dict(ExperimentConfig, migrate_legacy_keys(load_yaml(run_dir / "config.yaml"))))
    except (OSError, ConfigError):
        return None


def _check_same_inputs(saved_config: dict, cfg: ExperimentConfig) -> None:
    """A resume cannot switch observation normalisation: the saved policy was trained on the other inputs."""
    trained = bool(saved_config.get("env", {}).get("normalize", {}).get("obs", False))
    if trained != cfg.env.normalize.obs:
        raise ConfigError(f"env.normalize.obs={cfg.env.normalize.obs} but the run was trained "
                          f"{'with' if trained else 'without'} it: a policy cannot change its inputs on resume; "
                          f"resume with env.normalize.obs={trained}, or train a new run")


def _config_changes(old: dict, new: dict, prefix: str = "") -> dict[str, tuple]:
    """{dotted key: (old, new)} for every leaf that differs between two config dicts."""
    out = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and key not in ("kwargs",):
            out.update(_config_changes(a, b, f"{prefix}{key}."))
        elif a != b:
            out[f"{prefix}{key}"] = (a, b)
    return out


def probe_spaces(env, seed: int, timeout_s: float, rows: int = 1, facts: dict | None = None):
    """The env's observation and action spaces, from one env built and closed in a helper thread: an env whose
    constructor hangs ends the run with an error after `timeout_s` (runtime.supervision.startup_grace_s),
    instead of freezing it (a thread cannot be killed; it is left behind as a daemon)."""
    outcome: dict = {}

    def build():
        try:
            probe = make_vec_env(env.id, 1, seed=seed, kwargs=dict(env.kwargs), preset=env.preset,
                                 wrappers=env.wrappers, multiagent=env.multiagent)
            outcome["spaces"] = (probe.single_observation_space, probe.single_action_space)
            outcome["rows_per_game"] = getattr(probe, "k", 1)
            outcome["multiagent"] = hasattr(probe, "set_opponents")
            probe.close()
        except (UnknownEnvError, EnvError) as exc:  # already say what is wrong and what to do
            outcome["error"] = exc
        except Exception as exc:  # noqa: BLE001 - a user's env can fail in any way: say where
            outcome["error"] = EnvStartError(f"building the env {env.id!r} failed ({type(exc).__name__}: {exc}); "
                                             "check env.id and env.kwargs")
            outcome["error"].__cause__ = exc

    thread = threading.Thread(target=build, name="menger-env-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if "error" in outcome:
        raise outcome["error"]
    if "spaces" not in outcome:
        raise EnvStartTimeout(f"building the env {env.id!r} (to read its spaces) did not finish within "
                              f"{timeout_s:.0f} s (runtime.supervision.startup_grace_s); its constructor or reset "
                              "hangs: check what it waits for (a file, a server, a licence), or raise the deadline")
    if facts is not None:  # what else the probe saw: whether the env is a multi-agent one
        facts["multiagent"] = outcome["multiagent"]
    per_game = outcome["rows_per_game"]
    if per_game > 1 and rows % per_game:
        raise ConfigError(f"runtime.envs_per_actor={rows} counts the rows of learned agents, and {env.id} has "
                          f"{per_game} of them per game (env.multiagent.learn): give a multiple of {per_game}, e.g. "
                          f"{max(1, rows // per_game) * per_game}")
    return outcome["spaces"]


def _space_text(space) -> str:
    """A space in a few characters: Box(4,) float32, Discrete(2), Dict(position, mask)."""
    if isinstance(space, gym.spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    if isinstance(space, gym.spaces.Dict):
        return f"Dict({', '.join(space.spaces)})"
    return str(space)


class NetworkBuildError(ConfigError):
    """The network (Menger's or a custom `model.network`) could not be built for the env's spaces."""


class EnvStartError(RuntimeError):
    """The env could not be built for the spaces probe."""


class EnvStartTimeout(EnvStartError):
    """The env could not even be built for the spaces probe within the start-up deadline."""


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

    def silent_for(self, actor_id: int) -> float:
        return self.trainer.transport.silent_for(actor_id)

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
