"""Weights & Biases, behind the one logger protocol: `pip install "menger-rl[wandb]"`, then
`menger train cartpole-ppo --set log.wandb.project=my-project` (off unless `log.wandb.project` is set).

``start(run)`` opens the W&B run (``wandb.init``) with the run's whole config, named after the run directory
and writing W&B's own files there (``RUN_DIR/wandb``); ``write`` logs each metrics record at
``step = time/env_frames``, the x axis of every other backend; ``close`` finishes the W&B run. A resumed Menger
run continues the same W&B run: its id is kept in ``RUN_DIR/wandb_run_id``. W&B takes no step lower than one it
has seen, so the records between a resume's checkpoint and the point where the run had stopped are left out
there (metrics.jsonl and TensorBoard keep both) rather than sent to be refused one warning at a time. Online mode needs `wandb login` (or WANDB_API_KEY) first,
as W&B asks for it otherwise; offline mode needs neither. A W&B run that cannot open warns and is left out, and
training goes on (`MultiLogger`).
"""

from __future__ import annotations

import numbers
import secrets
from typing import Mapping, Sequence

from menger.config import ConfigError
from menger.extras import MissingExtraError, require
from menger.logging.base import RunStart

RUN_ID_FILE = "wandb_run_id"


def import_wandb():
    """The `wandb` module, or a ConfigError that says how to install it (before anything starts)."""
    try:
        return require("wandb", "wandb", "log.wandb.project (logging to Weights & Biases)",
                       instead="unset log.wandb.project")
    except MissingExtraError as exc:  # a config key asked for it: a config error (exit code 2), before anything runs
        raise ConfigError(str(exc)) from exc


class WandbLogger:
    """Metrics to one Weights & Biases run (`mode` online: streamed; offline: written to RUN_DIR/wandb for
    `wandb sync`). Constructing it only imports wandb; the W&B run opens in `start(run)`."""

    def __init__(self, project: str, *, entity: str | None = None, mode: str = "online", group: str | None = None,
                 tags: Sequence[str] = ()) -> None:
        self._wandb = import_wandb()
        self.project, self.entity, self.mode, self.group, self.tags = project, entity, mode, group, tuple(tags)
        self._run = None
        self._first_step = 0  # W&B's step counter when the run opened: a resumed W&B run refuses lower ones
        self.log_dir = None

    def start(self, run: RunStart) -> None:
        id_file = run.run_dir / RUN_ID_FILE
        run_id = id_file.read_text(encoding="utf-8").strip() if id_file.exists() else ""
        if not run_id:
            run_id = secrets.token_hex(8)  # W&B ids: letters and digits, unique in the project
            id_file.write_text(run_id + "\n", encoding="utf-8")
        self.log_dir = run.run_dir / "wandb"
        self._run = self._wandb.init(project=self.project, entity=self.entity, mode=self.mode, group=self.group,
                                     tags=list(self.tags) or None, name=run.name, id=run_id, resume="allow",
                                     dir=str(run.run_dir), config=dict(run.config))
        self._first_step = int(getattr(self._run, "step", 0) or 0)

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        if self._run is None:
            raise ValueError("WandbLogger.write before start(run) (or after close): the W&B run is not open")
        if step < self._first_step:
            return
        record = {key: value for key, value in metrics.items() if _is_number(value)}
        self._run.log(record, step=int(step))

    def close(self) -> None:
        if self._run is not None:
            run, self._run = self._run, None
            run.finish()

    def __enter__(self) -> "WandbLogger":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_number(value: object) -> bool:
    """A metric W&B charts: any real number (NaN and infinities too, as TensorBoard shows them), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
