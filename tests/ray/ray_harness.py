"""Helpers for the ray launcher's tests: small configs, a trainer in a thread, waits with deadlines."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from menger.experiment import ExperimentConfig, load_experiment
from menger.launch import make_launcher
from menger.runtime import Trainer, TrainResult

SMALL_RAY_RUN = (
    "runtime.launcher=ray",
    "runtime.ray.actor_cpus=0.5",
    "runtime.envs_per_actor=4",
    "runtime.unroll_length=32",
    "runtime.learner.threads=1",
    "runtime.learner.device=cpu",
    "runtime.supervision.startup_grace_s=60",
    "log.tensorboard=false",
    "log.progress=false",
    "log.interval_s=0.2",
    "checkpoint.interval_s=0",
)


def ray_config(*overrides: str, preset: str = "cartpole-ppo") -> ExperimentConfig:
    return load_experiment(preset, [*SMALL_RAY_RUN, *overrides])


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


class TrainerInThread:
    """`Trainer.run` on the ray launcher in a thread, so a test can watch it and break things under it."""

    def __init__(self, config: ExperimentConfig, run_dir: Path):
        self.trainer = Trainer(config, run_dir, launcher=make_launcher(config.runtime))
        self.result: TrainResult | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self.trainer.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised by join
            self.error = exc

    def updates(self) -> int:
        learner = getattr(self.trainer, "learner", None)
        return learner.updates if learner is not None else 0

    def join(self, timeout_s: float) -> TrainResult:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"the run did not finish within {timeout_s:.0f} s")
        if self.error is not None:
            raise self.error
        return self.result
