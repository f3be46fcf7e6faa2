"""The one logger protocol, and the fan-out that keeps a broken logger from stopping training.

Every metric is a float under a namespaced key (``actor/fps``, ``learner/loss``, ``episode/return_mean``,
``transport/frames_dropped/<reason>``...). The runtime builds one flat dict every half second or so and
hands it to a single logger; the step is ``time/env_frames``, the frames the learner accepted, so every
backend (terminal, JSONL, TensorBoard) shares one x axis and a resumed run continues it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Union, runtime_checkable

HParam = Union[bool, int, float, str]


@dataclass(frozen=True)
class RunStart:
    """What a run is, handed once to each logger that defines ``start(run)``, when training starts or resumes.

    ``config``: the effective config as plain nested data; ``config_text``: the ``config.yaml`` the run saved;
    ``hparams``: the hyperparameters as flat dotted keys with scalar values (``ppo.lr``, ``runtime.actors``);
    ``step``: env frames so far (0, or the checkpoint's on a resume); ``changes``: on a resume, dotted key ->
    (old value, new value) for each key the resume changed.
    """

    name: str
    run_dir: Path
    config: Mapping[str, object]
    config_text: str
    hparams: Mapping[str, HParam]
    step: int = 0
    resumed: bool = False
    changes: Mapping[str, tuple] = field(default_factory=dict)


@runtime_checkable
class Logger(Protocol):
    """Receives one flat dict of namespaced metrics per reporting tick.

    The loop that drives it::

        logger = MultiLogger(JsonlLogger(run_dir / "metrics.jsonl"),
                             TensorBoardLogger(run_dir / "tensorboard"),
                             TerminalProgress("cartpole-ppo", target_return=475.0))
        while not stop_condition(metrics):
            metrics = runtime.collect_metrics()          # every ~0.5-1 s
            logger.write(metrics, step=int(metrics["time/env_frames"]))
        logger.close()

    ``write`` must not keep a reference to ``metrics`` that it later relies on (the caller may reuse
    the dict); ``close`` releases files and displays and may be called more than once.

    A logger may also define ``start(run: RunStart)``, called once before the first write with what the run
    is (its config, its hyperparameters, whether it resumes): TensorBoard writes the config as text and the
    hyperparameters for its HParams tab, Weights & Biases opens its run there.
    """

    def write(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class MultiLogger:
    """Fans each write out to several loggers; a failing one is reported once and then left out.

    Logging is never worth a training run: a TensorBoard writer that hits a full disk, or a terminal
    that went away, raises once, gets a warning naming it and the error, and is disabled while the
    others carry on.
    """

    def __init__(self, *loggers: Logger) -> None:
        self._active: list[Logger] = list(loggers)
        self._disabled: list[Logger] = []

    @property
    def active(self) -> tuple[Logger, ...]:
        """The loggers still receiving writes (failed ones have been removed)."""
        return tuple(self._active)

    def start(self, run: RunStart) -> None:
        """Hand `run` to the loggers that define `start`; one that fails is disabled as in `write`."""
        for logger in list(self._active):
            if hasattr(logger, "start"):
                try:
                    logger.start(run)
                except Exception as error:  # noqa: BLE001 - any logger failure must be contained
                    self._disable(logger, error)

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        for logger in list(self._active):
            try:
                logger.write(metrics, step)
            except Exception as error:  # noqa: BLE001 - any logger failure must be contained
                self._disable(logger, error)

    def close(self) -> None:
        for logger in self._active:
            try:
                logger.close()
            except Exception as error:  # noqa: BLE001
                warnings.warn(
                    f"{_describe(logger)} failed while closing: {error!r}; its last writes may be lost.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        for logger in self._disabled:
            try:
                logger.close()
            except Exception:  # noqa: BLE001 - already reported when it was disabled
                continue
        self._disabled.extend(self._active)
        self._active.clear()

    def _disable(self, logger: Logger, error: Exception) -> None:
        self._active.remove(logger)
        self._disabled.append(logger)
        warnings.warn(
            f"{_describe(logger)} failed and is disabled for the rest of this run "
            f"(training continues; other loggers still write): {error!r}",
            RuntimeWarning,
            stacklevel=3,
        )

    def __enter__(self) -> "MultiLogger":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _describe(logger: object) -> str:
    target = getattr(logger, "path", None) or getattr(logger, "log_dir", None)
    name = type(logger).__name__
    return f"{name} ({target})" if target else name
