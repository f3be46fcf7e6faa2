"""Envs that show themselves: one env stepped as the run's envs are, whose ``frame()`` is its own picture.

The loop that drives one (``record_episode``: ``menger eval --video``, the trainer's periodic video)::

    env = make_render_env(env_id, seed=seed, kwargs=kwargs, preset=preset)   # RenderError: it cannot render
    obs = env.reset(seed)                     # the observations the policy was trained on, a batch of one
    sink.append(env.frame())                  # [H, W, 3] uint8 at the env's own resolution
    while the episode runs:
        result = env.step(act(obs))
        sink.append(env.frame())

What the picture is:

* a gymnasium id or a ``package.module:ClassOrFactory`` env: the env built with ``render_mode="rgb_array"``,
  and its ``render()``. A class or factory that takes no ``render_mode`` is built without one, and must then
  be in ``rgb_array`` mode by itself. An id with a vectorised and a single-env implementation (CartPole-v1)
  renders through the single one; a vector-only env through its own ``render()`` with ``num_envs=1``.
* the "atari" preset: ALE's vector env shows the agent 84x84 grey stacked frames and has no ``render()``.
  A twin ``AtariVectorEnv`` of the same game, seed and settings, but observing the full 210x160 colour
  screen, is stepped with the same actions. The emulator does not depend on the observation format, so the
  twin plays the same game; its rewards and episode ends are checked against the agent's env every step.
  One frame per agent step: 60 / frameskip frames per second of game time.
"""
from __future__ import annotations

import abc
import inspect
import os
from typing import Any, Callable, NamedTuple

import gymnasium
import numpy as np

from menger.envs.atari import make_atari_vector_env
from menger.envs.faults import FaultPolicy, UnknownEnvError
from menger.envs.make import make_vec_env, resolve_env, resolve_wrappers
from menger.envs.vector import LoopVecEnv, NativeVecEnv, StepResult
from menger.extras import require

FULL_SCREEN = {"img_height": 210, "img_width": 160, "grayscale": False, "stack_num": 1, "maxpool": False}
DEFAULT_FPS = 30.0


class RenderError(RuntimeError):
    """The env gives no rgb_array frames; the message says which env, why, and what to change."""


class RenderEnv(abc.ABC):
    """A ``VecEnv`` of one env (``reset``, ``step``, ``close``) with ``frame()`` and ``fps``: by default the
    calls go to ``self._vec``, the env the policy acts in; each kind says where its picture comes from."""

    fps: float = DEFAULT_FPS
    _vec: Any

    def __init__(self, env_id: str):
        self.env_id = env_id

    def reset(self, seed: int) -> Any:
        return self._vec.reset(seed=seed)

    def step(self, actions: np.ndarray) -> StepResult:
        return self._vec.step(actions)

    def frame(self) -> np.ndarray:
        """The env's picture of its current state, [H, W, 3] uint8."""
        return _checked_frame(self._raw_frame(), self.env_id)

    @abc.abstractmethod
    def _raw_frame(self):
        """The picture as the env gives it (checked by ``frame``)."""

    def close(self) -> None:
        self._vec.close()


class EpisodeRecord(NamedTuple):
    episode_return: float
    length: int  # env steps of the episode
    frames: int  # pictures appended to the sink (the first state, then one per step)


def make_render_env(env_id: str, *, seed: int, kwargs: dict | None = None, preset: str | None = None,
                    wrappers=(), instead: str = "record no video") -> RenderEnv:
    """One env of ``env_id`` that renders, wrapped by ``wrappers`` (``env.wrappers``) as the actors' envs are;
    built, reset and rendered once here, so that an env that cannot render fails now (``RenderError``, its
    message ending with ``instead``: what to do to go on without one), before anything is played."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame renders off-screen: no display needed
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    kwargs = dict(kwargs or {})
    wrap = resolve_wrappers(wrappers)
    if wrap and preset is not None:
        raise UnknownEnvError(f"env.wrappers cannot wrap the {preset!r} preset; unset env.preset or env.wrappers")
    try:
        if preset == "atari":
            env: RenderEnv = _AtariRender(env_id, seed, kwargs)
        else:
            is_vector, factory = resolve_env(env_id, prefer_single=True)
            if is_vector and wrap:
                raise UnknownEnvError(f"env.wrappers wrap single envs, and {env_id!r} is a VectorEnv; unset "
                                      "env.wrappers")
            env = _VectorRender(env_id, seed, factory, kwargs) if is_vector else \
                _SingleRender(env_id, seed, factory, kwargs, wrap)
    except RenderError as exc:
        raise RenderError(f"{exc}; or {instead}") from exc.__cause__
    try:
        env.reset(seed)
        env.frame()
    except RenderError as exc:
        env.close()
        raise RenderError(f"{exc}; or {instead}") from None
    except gymnasium.error.DependencyNotInstalled as exc:  # gymnasium's classic-control envs draw with pygame
        env.close()
        if "pygame" in str(exc):
            require("pygame", "video", f"a video of {env_id!r} (which draws itself with pygame)")
        raise
    except BaseException:
        env.close()
        raise
    return env


def record_episode(env: RenderEnv, act: Callable[[Any], np.ndarray], sink, *, seed: int,
                   max_steps: int) -> EpisodeRecord:
    """Play one episode with ``act(obs) -> actions`` (a batch of one), appending every frame to ``sink``."""
    obs = env.reset(seed)
    sink.append(env.frame())
    episode_return, length, frames = 0.0, 0, 1
    for _ in range(max_steps):
        result = env.step(np.asarray(act(obs)))
        episode_return += float(result.reward[0])
        length += int(result.valid[0])
        sink.append(env.frame())
        frames += 1
        if result.terminated[0] or result.truncated[0]:
            break
        obs = result.obs
    return EpisodeRecord(episode_return, length, frames)


# ----- the kinds of env -----------------------------------------------------------------------------------

class _SingleRender(RenderEnv):
    """A single gymnasium env in a ``LoopVecEnv`` of one that resets on the step after an episode ends, so the
    last frame shows how the episode ended."""

    def __init__(self, env_id: str, seed: int, factory: Callable, kwargs: dict, wrap: list = ()):
        super().__init__(env_id)
        self._env = None

        def build():
            self._env = _build_rendering(factory, kwargs, env_id)
            for _, wrapper, wrapper_kwargs in wrap:  # as the policy was trained; render() passes through
                self._env = wrapper(self._env, **wrapper_kwargs)
            return self._env

        self._vec = LoopVecEnv(build, 1, env_id=env_id, seed=seed, faults=FaultPolicy(), next_step_autoreset=True)
        self.fps = _fps(self._env)

    def _raw_frame(self):
        return self._env.render()


class _VectorRender(RenderEnv):
    """A vector-only env (a user VectorEnv, Menger's sanity envs) built with ``num_envs=1``: its first picture."""

    def __init__(self, env_id: str, seed: int, factory: Callable, kwargs: dict):
        super().__init__(env_id)
        self._env = None

        def build():
            self._env = _build_rendering(factory, {"num_envs": 1, **kwargs}, env_id)
            return self._env

        self._vec = NativeVecEnv(build, env_id=env_id, seed=seed, faults=FaultPolicy())
        self.fps = _fps(self._env)

    def _raw_frame(self):
        frames = self._env.render()
        if isinstance(frames, (list, tuple)):
            return frames[0] if frames else None
        if isinstance(frames, np.ndarray) and frames.ndim == 4:
            return frames[0]
        return frames


class _AtariRender(RenderEnv):
    """The agent's env of the atari preset, with a full-screen colour twin stepped in lockstep."""

    def __init__(self, env_id: str, seed: int, kwargs: dict):
        super().__init__(env_id)
        self._vec = make_vec_env(env_id, 1, seed=seed, kwargs=kwargs, preset="atari")
        try:
            self._twin = make_atari_vector_env(env_id, 1, num_threads=1, kwargs={**kwargs, **FULL_SCREEN})
        except BaseException:
            self._vec.close()
            raise
        self.fps = 60.0 / int(kwargs.get("frameskip", 4))
        self._screen = None
        self._steps = 0

    def reset(self, seed: int):
        obs = self._vec.reset(seed=seed)
        screen, _ = self._twin.reset(seed=seed)
        self._screen, self._steps = screen[0, -1], 0
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        result = self._vec.step(actions)
        screen, reward, terminated, truncated, _ = self._twin.step(actions)
        self._steps += 1
        if (not np.allclose(reward, result.reward) or terminated[0] != result.terminated[0]
                or truncated[0] != result.truncated[0]):
            raise RuntimeError(
                f"{self.env_id}: the full-screen copy of the agent's Atari env went out of step at step "
                f"{self._steps} (reward {reward[0]} against {result.reward[0]}, ended {terminated[0] or truncated[0]} "
                f"against {result.terminated[0] or result.truncated[0]}); the video would not show this game. "
                "This happens when the agent's env was rebuilt after a fault; record again.")
        self._screen = screen[0, -1]
        return result

    def _raw_frame(self):
        return self._screen

    def close(self) -> None:
        self._vec.close()
        self._twin.close()


# ----- building and checking ------------------------------------------------------------------------------

def _build_rendering(factory: Callable, kwargs: dict, env_id: str):
    """The env in rgb_array mode: asked for with ``render_mode``, or already so when it takes no such argument."""
    env = None
    if _takes_render_mode(factory):
        try:
            env = factory(render_mode="rgb_array", **kwargs)
            why = "built with render_mode='rgb_array', its render_mode is {!r}"
        except TypeError as exc:  # a factory passing **kwargs on to a constructor without render_mode
            if "render_mode" not in str(exc):
                raise
    if env is None:
        env = factory(**kwargs)
        why = "its constructor takes no render_mode argument and its render_mode is {!r}"
    mode = getattr(env, "render_mode", None)
    if mode != "rgb_array":
        env.close()
        raise RenderError(_cannot_render(env_id, why.format(mode)))
    return env


def _takes_render_mode(factory: Callable) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or extension type: try it
        return True
    return any(p.name == "render_mode" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _checked_frame(frame, env_id: str) -> np.ndarray:
    if frame is None:
        raise RenderError(_cannot_render(env_id, "its render() returned None"))
    image = np.asarray(frame)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] not in (3, 4) or image.size == 0:
        raise RenderError(_cannot_render(env_id, f"its render() returned shape {image.shape}, not [H, W, 3]"))
    if image.dtype != np.uint8:
        image = np.clip(image, 0, 255).astype(np.uint8)
    return image[:, :, :3]


def _cannot_render(env_id: str, why: str) -> str:
    return (f"the env {env_id!r} cannot render rgb_array frames, so there is no video to make: {why}. To make "
            "one, give the env a render_mode argument and, when render_mode == 'rgb_array', a render() that returns "
            "the picture as an [H, W, 3] uint8 array (and list 'rgb_array' in its metadata['render_modes'])")


def _fps(env) -> float:
    metadata = getattr(env, "metadata", None) or {}
    fps = metadata.get("render_fps")
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else DEFAULT_FPS
