"""TensorBoard scalars through torch's ``SummaryWriter``: one ``add_scalar`` per metric key.

The namespaced keys (``actor/fps``, ``learner/loss``) become TensorBoard's groups as they are. A
resumed run writes a new events file into the same folder, which TensorBoard merges by step.
``write_video`` puts a video file in as an animated GIF (the training's evaluation videos).
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

    def write_video(self, tag: str, video_path: str | os.PathLike[str], step: int, *, max_width: int = 320,
                    max_frames: int = 300) -> None:
        """A video file as an animated GIF in TensorBoard's Images tab (what ``add_video`` writes, without
        moviepy, whose 2.x releases ``add_video`` cannot use): shrunk by a whole factor to at most ``max_width``
        pixels wide, every k-th frame kept for at most ``max_frames``, played at the file's speed."""
        import io

        import imageio.v2 as imageio
        from PIL import Image
        from tensorboard.compat.proto.summary_pb2 import Summary

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
