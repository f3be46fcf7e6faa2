"""`menger eval`: run a trained policy for N episodes; optionally write a GIF of the first one."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def evaluate_run(run_dir: str | Path, *, episodes: int = 10, deterministic: bool = True, video: bool = False,
                 seed: int = 12345, max_steps: int = 100_000, allow_import=()) -> dict:
    from menger.api import load_policy
    from menger.envs import make_vec_env

    policy = load_policy(run_dir, allow_import)
    cfg = policy.config
    envs = make_vec_env(cfg.env.id, 1, seed=seed, kwargs=dict(cfg.env.kwargs), preset=cfg.env.preset,
                        wrappers=cfg.env.wrappers)
    returns, lengths, frames = [], [], []
    obs = envs.reset(seed=seed)
    ep_return, ep_length, steps = 0.0, 0, 0
    while len(returns) < episodes and steps < max_steps:
        if video and not returns:
            frames.append(_frame(envs, obs))
        action = policy.act(obs, deterministic=deterministic)
        result = envs.step(action)
        ep_return += float(result.reward[0])
        ep_length += int(result.valid[0])
        steps += 1
        ended = result.terminated | result.truncated
        policy.reset_state(ended | ~result.valid)
        if ended[0]:
            returns.append(ep_return)
            lengths.append(ep_length)
            ep_return, ep_length = 0.0, 0
        obs = result.obs
    envs.close()
    if not returns:
        raise RuntimeError(f"no episode finished within {max_steps} steps")
    report = {"episodes": len(returns), "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)),
              "return_min": float(np.min(returns)), "return_max": float(np.max(returns)),
              "length_mean": float(np.mean(lengths))}
    frames = [f for f in frames if f is not None]
    if video and not frames and cfg.env.preset is None:
        frames = _rendered_episode(policy, cfg, seed, deterministic, max_steps)
    if video and frames:
        report["video"] = str(_write_gif(frames, Path(run_dir) / "eval.gif"))
    return report


def _frame(envs, obs):
    """An image of the current state: the env's own rendering if it has one, else an image observation."""
    inner = getattr(envs, "env", None) or getattr(envs, "envs", None)
    for candidate in (inner[0] if isinstance(inner, list) else inner,):
        render = getattr(candidate, "render", None)
        if render is not None and getattr(candidate, "render_mode", None) == "rgb_array":
            return render()
    array = obs if not isinstance(obs, dict) else next(iter(obs.values()))
    array = np.asarray(array)[0]
    if array.ndim == 3 and array.dtype == np.uint8:  # stacked frames [C, H, W]: show the newest
        return np.repeat(array[-1][:, :, None], 3, axis=2)
    if array.ndim == 2:
        scaled = (255 * (array - array.min()) / max(1e-9, float(array.max() - array.min()))).astype(np.uint8)
        return np.repeat(scaled[:, :, None], 3, axis=2)
    return None


def _rendered_episode(policy, cfg, seed: int, deterministic: bool, max_steps: int) -> list[np.ndarray]:
    """One episode in a single env made with render_mode='rgb_array' (vector envs do not render)."""
    import os

    import gymnasium as gym

    from menger.envs.make import resolve_wrappers

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # render off-screen; no display needed
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    try:
        env = gym.make(cfg.env.id, render_mode="rgb_array", **dict(cfg.env.kwargs))
        for _, wrapper, kwargs in resolve_wrappers(cfg.env.wrappers):  # as the policy was trained
            env = wrapper(env, **kwargs)
    except Exception:  # noqa: BLE001 - user factories may not take render_mode
        return []
    obs, _ = env.reset(seed=seed)
    frames = [env.render()]
    for _ in range(max_steps):
        batch = {k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[None]
        obs, _, terminated, truncated, _ = env.step(policy.act(batch, deterministic=deterministic)[0])
        frames.append(env.render())
        if terminated or truncated:
            break
    env.close()
    policy.reset_state(np.ones(1, bool))
    return [f for f in frames if f is not None]


def _write_gif(frames: list[np.ndarray], path: Path) -> Path:
    from PIL import Image

    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=40, loop=0)
    return path
