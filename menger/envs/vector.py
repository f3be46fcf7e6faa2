"""Menger's one vectorised-env interface (``VecEnv``) and its two implementations.

The loop that drives a ``VecEnv`` (an actor's):

    obs = env.reset(seed=seed)
    while running:
        actions = policy(obs)                      # one batched inference for all B envs
        result = env.step(actions)
        store(obs, actions, result)                # rows with result.valid == False are not transitions
        episode_over = result.terminated | result.truncated
        obs = result.obs

Two implementations, chosen by ``make_vec_env``:

* ``NativeVecEnv`` wraps an env's own vectorised implementation (gymnasium's CartPoleVectorEnv, ALE's
  AtariVectorEnv, a user VectorEnv). These usually autoreset on the NEXT step: the step after an episode
  ends only resets, ignores its action and is reported ``valid=False``. No extra env steps are spent.
* ``LoopVecEnv`` steps B single gymnasium envs in a loop in this process and resets an env in the same
  step its episode ends (SAME_STEP): ``obs`` of a done env is already the new episode's first obs. With
  ``next_step_autoreset`` it resets on the next step instead, as native envs do, so that the last observation of
  a truncated episode reaches the learner (replay bootstraps from it: a time limit is not a terminal state).

Whatever the mode, a row with ``valid=False`` starts afresh: its ``obs`` is a first observation of an
episode (after a reset step, a dropped NaN, or a rebuilt env) and its terminated/truncated are False.

Both take ``info_keys`` (``env.info_keys``): for every row whose episode ends in a step, the listed keys of that
episode's last info come back in ``StepResult.episode_info`` (``menger.envs.info``); without keys the env's infos
are not read at all.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array

from menger.envs import snapshot
from menger.envs.faults import (
    EnvError,
    FaultPolicy,
    NonFiniteValueError,
    call_with_retries,
    float_leaves,
    new_stats,
    nonfinite_rows,
    space_has_floats,
    write_row,
    writable_copy,
    zero_nonfinite,
)
from menger.envs.info import EpisodeInfo, single_info, vector_info

Obs = Any  # np.ndarray, or a dict (or tuple) of np.ndarray, batch-first


class StepResult(NamedTuple):
    """What one ``VecEnv.step`` returns, batch-first over the B envs."""

    obs: np.ndarray | dict[str, np.ndarray]
    reward: np.ndarray  # float32 [B]
    terminated: np.ndarray  # bool [B]
    truncated: np.ndarray  # bool [B]
    valid: np.ndarray  # bool [B]; False: do not learn from this row (reset step, dropped NaN, rebuilt env)
    # with info_keys: row -> the listed keys of the last info of the episode that ended in that row in this step
    # (every ended row has an entry, empty where the episode reported none of them); None: no keys were asked
    episode_info: EpisodeInfo | None = None


@runtime_checkable
class VecEnv(Protocol):
    """B environments stepped together. ``stats`` counts faults: nonfinite_dropped, env_rebuilt, reset_failures."""

    num_envs: int
    single_observation_space: gymnasium.Space
    single_action_space: gymnasium.Space
    stats: dict[str, int]

    def reset(self, seed: int | None = None) -> Obs: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...

    def get_state(self) -> dict | None: ...

    def set_state(self, state: dict) -> None: ...


def derived_seed(seed: int, *path: int) -> int:
    """A reproducible seed for a rebuilt env, distinct from the seeds of every other env and rebuild."""
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])


class NativeVecEnv:
    """A ``VecEnv`` over an env's own vectorised implementation (a ``gymnasium.vector.VectorEnv``).

    A fault in such an env cannot be pinned on one sub-env: an env that raises in ``step`` is closed and
    rebuilt whole, and NaN/Inf ends every episode in the batch (unless the env supports per-env resets,
    i.e. runs with autoreset DISABLED). All rows of such a step are ``valid=False``.

    ``get_state`` works when the env's state is plain numpy attributes (CartPoleVectorEnv, the sanity
    envs); it returns None for ALE's AtariVectorEnv, whose emulators live in C++ and cannot be copied.
    """

    def __init__(self, make_env: Callable[[], gymnasium.vector.VectorEnv], *, env_id: str, seed: int,
                 faults: FaultPolicy, info_keys: tuple[str, ...] = ()):
        self._make_env = make_env
        self._info_keys = tuple(info_keys)
        self._env_id = env_id
        self._seed = seed
        self._faults = faults
        self._env = self._build()
        self.num_envs: int = self._env.num_envs
        self.single_observation_space = self._env.single_observation_space
        self.single_action_space = self._env.single_action_space
        self.autoreset_mode: AutoresetMode = AutoresetMode(
            self._env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self.stats = new_stats()
        self._rebuilds = 0
        self._failed_in_a_row = 0  # steps that raised since the last one that did not: rebuilt each time
        self._has_reset = False
        self._prev_done = np.zeros(self.num_envs, dtype=np.bool_)
        self._next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP
        self._all_valid = np.ones(self.num_envs, dtype=np.bool_)  # copied per step: cheaper than np.ones
        self._obs_finite = obs_finite_check_for(self.single_observation_space)

    # -- the interface -------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Obs:
        if seed is None and not self._has_reset:
            seed = self._seed
        return self._reset_all(seed)

    def step(self, actions: np.ndarray) -> StepResult:
        if isinstance(actions, list):  # one tuple or dict per env (Tuple, Dict actions): the vector env's batch
            actions = concatenate(self.single_action_space, actions,
                                  create_empty_array(self.single_action_space, self.num_envs))
        try:
            obs, reward, terminated, truncated, infos = self._env.step(actions)
        except Exception as exc:  # any failure inside the env: rebuild it whole
            return self._rebuild(exc)
        self._failed_in_a_row = 0
        if not (math.isfinite(np.add.reduce(reward, None)) and self._obs_finite(obs)):
            result = self._drop_nonfinite(obs, _float32(reward), terminated, truncated)
        else:
            result = self._finish_step(obs, _float32(reward), terminated, truncated)
        if self._info_keys:
            ended = np.flatnonzero(result.terminated | result.truncated)
            result = result._replace(episode_info=vector_info(
                self._env_id, infos, self._info_keys, ended, final=self.autoreset_mode == AutoresetMode.SAME_STEP))
        return result

    def close(self) -> None:
        self._env.close()

    def get_state(self) -> dict | None:
        """A snapshot for exact resume, or None when the wrapped env keeps state we cannot copy (ALE)."""
        env_snapshot = snapshot.capture(self._env)
        if env_snapshot is None:
            return None
        return {
            "kind": "native",
            "env_id": self._env_id,
            "num_envs": self.num_envs,
            "env": env_snapshot,
            "prev_done": self._prev_done.copy(),
            "rebuilds": self._rebuilds,
            "failed_in_a_row": self._failed_in_a_row,
            "has_reset": self._has_reset,
            "stats": dict(self.stats),
        }

    def set_state(self, state: dict) -> None:
        _check_state_matches(state, "native", self._env_id, self.num_envs)
        snapshot.restore(self._env, state["env"])
        self._prev_done = np.array(state["prev_done"], dtype=np.bool_)
        self._rebuilds = int(state["rebuilds"])
        self._failed_in_a_row = int(state.get("failed_in_a_row", state.get("just_rebuilt", 0)))
        self._has_reset = bool(state["has_reset"])
        self.stats = {key: int(value) for key, value in state["stats"].items()}

    # -- stepping --------------------------------------------------------------------------------------

    def _finish_step(self, obs, reward, terminated, truncated) -> StepResult:
        """Apply the autoreset mode's rules; this runs on every step, so the common case comes first."""
        if self._next_step:
            valid = ~self._prev_done
            terminated = terminated & valid
            truncated = truncated & valid
            self._prev_done = terminated | truncated
            return StepResult(obs, reward, terminated, truncated, valid)
        valid = self._all_valid.copy()
        if self.autoreset_mode == AutoresetMode.DISABLED:
            done = terminated | truncated
            if done.any():
                obs = self._reset_rows(obs, done)
        return StepResult(obs, reward, terminated, truncated, valid)

    def _drop_nonfinite(self, obs, reward, terminated, truncated) -> StepResult:
        bad = nonfinite_rows(obs, reward)
        if not bad.any():  # the fast check's sum overflowed; every value is finite
            return self._finish_step(obs, reward, terminated, truncated)
        self._on_nonfinite(bad)
        if self.autoreset_mode == AutoresetMode.DISABLED:
            obs = self._reset_rows(obs, bad)
            reward = np.where(bad, np.float32(0.0), reward)
            valid = ~bad
            return StepResult(obs, reward, terminated & valid, truncated & valid, valid)
        return self._invalid_step(self._reset_all(None))

    def _on_nonfinite(self, bad: np.ndarray) -> None:
        first = int(np.flatnonzero(bad)[0])
        if self._faults.nonfinite == "fail":
            raise NonFiniteValueError(
                f"{self._env_id}: env index {first} (of {self.num_envs}) returned NaN or Inf in its observation "
                "or reward. Fix the env, or pass nonfinite='drop' to drop such transitions and reset the env."
            )
        self.stats["nonfinite_dropped"] += int(bad.sum())

    def _rebuild(self, exc: Exception) -> StepResult:
        self._failed_in_a_row += 1
        _back_off_or_give_up(self._failed_in_a_row, self._faults, self._env_id, "the vector env",
                             self.single_action_space, exc)
        try:
            self._env.close()
        except Exception:  # a crashed env may fail to close too; it is replaced either way
            pass
        self._rebuilds += 1
        self.stats["env_rebuilt"] += self.num_envs
        try:
            self._env = self._build()
        except Exception as build_exc:
            raise EnvError(
                f"{self._env_id}: the vector env raised in step ({type(exc).__name__}: {exc}) and could not be "
                f"rebuilt: {type(build_exc).__name__}: {build_exc}"
            ) from build_exc
        return self._invalid_step(self._reset_all(derived_seed(self._seed, self._rebuilds)))

    def _invalid_step(self, obs) -> StepResult:
        """Every row starts afresh: after a whole-env rebuild or reset nothing in this step is a transition."""
        self._prev_done = np.zeros(self.num_envs, dtype=np.bool_)
        no = np.zeros(self.num_envs, dtype=np.bool_)
        return StepResult(obs, np.zeros(self.num_envs, dtype=np.float32), no, no.copy(), no.copy(),
                          {} if self._info_keys else None)

    # -- resetting -------------------------------------------------------------------------------------

    def _build(self) -> gymnasium.vector.VectorEnv:
        env = self._make_env()
        if not isinstance(env, gymnasium.vector.VectorEnv):
            raise TypeError(
                f"{self._env_id}: expected a gymnasium.vector.VectorEnv, got {type(env).__name__}. A factory that "
                "takes num_envs must return a VectorEnv; give a single-env class or factory without num_envs instead."
            )
        return env

    def _reset_all(self, seed: int | None) -> Obs:
        obs, _ = call_with_retries(
            lambda: self._env.reset(seed=seed),
            what=f"{self._env_id} (vector env of {self.num_envs})",
            policy=self._faults,
            on_failure=self._count_reset_failure,
        )
        self._has_reset = True
        self._prev_done = np.zeros(self.num_envs, dtype=np.bool_)
        if not self._obs_finite(obs):
            obs = writable_copy(obs)
            zero_nonfinite(obs)
        return obs

    def _reset_rows(self, obs, rows: np.ndarray) -> Obs:
        """Reset only ``rows`` (autoreset DISABLED envs support this) and splice their first obs in."""
        fresh, _ = call_with_retries(
            lambda: self._env.reset(options={"reset_mask": rows}),
            what=f"{self._env_id} (envs {np.flatnonzero(rows).tolist()} of {self.num_envs})",
            policy=self._faults,
            on_failure=self._count_reset_failure,
        )
        obs = writable_copy(obs)
        for index in np.flatnonzero(rows):
            write_row(obs, int(index), _row(fresh, int(index)))
        zero_nonfinite(obs)
        return obs

    def _count_reset_failure(self) -> None:
        self.stats["reset_failures"] += 1


class LoopVecEnv:
    """A ``VecEnv`` over B single gymnasium envs stepped in a loop in this process, SAME_STEP autoreset.

    Used for envs with no vectorised implementation. Faults are handled per env: an env that raises in
    ``step`` is closed, rebuilt and reset (its row ``valid=False``); NaN/Inf in one env's values resets
    only that env. ``num_threads`` does not apply: everything runs in the calling thread.

    ``get_state`` works when every env's state is plain numpy attributes (classic control, with
    TimeLimit's step counter); it returns None otherwise (e.g. Box2D or MuJoCo envs).
    """

    def __init__(self, make_env: Callable[[], gymnasium.Env], num_envs: int, *, env_id: str, seed: int,
                 faults: FaultPolicy, next_step_autoreset: bool = False, info_keys: tuple[str, ...] = ()):
        self._make_env = make_env
        self._info_keys = tuple(info_keys)
        self._env_id = env_id
        self._seed = seed
        self._faults = faults
        self.num_envs = num_envs
        self._envs = [self._build(index) for index in range(num_envs)]
        self.single_observation_space = self._envs[0].observation_space
        self.single_action_space = self._envs[0].action_space
        self.autoreset_mode = AutoresetMode.NEXT_STEP if next_step_autoreset else AutoresetMode.SAME_STEP
        self._reset_next = np.zeros(num_envs, dtype=np.bool_)  # NEXT_STEP: the episode ended; reset on this step
        self.stats = new_stats()
        self._rebuilds = [0] * num_envs
        self._failed_in_a_row = [0] * num_envs  # per env: steps that raised since its last one that did not
        self._has_reset = False
        self._obs_finite = obs_finite_check_for(self.single_observation_space)
        self._batch = batcher_for(self.single_observation_space, num_envs)
        self._all_valid = np.ones(num_envs, dtype=np.bool_)  # copied per step: cheaper than np.ones

    # -- the interface -------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> Obs:
        if seed is None and not self._has_reset:
            seed = self._seed
        first_obs = [self._reset_env(index, None if seed is None else seed + index)
                     for index in range(self.num_envs)]
        self._has_reset = True
        self._reset_next[:] = False
        obs = self._batch(first_obs)
        zero_nonfinite(obs)
        return obs

    def step(self, actions: np.ndarray) -> StepResult:
        if len(actions) != self.num_envs:
            raise ValueError(f"{self._env_id}: got {len(actions)} actions for {self.num_envs} envs; pass one per env.")
        observations, rewards, terminations, truncations = [], [], [], []
        invalid = []  # rows that are no transition: their first observation, reward 0, not ended
        episode_info: EpisodeInfo | None = {} if self._info_keys else None

        def start_afresh(index: int, first_obs) -> None:
            observations.append(first_obs)
            rewards.append(0.0)
            terminations.append(False)
            truncations.append(False)
            invalid.append(index)

        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP
        for index, env in enumerate(self._envs):
            if next_step and self._reset_next[index]:  # the step after an episode end only resets
                self._reset_next[index] = False
                start_afresh(index, self._reset_env(index, None))
                continue
            try:
                obs, reward, terminated, truncated, info = env.step(actions[index])
            except Exception as exc:  # any failure inside the env: replace that env
                start_afresh(index, self._rebuild(index, exc))
                continue
            self._failed_in_a_row[index] = 0
            if episode_info is not None and (terminated or truncated):
                episode_info[index] = single_info(self._env_id, info, self._info_keys)
            if next_step:
                self._reset_next[index] = terminated or truncated
                observations.append(obs)
            else:
                observations.append(self._reset_env(index, None) if terminated or truncated else obs)
            rewards.append(reward)
            terminations.append(terminated)
            truncations.append(truncated)
        result = StepResult(
            self._batch(observations),
            np.array(rewards, dtype=np.float32),
            np.array(terminations, dtype=np.bool_),
            np.array(truncations, dtype=np.bool_),
            self._all_valid.copy(),
            episode_info,
        )
        if invalid:
            result.valid[invalid] = False
        if not (math.isfinite(sum(rewards)) and self._obs_finite(result.obs)):
            self._drop_nonfinite(*result[:5])
            if episode_info:  # an episode a dropped value cut short did not end: no facts of it
                for index in [i for i in episode_info if not (result.terminated[i] or result.truncated[i])]:
                    del episode_info[index]
        return result

    def close(self) -> None:
        for env in self._envs:
            env.close()

    def get_state(self) -> dict | None:
        """A snapshot for exact resume, or None when some env keeps state we cannot copy."""
        env_snapshots = [snapshot.capture(env) for env in self._envs]
        if any(env_snapshot is None for env_snapshot in env_snapshots):
            return None
        return {
            "kind": "loop",
            "env_id": self._env_id,
            "num_envs": self.num_envs,
            "envs": env_snapshots,
            "rebuilds": list(self._rebuilds),
            "failed_in_a_row": list(self._failed_in_a_row),
            "has_reset": self._has_reset,
            "reset_next": self._reset_next.tolist(),
            "stats": dict(self.stats),
        }

    def set_state(self, state: dict) -> None:
        _check_state_matches(state, "loop", self._env_id, self.num_envs)
        for env, env_snapshot in zip(self._envs, state["envs"]):
            snapshot.restore(env, env_snapshot)
        self._rebuilds = [int(count) for count in state["rebuilds"]]
        if "failed_in_a_row" in state:
            self._failed_in_a_row = [int(count) for count in state["failed_in_a_row"]]
        else:  # snapshots of earlier versions: the indices that had just been rebuilt
            self._failed_in_a_row = [int(i in state["just_rebuilt"]) for i in range(self.num_envs)]
        self._has_reset = bool(state["has_reset"])
        self._reset_next = np.array(state.get("reset_next", [False] * self.num_envs), dtype=np.bool_)
        self.stats = {key: int(value) for key, value in state["stats"].items()}

    # -- faults ----------------------------------------------------------------------------------------

    def _drop_nonfinite(self, obs, reward, terminated, truncated, valid) -> None:
        """Patch the batch in place: each env with NaN/Inf loses this transition and starts a new episode."""
        bad = nonfinite_rows(obs, reward)
        if not bad.any():  # the fast check's sum overflowed; every value is finite
            return
        bad_indices = np.flatnonzero(bad)
        if self._faults.nonfinite == "fail":
            raise NonFiniteValueError(
                f"{self._env_id}: env index {int(bad_indices[0])} (of {self.num_envs}) returned NaN or Inf in its "
                "observation or reward. Fix the env, or pass nonfinite='drop' to drop such transitions."
            )
        self.stats["nonfinite_dropped"] += len(bad_indices)
        for index in bad_indices:
            write_row(obs, int(index), self._reset_env(int(index), None))
        self._reset_next[bad] = False
        reward[bad] = 0.0
        terminated[bad] = False
        truncated[bad] = False
        valid[bad] = False
        zero_nonfinite(obs)

    def _rebuild(self, index: int, exc: Exception) -> Obs:
        self._failed_in_a_row[index] += 1
        _back_off_or_give_up(self._failed_in_a_row[index], self._faults, self._env_id, f"env index {index}",
                             self.single_action_space, exc)
        try:
            self._envs[index].close()
        except Exception:  # a crashed env may fail to close too; it is replaced either way
            pass
        self._rebuilds[index] += 1
        self._reset_next[index] = False
        self.stats["env_rebuilt"] += 1
        try:
            self._envs[index] = self._build(index)
        except Exception as build_exc:
            raise EnvError(
                f"{self._env_id}: env index {index} raised in step ({type(exc).__name__}: {exc}) and could not be "
                f"rebuilt: {type(build_exc).__name__}: {build_exc}"
            ) from build_exc
        return self._reset_env(index, derived_seed(self._seed, index, self._rebuilds[index]))

    # -- building and resetting ----------------------------------------------------------------------

    def _build(self, index: int) -> gymnasium.Env:
        env = self._make_env()
        if not isinstance(env, gymnasium.Env):
            raise TypeError(
                f"{self._env_id}: env index {index} is a {type(env).__name__}, not a gymnasium.Env. Give a "
                "gymnasium.Env class or a factory returning one (or a VectorEnv factory taking num_envs)."
            )
        return env

    def _reset_env(self, index: int, seed: int | None) -> Any:
        obs, _ = call_with_retries(
            lambda: self._envs[index].reset(seed=seed),
            what=f"{self._env_id} env index {index} (of {self.num_envs})",
            policy=self._faults,
            on_failure=self._count_reset_failure,
        )
        return obs

    def _count_reset_failure(self) -> None:
        self.stats["reset_failures"] += 1


def _back_off_or_give_up(failures: int, faults: FaultPolicy, env_id: str, which: str, action_space,
                         exc: Exception, sleep=time.sleep) -> None:
    """The env raised in step `failures` times in a row, each time right after being rebuilt (the first one is
    rebuilt at once). A flaky env (a fault in 1 % of steps) is rebuilt again after a short back-off (0.05 s,
    doubling); one that fails on every first step is not transient, and gives up past
    `faults.max_rebuild_retries` instead of looping forever."""
    if failures <= 1:
        return
    if failures > faults.max_rebuild_retries + 1:
        raise EnvError(
            f"{env_id}: {which} raised in step again right after being rebuilt, {failures} times in a row "
            f"({type(exc).__name__}: {exc}). Check that the actions are valid for {action_space}; otherwise the "
            "env fails deterministically."
        )
    sleep(faults.first_backoff_s * 2 ** (failures - 2))


def _float32(reward: np.ndarray) -> np.ndarray:
    return reward if reward.dtype == np.float32 else reward.astype(np.float32)


def obs_finite_check_for(space: gymnasium.Space) -> Callable[[Obs], bool]:
    """A per-step NaN/Inf test of observations, specialised once for the space (it runs on every step).

    A sum is finite only if every term is, so one reduction per array answers the common case; a sum
    that overflows merely sends the step to the exact per-row check.
    """
    if isinstance(space, gymnasium.spaces.Box) and space_has_floats(space):
        return lambda obs: math.isfinite(np.add.reduce(obs, None))
    if space_has_floats(space):
        return lambda obs: all(math.isfinite(np.add.reduce(leaf, None)) for leaf in float_leaves(obs))
    return lambda obs: True


def batcher_for(space: gymnasium.Space, num_envs: int) -> Callable[[list], Obs]:
    """Stacks B single observations into a fresh batch (callers may keep a batch while the next step runs)."""
    if isinstance(space, gymnasium.spaces.Box):
        return lambda observations: np.array(observations, dtype=space.dtype)
    return lambda observations: concatenate(space, observations, create_empty_array(space, num_envs, fn=np.empty))


def _row(obs, index: int):
    if isinstance(obs, dict):
        return {key: _row(value, index) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(value, index) for value in obs)
    return obs[index]


def _check_state_matches(state: dict, kind: str, env_id: str, num_envs: int) -> None:
    saved = (state.get("kind"), state.get("env_id"), state.get("num_envs"))
    if saved != (kind, env_id, num_envs):
        raise ValueError(
            f"This snapshot is of a {saved[0]} env {saved[1]!r} with {saved[2]} envs; it cannot be restored into a "
            f"{kind} env {env_id!r} with {num_envs} envs. Make the env with the same id, num_envs and preset."
        )
