"""`menger eval`: run a trained policy for N episodes; optionally write a video of one more episode.

The video shows the env's own `render()` frames (rgb_array) at the env's resolution: CartPole's 600x400 picture,
the full 210x160 colour Atari screen rather than the agent's 84x84 grey view (`menger.envs.render`). It is an
MP4 (or a GIF) of an episode of its own, played from the same `seed`; its return is reported beside it. An env
that cannot render stops the command before anything is played (`RenderError`).

`checkpoint` picks the parameters: the newest (latest), the best by the run's own evaluation (best, with
`checkpoint.keep_best`) or a step. `like_training` plays the episodes the run's evaluator played during training
(`eval.episodes` envs side by side, one episode each, seeded from `eval.seed`, the deterministic action, at most
`eval.max_steps` steps): the mean return is then the `eval/return_mean` the run recorded for the same parameters,
e.g. the best checkpoint's.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def evaluate_run(run_dir: str | Path, *, episodes: int = 10, deterministic: bool = True, video: bool = False,
                 video_path: str | Path | None = None, video_format: str | None = None, seed: int = 12345,
                 max_steps: int = 100_000, allow_import=(), checkpoint: str | int = "latest",
                 like_training: bool = False) -> dict:
    """Play the run's policy (`checkpoint`: latest, best or a step) for `episodes` episodes from `seed`, one after
    another on one env, or (`like_training`) the run's own evaluation episodes; the report says which checkpoint
    played (`checkpoint`: its step, path and, for the best, the evaluation recorded during training)."""
    from menger.api import load_policy
    from menger.envs import make_vec_env
    from menger.envs.render import make_render_env
    from menger.logging.video import require_video
    from menger.runtime.evaluation import make_eval_envs, record_video

    if like_training and not deterministic:
        raise ValueError("--like-training plays the run's deterministic evaluation; leave out --stochastic")
    policy = load_policy(run_dir, allow_import, checkpoint=checkpoint)
    cfg = policy.config
    render_env = None
    if video:  # first: an env that cannot render (or nothing to write a video with) says so before any episode
        video_format = video_format or (Path(video_path).suffix.lstrip(".").lower() if video_path else "") or "mp4"
        require_video("`menger eval --video`", video_format, instead="run menger eval without --video")
        render_env = make_render_env(cfg.env.id, seed=seed, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset,
                                     wrappers=cfg.env.wrappers, instead="run menger eval without --video")
    try:
        if like_training:
            report = _play_like_training(policy, make_eval_envs(cfg))
        else:
            report = _play(policy, make_vec_env(cfg.env.id, 1, seed=seed, kwargs=dict(cfg.env.kwargs),
                                                preset=cfg.env.preset, wrappers=cfg.env.wrappers,
                                                multiagent=cfg.env.multiagent),
                           episodes, deterministic, seed, max_steps)
        report["checkpoint"] = policy.checkpoint
        if render_env is not None:
            path = Path(video_path) if video_path else Path(run_dir) / f"eval.{video_format}"
            policy.reset_state(np.ones(1, bool))
            record = record_video(render_env, lambda obs: policy.act(obs, deterministic=deterministic), path,
                                  seed=seed, max_steps=max_steps, video_format=video_format)
            report["video"] = str(record.path)
            report["video_record"] = record
    finally:
        if render_env is not None:
            render_env.close()
    return report


def _play_like_training(policy, envs) -> dict:
    """The evaluator's episodes (`menger.runtime.evaluation.play_deterministic`) with the run's eval settings."""
    from menger.runtime.evaluation import play_deterministic

    cfg = policy.config.eval
    try:
        returns, lengths, finished = play_deterministic(policy.network, envs, cfg.seed, cfg.max_steps)
    finally:
        envs.close()
    if not finished.any():
        raise RuntimeError(f"no episode finished within eval.max_steps={cfg.max_steps} steps")
    done = returns[finished]
    return {"episodes": int(finished.sum()), "return_mean": float(done.mean()), "return_std": float(done.std()),
            "return_min": float(done.min()), "return_max": float(done.max()),
            "length_mean": float(lengths[finished].mean())}


def _play(policy, envs, episodes: int, deterministic: bool, seed: int, max_steps: int) -> dict:
    """Episodes one after another on `envs`: one env, or one multi-agent game whose rows (its learned agents) each
    play episodes of their own, counted as the evaluator counts them (the reward of the agent's own steps). A game
    of k learned agents plays whole games: each agent's first ceil(episodes / k) episodes are reported."""
    rows = envs.num_envs
    per_row = -(-episodes // rows)
    returns: list[list[float]] = [[] for _ in range(rows)]
    lengths: list[list[int]] = [[] for _ in range(rows)]
    ep_return, ep_length = np.zeros(rows), np.zeros(rows, np.int64)
    obs = envs.reset(seed=seed)
    steps = 0
    try:
        while min(map(len, returns)) < per_row and steps < max_steps:
            result = envs.step(policy.act(obs, deterministic=deterministic))
            ep_return += np.where(result.valid, result.reward, 0.0)
            ep_length += result.valid
            steps += 1
            ended = result.terminated | result.truncated
            policy.reset_state(ended | ~result.valid)
            for row in np.flatnonzero(ended):
                returns[row].append(float(ep_return[row]))
                lengths[row].append(int(ep_length[row]))
            ep_return[ended], ep_length[ended] = 0.0, 0
            obs = result.obs
    finally:
        envs.close()
    played = [r for row in returns for r in row[:per_row]]
    if not played:
        raise RuntimeError(f"no episode finished within {max_steps} steps")
    length = [n for row in lengths for n in row[:per_row]]
    return {"episodes": len(played), "return_mean": float(np.mean(played)), "return_std": float(np.std(played)),
            "return_min": float(np.min(played)), "return_max": float(np.max(played)),
            "length_mean": float(np.mean(length))}
