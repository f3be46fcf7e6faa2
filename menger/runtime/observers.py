"""Observers: the trainer's public hooks, for loggers, the chip checkpoint watcher and tests.

The trainer calls each observer at these points of its loop (`Trainer.run`)::

    on_start(trainer)                       # actors started, the first parameters published
    on_episode_end(trainer, episode)        # each episode that ended in a received unroll (`Episode`), before
                                            # on_unroll of that unroll
    on_unroll(trainer, meta, verdict)       # every unroll tag, with the coordinator's verdict
    on_batch(trainer, batch)                # a batch about to be learned from (menger.core.Batch)
    on_update(trainer, stats)               # after the optimizer step and the publish of the new version
    on_checkpoint(trainer, step, path)      # a checkpoint is complete on disk
    on_metrics(trainer, metrics)            # every log interval, and once as the run ends
    on_stop(trainer, reason)                # the loop ended: target_return, env_frames, wall_clock, requested

Subclass `Observer` and override what you need; the others do nothing. Hooks run in the trainer's thread, so
keep them short (hand long work to a thread of your own, as the chip watcher does). For example, the successes
of each actor's envs, from an env that reports `is_success` (with `env.info_keys: [is_success]`)::

    class Successes(Observer):
        def __init__(self):
            self.by_env = collections.Counter()

        def on_episode_end(self, trainer, episode):
            if episode.info.get("is_success"):
                self.by_env[episode.actor_id, episode.env_index] += 1

    menger.api.train("cartpole-ppo", ["env.id=mypkg.envs:Reach", "env.info_keys=[is_success]"],
                     observers=[Successes()])
"""
from __future__ import annotations

import functools
import logging
import signal
import threading
from dataclasses import dataclass, field

from menger.config import to_dict
from menger.experiment import hyperparameters
from menger.logging import RunStart

log = logging.getLogger("menger.trainer")


@dataclass(frozen=True)
class Episode:
    """One episode that ended in an actor's env, as `Observer.on_episode_end` receives it.

    `actor_id`, `incarnation` and `env_index` (the row of the actor's vector env) say where it ran;
    `episode_return` and `length` are its undiscounted return and its steps; `info` holds the `env.info_keys` its
    last info reported (numbers and bools as floats; a key it did not report is absent, and empty when no keys
    are asked). Episodes a fault ended (an env rebuilt, a non-finite value dropped) are not episodes: they are
    counted in `episode/faulty` only."""

    actor_id: int
    incarnation: int
    env_index: int
    episode_return: float
    length: int
    info: dict[str, float] = field(default_factory=dict)


def episodes_of(meta) -> list[Episode]:
    """The episodes that ended in an unroll (`menger.core.UnrollMeta`)."""
    envs = meta.episode_envs or (-1,) * len(meta.episode_returns)  # -1: a tag that did not say (older actors)
    infos = meta.episode_infos or ((),) * len(meta.episode_returns)
    return [Episode(meta.actor_id, meta.incarnation, int(env), float(ret), int(length), dict(info))
            for ret, length, env, info in zip(meta.episode_returns, meta.episode_lengths, envs, infos)]


class Observer:
    def on_start(self, trainer) -> None:
        pass

    def on_episode_end(self, trainer, episode: Episode) -> None:
        pass

    def on_unroll(self, trainer, meta, verdict) -> None:
        pass

    def on_batch(self, trainer, batch) -> None:
        pass

    def on_update(self, trainer, stats: dict) -> None:
        pass

    def on_checkpoint(self, trainer, step: int, path) -> None:
        pass

    def on_metrics(self, trainer, metrics: dict) -> None:
        pass

    def on_stop(self, trainer, reason: str) -> None:
        pass


class MetricsWriter(Observer):
    """Hands every metrics record to a logger (`write(metrics, step)`): JSONL, TensorBoard, the progress display;
    and what the run is (`menger.logging.RunStart`) to a logger that defines `start(run)`, as the run starts."""

    def __init__(self, logger):
        self.logger = logger

    def on_start(self, trainer) -> None:
        if hasattr(self.logger, "start"):
            self.logger.start(run_start(trainer))

    def on_metrics(self, trainer, metrics: dict) -> None:
        self.logger.write(metrics, step=int(metrics["time/env_frames"]))


def run_start(trainer) -> RunStart:
    """What the trainer's run is: its saved config, its hyperparameters, where it resumes and what that changed."""
    cfg = trainer.cfg
    return RunStart(name=trainer.run_dir.name, run_dir=trainer.run_dir, config=to_dict(cfg),
                    config_text=(trainer.run_dir / "config.yaml").read_text(encoding="utf-8"),
                    hparams=hyperparameters(cfg), step=int(trainer.accounts.accepted), resumed=trainer.resume,
                    changes=dict(trainer.config_changes))


class StopOnSignals(Observer):
    """SIGTERM and SIGHUP stop a run the way a time limit does: the loop ends at its next turn, writes its closing
    checkpoint and shuts down, so `menger resume` continues from there. docker, systemd, Kubernetes and Slurm stop
    jobs with SIGTERM; a closed terminal sends SIGHUP. A second signal interrupts at once (KeyboardInterrupt, as
    Ctrl-C: the trainer still tries to write a checkpoint). `received` is the first signal's number, or None.

    Signal handlers belong to the main thread: in any other thread this observer does nothing.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)):
        self.signals, self.received = signals, None
        self._previous: dict[int, object] = {}

    def on_start(self, trainer) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, functools.partial(self._handle, trainer))

    def watch(self, stop) -> None:
        """Install the handlers for a run whose trainers are not in the main thread (a league's learners): a
        signal calls `stop()` (from the main thread, which must call this)."""
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, functools.partial(self._handle, _Stopper(stop)))

    def _handle(self, trainer, signum: int, frame) -> None:
        if self.received is not None:
            raise KeyboardInterrupt(f"a second {signal.Signals(signum).name}")
        self.received = signum
        log.warning("%s received: stopping after the current step, with a checkpoint (send it again to "
                    "interrupt at once)", signal.Signals(signum).name)
        trainer.request_stop()

    def restore(self) -> None:
        """Put back the handlers that were there before the run."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}


class _Stopper:
    """What `StopOnSignals.watch` hands its handler in place of a trainer."""

    def __init__(self, stop):
        self.request_stop = stop
