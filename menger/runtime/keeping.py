"""Which checkpoints outlive `checkpoint.keep_last`: the best by deterministic evaluation, and one every N frames.

The trainer asks after each evaluation and before each save::

    keeping = CheckpointKeeping(cfg.checkpoint, manager.best(), frames)   # a resume keeps the saved best's return
    if keeping.beaten_by(stats):                       # after an evaluation: a higher eval/return_mean than the best
        record = keeping.record(stats, digest, step=updates, frames=frames, version=version)
        ...save the state just evaluated (pinned=keeping.pin_due(frames)), then manager.mark_best(step, record)
        keeping.kept_best(record)
    elif keeping.pin_due(frames) or ...:               # a checkpoint every keep_every_frames frames
        ...save with pinned=True, then keeping.pinned(frames)

The best's record (in `BEST.json` and in its checkpoint's `meta.json`, key `evaluation`) says which evaluation it
was and holds `params_sha256`, the digest of the parameters the evaluator played (`params_digest`): the saved
model hashes to the same value.
"""
from __future__ import annotations

import hashlib
import math

import torch

__all__ = ["CheckpointKeeping", "params_digest"]


def params_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict's names, dtypes, shapes and bytes (the same on any device)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class CheckpointKeeping:
    """The best-so-far evaluation return and the next frame count a checkpoint is kept at."""

    def __init__(self, config, best: dict | None, frames: int):
        """`config`: the run's `checkpoint` section; `best`: what `BEST.json` records (None: no best yet), so a
        resume never keeps a worse one; `frames`: the env frames the run is at."""
        self.keep_best = config.keep_best
        self.every = config.keep_every_frames
        self.best_return = float(best["return_mean"]) if best and "return_mean" in best else None
        self.next_frames = (frames // self.every + 1) * self.every if self.every else None

    def beaten_by(self, stats: dict) -> bool:
        """Whether an evaluation's eval/return_mean is the new best (one where no episode finished never is)."""
        value = stats.get("eval/return_mean")
        if not self.keep_best or value is None or math.isnan(value):
            return False
        return self.best_return is None or value > self.best_return

    @staticmethod
    def record(stats: dict, digest: str, *, step: int, frames: int, version: int) -> dict:
        """What the best checkpoint records of the evaluation that made it the best."""
        return {"return_mean": float(stats["eval/return_mean"]), "return_std": float(stats["eval/return_std"]),
                "episodes": int(stats["eval/episodes"]), "evaluation": int(stats["eval/count"]), "step": step,
                "frames": frames, "version": version, "params_sha256": digest}

    def kept_best(self, record: dict) -> None:
        self.best_return = record["return_mean"]

    def pin_due(self, frames: int) -> bool:
        """Whether a checkpoint saved now is kept for good: the first at or past a multiple of keep_every_frames."""
        return self.next_frames is not None and frames >= self.next_frames

    def pinned(self, frames: int) -> None:
        self.next_frames = (frames // self.every + 1) * self.every
