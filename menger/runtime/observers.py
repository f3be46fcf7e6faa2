"""Observers: the trainer's public hooks, for loggers, the chip checkpoint watcher and tests.

The trainer calls each observer at these points of its loop (`Trainer.run`)::

    on_start(trainer)                       # actors started, the first parameters published
    on_unroll(trainer, meta, verdict)       # every unroll tag, with the coordinator's verdict
    on_batch(trainer, batch)                # a batch about to be learned from (menger.core.Batch)
    on_update(trainer, stats)               # after the optimizer step and the publish of the new version
    on_checkpoint(trainer, step, path)      # a checkpoint is complete on disk
    on_metrics(trainer, metrics)            # every log interval, and once as the run ends
    on_stop(trainer, reason)                # the loop ended: target_return, env_frames, wall_clock, requested

Subclass `Observer` and override what you need; the others do nothing. Hooks run in the trainer's thread, so
keep them short (hand long work to a thread of your own, as the chip watcher does).
"""
from __future__ import annotations

import functools
import logging
import signal
import threading

from menger.config import to_dict
from menger.experiment import hyperparameters
from menger.logging import RunStart

log = logging.getLogger("menger.trainer")


class Observer:
    def on_start(self, trainer) -> None:
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
