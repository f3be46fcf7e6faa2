"""TensorBoard scalars through torch's ``SummaryWriter``: one ``add_scalar`` per metric key.

The namespaced keys (``actor/fps``, ``learner/loss``) become TensorBoard's groups as they are. A
resumed run writes a new events file into the same folder, which TensorBoard merges by step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

FLUSH_EVERY_S = 10


class TensorBoardLogger:
    """Writes every numeric metric as a scalar at ``step`` under ``log_dir``.

    NaN and infinities are written as they are (TensorBoard shows them, and a NaN loss is worth
    seeing); values that are not numbers are skipped.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        # Imported here so that `import menger.logging` stays cheap for runs without TensorBoard.
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._writer: SummaryWriter | None = SummaryWriter(log_dir=str(self.log_dir), flush_secs=FLUSH_EVERY_S)

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        if self._writer is None:
            raise ValueError(f"TensorBoardLogger for {self.log_dir} is closed; create a new one to keep writing.")
        for key, value in metrics.items():
            number = _as_float(value)
            if number is not None:
                self._writer.add_scalar(key, number, global_step=int(step))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> "TensorBoardLogger":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
