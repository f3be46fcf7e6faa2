"""Video files from rgb frames, written as they come (an episode is never held in memory whole).

    with VideoWriter(path, fps=50) as video:      # the format follows the suffix: .mp4 (default) or .gif
        for frame in frames:                      # [H, W, 3] uint8 (grey [H, W] and RGBA are converted)
            video.append(frame)

MP4 is H.264 through imageio's ffmpeg plugin (``imageio-ffmpeg`` ships its own ffmpeg binary, so nothing
else is installed). Frames keep their size: a frame with an odd height or width (H.264 needs even ones) gets
one black row or column, never a rescale. GIF goes through Pillow. Both come with the ``video`` extra:
``require_video`` says, before anything is played, when it is missing.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from menger.extras import require

VIDEO_FORMATS = ("mp4", "gif")


def require_video(purpose: str, video_format: str = "mp4", instead: str | None = None):
    """imageio (and its ffmpeg plugin for MP4), or MissingExtraError naming the ``video`` extra and ``purpose``."""
    imageio = require("imageio.v2", "video", purpose, instead)
    if video_format == "mp4":
        require("imageio_ffmpeg", "video", purpose, instead)
    return imageio


class VideoWriter:
    def __init__(self, path: str | Path, fps: float, video_format: str | None = None):
        self.path = Path(path)
        self.format = (video_format or self.path.suffix.lstrip(".") or "mp4").lower()
        if self.format not in VIDEO_FORMATS:
            raise ValueError(f"video format {self.format!r} is not one of {VIDEO_FORMATS}; name the file *.mp4 or "
                             "*.gif, or pass video_format")
        if not fps > 0:
            raise ValueError(f"fps must be positive, got {fps!r}")
        self.fps, self.frames, self.shape = float(fps), 0, None
        self._writer = None

    def append(self, frame) -> None:
        image = _rgb(frame)
        if self.shape is None:
            self.shape = image.shape
            self._writer = self._open()
        elif image.shape != self.shape:
            raise ValueError(f"frame {self.frames} of {self.path} is {image.shape[1]}x{image.shape[0]}, the first was "
                             f"{self.shape[1]}x{self.shape[0]}: a video's frames must all have one size")
        self._writer.append_data(_even(image) if self.format == "mp4" else image)
        self.frames += 1

    def close(self) -> Path:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.path

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, exc_type, *exc_info) -> None:
        self.close()
        if exc_type is not None:
            self.path.unlink(missing_ok=True)  # no half-written video left behind

    def _open(self):
        imageio = require_video(f"writing the video {self.path}", self.format)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.format == "gif":
            return imageio.get_writer(self.path, format="GIF", mode="I", duration=1000.0 / self.fps, loop=0)
        return imageio.get_writer(self.path, format="FFMPEG", mode="I", fps=self.fps, codec="libx264",
                                  pixelformat="yuv420p", quality=8, macro_block_size=1, ffmpeg_log_level="error",
                                  output_params=["-f", "mp4"])  # whatever the file is called


def _rgb(frame) -> np.ndarray:
    image = np.asarray(frame)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"a video frame is [H, W, 3] (or [H, W] grey, [H, W, 4] RGBA); got shape {image.shape}")
    if image.dtype != np.uint8:
        image = np.clip(image, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(image[:, :, :3])


def _even(image: np.ndarray) -> np.ndarray:
    height, width = image.shape[:2]
    if height % 2 == 0 and width % 2 == 0:
        return image
    return np.pad(image, ((0, height % 2), (0, width % 2), (0, 0)))
