"""TensorBoard through torch's ``SummaryWriter``: every metric as a scalar, the config as text, the hyperparameters
for the HParams tab.

The namespaced keys (``actor/fps``, ``learner/loss``) become TensorBoard's groups as they are. Given the run
(``start(run)``), the logger also writes:

* ``config`` (Text tab): the ``config.yaml`` the run saved, at step 0; a resume that changed keys adds the new
  config at its step, with a table of what changed;
* the hyperparameters (HParams tab): one session per run, in the sub-run ``<log_dir>/hparams`` with its metrics
  ``hparams/return_mean`` (the last ``episode/return_mean``), ``hparams/return_mean_best`` (the best of the run),
  ``hparams/eval_return_mean`` and ``hparams/eval_return_mean_best`` (where the run evaluates) and
  ``hparams/env_frames``, so ``tensorboard --logdir runs`` compares runs by their settings and returns. They are
  written every ``SUMMARY_EVERY_S`` seconds and on close.

A resumed run writes new events files into the same folders, which TensorBoard merges by step; its session is
the one the run started (the hyperparameters are not written twice) and its best return continues from what
the earlier events say.

``write_video`` puts a video file in as an animated GIF (the training's evaluation videos).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from pathlib import Path
from typing import Callable, Mapping

from menger.logging.base import RunStart

FLUSH_EVERY_S = 10
SUMMARY_EVERY_S = 30.0
SESSION_TAG = "_hparams_/session_start_info"
# metric key -> its name in the hparams sub-run, as `hparams/<name>` (final) and `hparams/<name>_best`
SUMMARY_RETURNS = {"episode/return_mean": "return_mean", "eval/return_mean": "eval_return_mean"}


class TensorBoardLogger:
    """Writes every numeric metric as a scalar at ``step`` under ``log_dir``; the config and hyperparameters
    once ``start(run)`` has told it what the run is.

    NaN and infinities are written as they are (TensorBoard shows them, and a NaN loss is worth
    seeing); values that are not numbers are skipped. ``clock`` exists so tests can drive time.
    """

    def __init__(self, log_dir: str | os.PathLike[str], *, clock: Callable[[], float] = time.monotonic) -> None:
        # Imported here so that `import menger.logging` stays cheap for runs without TensorBoard.
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self.summary_dir = self.log_dir / "hparams"
        self._fresh = not _has_events(self.log_dir)  # before this writer adds its own file
        self._writer: SummaryWriter | None = SummaryWriter(log_dir=str(self.log_dir), flush_secs=FLUSH_EVERY_S)
        self._summary_writer: SummaryWriter | None = None
        self._clock = clock
        self._best: dict[str, float] = {}
        self._pending: dict[str, float] = {}
        self._pending_step = 0
        self._summary_at: float | None = None

    def start(self, run: RunStart) -> None:
        """The config as text and, for a run that has no session yet, its hyperparameters."""
        from tensorboard.plugins.hparams import summary_v2 as hp
        from torch.utils.tensorboard import SummaryWriter

        writer = self._open()
        if self._fresh or run.changes:  # a resume that changed nothing has its config in the text already
            writer.add_text("config", config_markdown(run), global_step=run.step)
        has_session, self._best = read_summary(self.summary_dir)
        self._summary_writer = SummaryWriter(log_dir=str(self.summary_dir), flush_secs=FLUSH_EVERY_S)
        if not has_session:
            session = hp.hparams_pb(dict(run.hparams), trial_id=run.name, start_time_secs=time.time())
            self._summary_writer.file_writer.add_summary(session, global_step=run.step)
            self._summary_writer.flush()

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        writer = self._open()
        for key, value in metrics.items():
            number = _as_float(value)
            if number is not None:
                writer.add_scalar(key, number, global_step=int(step))
        if self._summary_writer is not None:
            self._note_summary(metrics, int(step))

    def write_video(self, tag: str, video_path: str | os.PathLike[str], step: int, *, max_width: int = 320,
                    max_frames: int = 300) -> None:
        """A video file as an animated GIF in TensorBoard's Images tab (what ``add_video`` writes, without
        moviepy, whose 2.x releases ``add_video`` cannot use): shrunk by a whole factor to at most ``max_width``
        pixels wide, every k-th frame kept for at most ``max_frames``, played at the file's speed."""
        import io

        from tensorboard.compat.proto.summary_pb2 import Summary

        from menger.extras import require

        imageio = require("imageio.v2", "video", "a video in TensorBoard")
        Image = require("PIL.Image", "video", "a video in TensorBoard")  # Pillow comes with imageio

        if self._writer is None:
            raise ValueError(f"TensorBoardLogger for {self.log_dir} is closed; create a new one to keep writing.")
        with imageio.get_reader(video_path) as reader:
            fps = float(reader.get_meta_data().get("fps") or 30.0)
            every = max(1, -(-reader.count_frames() // max_frames))
            frames = [frame for index, frame in enumerate(reader) if index % every == 0]
        stride = max(1, -(-frames[0].shape[1] // max_width))
        images = [Image.fromarray(frame[::stride, ::stride, :3]) for frame in frames]
        gif = io.BytesIO()
        images[0].save(gif, format="GIF", save_all=True, append_images=images[1:], duration=1000.0 * every / fps,
                       loop=0)
        image = Summary.Image(height=images[0].height, width=images[0].width, colorspace=3,
                              encoded_image_string=gif.getvalue())
        self._writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), int(step))

    def close(self) -> None:
        if self._summary_writer is not None:
            self._write_summary()
            self._summary_writer.close()
            self._summary_writer = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _open(self):
        if self._writer is None:
            raise ValueError(f"TensorBoardLogger for {self.log_dir} is closed; create a new one to keep writing.")
        return self._writer

    def _note_summary(self, metrics: Mapping[str, float], step: int) -> None:
        for key, name in SUMMARY_RETURNS.items():
            number = _as_float(metrics.get(key))
            if number is None or not math.isfinite(number):
                continue
            self._pending[f"hparams/{name}"] = number
            if number > self._best.get(name, -math.inf):
                self._best[name] = number
                self._pending[f"hparams/{name}_best"] = number
        self._pending["hparams/env_frames"] = float(step)
        self._pending_step = step
        now = self._clock()
        if self._summary_at is None or now - self._summary_at >= SUMMARY_EVERY_S:
            self._write_summary()
            self._summary_at = now

    def _write_summary(self) -> None:
        for tag, value in self._pending.items():
            self._summary_writer.add_scalar(tag, value, global_step=self._pending_step)
        self._pending = {}

    def __enter__(self) -> "TensorBoardLogger":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def config_markdown(run: RunStart) -> str:
    """The Text tab's ``config``: the saved config.yaml as a YAML block, after what a resume changed."""
    lines = [f"**{run.name}**: `config.yaml` as the run saved it ({run.run_dir})"]
    if run.resumed:
        lines = [f"**{run.name}** resumed at {run.step:,} env frames"]
        if run.changes:
            lines += ["", "| key | before | now |", "| --- | --- | --- |"]
            lines += [f"| `{key}` | `{old!r}` | `{new!r}` |" for key, (old, new) in sorted(run.changes.items())]
    return "\n".join([*lines, "", "```yaml", run.config_text.rstrip(), "```"])


def read_summary(summary_dir: Path) -> tuple[bool, dict[str, float]]:
    """Whether ``summary_dir`` holds a session already, and the best returns its events recorded. Events that
    cannot be read count as a session with no best (a warning says so): the session is never written twice,
    and the scalars of the run go on either way."""
    if not _has_events(summary_dir):
        return False, {}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        events = EventAccumulator(str(summary_dir), size_guidance={"scalars": 0, "tensors": 0})
        events.Reload()
        tags = events.Tags()
    except Exception as error:  # noqa: BLE001 - a damaged events file must not cost the run its TensorBoard
        warnings.warn(f"could not read the HParams summary in {summary_dir} ({error!r}); its best returns start "
                      "again from this resume", RuntimeWarning, stacklevel=3)
        return True, {}
    best = {}
    for name in SUMMARY_RETURNS.values():
        tag = f"hparams/{name}_best"
        if tag in tags["scalars"]:
            best[name] = max(scalar.value for scalar in events.Scalars(tag))
    return SESSION_TAG in tags["tensors"], best


def _has_events(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("events.out.tfevents.*"))


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
