"""Deterministic evaluation during training, on the evaluator's own envs (Ape-X's actors explore with their own
epsilon, SAC's sample their actions, so training returns say little about the policy).

Every `eval.interval_s` seconds of training (or every `eval.interval_frames` env frames), after an update, the
trainer calls::

    stats = evaluator.run(learner.policy)   # eval/return_mean, eval/return_std, eval/episodes, eval/time_s, ...

which copies the learner's parameters into the evaluator's CPU network and plays `eval.episodes` episodes at
once, one per env, with the greedy (apex, r2d2: its recurrent state carried through the episode) or mean (sac)
action, from the same seeds each time. Training waits
meanwhile (the actors fill their chunks; the rate limiter bounds how far they get). `eval/time_s` adds up the
seconds spent evaluating, so that a benchmark can leave them out of the training time.

Every `eval.video_interval_s` seconds (off by default), `VideoRecorder` copies the parameters the same way and
plays one deterministic episode on its own rendering env in a background thread, so training goes on; the
video is RUN_DIR/videos/eval-<frames>.mp4 (`record_video`, which `menger eval --video` uses too), and with
log.tensorboard an animated GIF under `eval/video` in TensorBoard's Images tab.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from menger.envs import make_vec_env
from menger.envs.render import RenderEnv, make_render_env, record_episode
from menger.logging.tensorboard import TensorBoardLogger
from menger.logging.video import VideoWriter, require_video
from menger.models import build_policy, obs_to_tensors

log = logging.getLogger("menger.evaluation")


class Evaluator:
    def __init__(self, config, obs_space, action_space):
        self.cfg = config.eval
        self.interval_s = config.eval_interval_s
        self.envs = make_eval_envs(config)
        with torch.random.fork_rng(devices=[]):  # building it must not move the run's random stream
            self.network = build_policy(obs_space, action_space, config.model, config.algo,
                                         config.env.normalize).eval()
        self.next_at = self.interval_s
        self.next_frames = self.cfg.interval_frames or 0  # eval.interval_frames set: the schedule is by frames
        self.count, self.time_s, self.best = 0, 0.0, -np.inf
        self.last: dict = {}

    def due(self, elapsed_s: float, frames: int = 0) -> bool:
        if self.cfg.interval_frames:
            return frames >= self.next_frames
        return elapsed_s >= self.next_at

    @torch.no_grad()
    def run(self, policy, elapsed_s: float | None = None, frames: int | None = None) -> dict:
        """Play one episode per env with the deterministic action of `policy`'s current parameters."""
        started = time.monotonic()
        self.network.load_state_dict({k: v.detach().cpu() for k, v in policy.state_dict().items()})
        returns, lengths, finished = play_deterministic(self.network, self.envs, self.cfg.seed, self.cfg.max_steps)
        self.count += 1
        self.time_s += time.monotonic() - started
        self.next_at = (elapsed_s if elapsed_s is not None else self.next_at) + self.interval_s
        every = self.cfg.interval_frames
        if every and frames is not None:  # the next multiple of the interval: an even grid of frames
            self.next_frames = (frames // every + 1) * every
        done = returns[finished]
        mean = float(done.mean()) if len(done) else float("nan")
        self.best = max(self.best, mean) if len(done) else self.best
        self.last = {"eval/return_mean": mean, "eval/return_std": float(done.std()) if len(done) else float("nan"),
                     "eval/length_mean": float(lengths[finished].mean()) if len(done) else float("nan"),
                     "eval/episodes": int(finished.sum()), "eval/count": self.count, "eval/time_s": self.time_s,
                     "eval/return_best": float(self.best)}
        return self.last

    def state(self) -> dict:
        return {"count": self.count, "time_s": self.time_s, "best": float(self.best), "next_at": self.next_at,
                "next_frames": self.next_frames, "last": dict(self.last)}

    def load_state(self, state: dict) -> None:
        self.count, self.time_s = int(state["count"]), float(state["time_s"])
        self.best, self.next_at = float(state["best"]), float(state["next_at"])
        self.next_frames = int(state.get("next_frames", self.next_frames))  # checkpoints before interval_frames
        self.last = dict(state["last"])

    def close(self) -> None:
        self.envs.close()


def make_eval_envs(config):
    """The evaluator's envs: one per episode, seeded from eval.seed (`menger eval --like-training` builds the same)."""
    return make_vec_env(config.env.id, config.eval.episodes, seed=config.eval.seed, kwargs=dict(config.env.kwargs),
                        preset=config.env.preset, wrappers=config.env.wrappers, multiagent=config.env.multiagent)


@torch.no_grad()
def play_deterministic(network, envs, seed: int, max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One episode per env with `network`'s deterministic action, from envs reset with `seed`: the returns, the
    lengths and which episodes finished within `max_steps` (the evaluator's episodes, the same every time)."""
    n = envs.num_envs
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    finished = np.zeros(n, bool)
    obs = envs.reset(seed=seed)
    state = network.initial_state(n) if network.lstm_size else None  # r2d2: carried through each episode
    for _ in range(max_steps):
        out = network.act(obs_to_tensors(obs), state, deterministic=True)
        state = out.state if state is not None else None
        result = envs.step(network.codec.to_env(out.action.numpy()))
        running = ~finished & result.valid
        returns += np.where(running, result.reward, 0.0)
        lengths += running
        finished |= (result.terminated | result.truncated) & ~finished
        if finished.all():
            break
        obs = result.obs
    return returns, lengths, finished


@dataclass(frozen=True)
class VideoRecord:
    path: Path
    frames: int
    fps: float
    width: int
    height: int
    episode_return: float
    length: int

    def describe(self) -> str:
        return (f"{self.path} ({self.width}x{self.height}, {self.frames} frames at {self.fps:g} fps; episode return "
                f"{self.episode_return:g} in {self.length} steps)")


def record_video(env: RenderEnv, act, path: str | Path, *, seed: int, max_steps: int,
                 video_format: str | None = None) -> VideoRecord:
    """One episode of `act(obs) -> actions` on a rendering env, written to `path` (.mp4 or .gif) as it plays."""
    with VideoWriter(path, env.fps, video_format) as video:
        episode = record_episode(env, act, video, seed=seed, max_steps=max_steps)
    height, width = video.shape[:2]
    return VideoRecord(video.path, video.frames, video.fps, width, height, episode.episode_return, episode.length)


class VideoRecorder:
    """Videos of deterministic episodes during training; the trainer's loop drives it::

        if recorder.due(elapsed_s):
            recorder.start(learner.policy, env_frames, elapsed_s)   # copies the parameters, returns at once
        ...
        recorder.close()                                           # waits for the video being written

    One video at a time: one that falls due while the last is still being written is skipped (counted).
    """

    def __init__(self, config, obs_space, action_space, run_dir: str | Path, join_timeout_s: float = 120.0):
        self.cfg = config.eval
        self.interval_s = self.cfg.video_interval_s
        self.video_dir = Path(run_dir) / "videos"
        self.tensorboard_dir = Path(run_dir) / "tb" if config.log.tensorboard else None
        self._tensorboard: TensorBoardLogger | None = None  # its own events file, opened at the first video
        self.join_timeout_s = join_timeout_s
        require_video("eval.video_interval_s", instead="set eval.video_interval_s=0")
        self.env = make_render_env(config.env.id, seed=self.cfg.seed, kwargs=dict(config.env.kwargs),
                                   preset=config.env.preset, wrappers=config.env.wrappers,
                                   instead="set eval.video_interval_s=0")
        with torch.random.fork_rng(devices=[]):  # building it must not move the run's random stream
            self.network = build_policy(obs_space, action_space, config.model, config.algo).eval()
        self.next_at = self.interval_s
        self.count, self.skipped, self.failed = 0, 0, 0
        self.last: VideoRecord | None = None
        self._thread: threading.Thread | None = None

    def due(self, elapsed_s: float) -> bool:
        return elapsed_s >= self.next_at

    def start(self, policy, env_frames: int, elapsed_s: float) -> None:
        self.next_at = elapsed_s + self.interval_s
        if self._thread is not None and self._thread.is_alive():
            self.skipped += 1
            return
        self.network.load_state_dict({k: v.detach().cpu().clone() for k, v in policy.state_dict().items()})
        path = self.video_dir / f"eval-{env_frames}.mp4"
        self._thread = threading.Thread(target=self._record, args=(path, env_frames), name="menger-eval-video",
                                        daemon=True)
        self._thread.start()

    def _record(self, path: Path, env_frames: int) -> None:
        state = self.network.initial_state(1) if self.network.lstm_size else None

        @torch.no_grad()
        def act(obs):
            nonlocal state
            out = self.network.act(obs_to_tensors(obs), state, deterministic=True)
            state = out.state if state is not None else None
            return out.action.numpy()

        try:
            self.last = record_video(self.env, act, path, seed=self.cfg.seed, max_steps=self.cfg.max_steps)
        except Exception as exc:  # noqa: BLE001 - a video that fails must not end the training run
            self.failed += 1
            log.warning("evaluation video %s not written: %s: %s", path, type(exc).__name__, exc)
            return
        self.count += 1
        log.info("evaluation video: %s", self.last.describe())
        if self.tensorboard_dir is not None:
            try:
                if self._tensorboard is None:
                    self._tensorboard = TensorBoardLogger(self.tensorboard_dir)
                self._tensorboard.write_video("eval/video", path, env_frames)
            except Exception as exc:  # noqa: BLE001 - the MP4 is written; TensorBoard only misses its copy
                log.warning("evaluation video %s not put into TensorBoard: %s: %s", path, type(exc).__name__, exc)

    def metrics(self) -> dict:
        out = {"eval/videos": self.count, "eval/videos_skipped": self.skipped, "eval/videos_failed": self.failed}
        if self.last is not None:
            out["eval/video_return"] = self.last.episode_return
        return out

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join(self.join_timeout_s)
            if self._thread.is_alive():
                log.warning("the evaluation video being written did not finish within %.0f s; left unfinished",
                            self.join_timeout_s)
                return  # the thread still uses the env
        self.env.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
