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
    """Hands every metrics record to a logger (`write(metrics, step)`): JSONL, TensorBoard, the progress display."""

    def __init__(self, logger):
        self.logger = logger

    def on_metrics(self, trainer, metrics: dict) -> None:
        self.logger.write(metrics, step=int(metrics["time/env_frames"]))
