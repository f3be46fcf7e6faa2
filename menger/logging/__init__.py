"""One logger protocol with namespaced keys, and its backends: terminal, JSONL, TensorBoard, Weights & Biases.

The runtime writes one flat dict of floats per reporting tick (``time/env_frames``, ``actor/fps``,
``learner/loss``, ``episode/return_mean``, ``transport/frames_dropped/<reason>``, ...) with
``step = time/env_frames`` to a ``MultiLogger`` that fans it out. See ``Logger`` for the loop.
"""

from menger.logging.base import Logger, MultiLogger, RunStart
from menger.logging.console import LogLines, print_summary, summary_rows, summary_table
from menger.logging.jsonl import JsonlLogger, read_jsonl
from menger.logging.progress import TerminalProgress
from menger.logging.tensorboard import TensorBoardLogger

__all__ = [
    "JsonlLogger",
    "LogLines",
    "Logger",
    "MultiLogger",
    "RunStart",
    "TensorBoardLogger",
    "TerminalProgress",
    "print_summary",
    "read_jsonl",
    "summary_rows",
    "summary_table",
]
