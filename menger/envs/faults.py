"""What Menger does when an environment misbehaves (docs/guides/reliability.md, promise 6).

Three faults are handled here, the same way for every kind of vectorised env:

* non-finite values (NaN/Inf) in an observation or reward: dropped and counted, or a fast failure;
* an env that raises in ``step``: rebuilt (the vector implementations decide what "the env" is);
* an env whose ``reset`` keeps raising: retried with a short doubling back-off, then a clear ``EnvError``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TypeVar

import gymnasium
import numpy as np

T = TypeVar("T")

NONFINITE_POLICIES = ("drop", "fail")
FIRST_RESET_BACKOFF_S = 0.05


class EnvError(RuntimeError):
    """An environment failed in a way Menger could not repair; the message names the env and the cause."""


class NonFiniteValueError(EnvError):
    """An env returned NaN/Inf while ``nonfinite="fail"`` asked Menger to stop rather than drop it."""


class UnknownEnvError(ValueError):
    """An env id, module or attribute that does not exist; the message suggests the closest valid names."""


def new_stats() -> dict[str, int]:
    """The cumulative fault counters every ``VecEnv`` exposes as ``stats``."""
    return {"nonfinite_dropped": 0, "env_rebuilt": 0, "reset_failures": 0}


@dataclass(frozen=True)
class FaultPolicy:
    """How a vectorised env reacts to faults; checked on construction so a typo fails before any env starts.

    Attributes:
        nonfinite: "drop" (replace by 0, mark the transition invalid, end that episode, count it) or
            "fail" (raise ``NonFiniteValueError`` naming the env id and index).
        max_reset_retries: retries after a failed reset before giving up with ``EnvError``.
        max_rebuild_retries: rebuilds, each after a failure on the first step of the rebuilt env, before giving
            up with ``EnvError`` (an env that fails once in a while is rebuilt again; one that always fails is not).
        first_backoff_s: the wait before the first retry; each later wait doubles it.
    """

    nonfinite: str = "drop"
    max_reset_retries: int = 5
    max_rebuild_retries: int = 3
    first_backoff_s: float = FIRST_RESET_BACKOFF_S

    def __post_init__(self) -> None:
        if self.nonfinite not in NONFINITE_POLICIES:
            raise ValueError(
                f"nonfinite={self.nonfinite!r} is not a policy; use one of {NONFINITE_POLICIES}: "
                "'drop' drops and counts NaN/Inf transitions, 'fail' raises on the first one."
            )
        if not isinstance(self.max_reset_retries, int) or self.max_reset_retries < 0:
            raise ValueError(f"max_reset_retries must be an int >= 0, got {self.max_reset_retries!r}.")
        if not isinstance(self.max_rebuild_retries, int) or self.max_rebuild_retries < 0:
            raise ValueError(f"max_rebuild_retries must be an int >= 0, got {self.max_rebuild_retries!r}.")
        if self.first_backoff_s < 0:
            raise ValueError(f"first_backoff_s must be >= 0, got {self.first_backoff_s!r}.")


def call_with_retries(
    attempt: Callable[[], T],
    *,
    what: str,
    policy: FaultPolicy,
    on_failure: Callable[[], None],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``attempt`` (an env reset) until it succeeds, waiting 0.05 s, 0.1 s, 0.2 s ... between tries.

    The back-off is short on purpose: it rides out a simulator that is briefly not ready without stalling
    an actor for long, and the cap turns a permanently broken env into an error instead of a silent hang.
    ``on_failure`` is called once per failed try so the caller can count it.
    """
    delay = policy.first_backoff_s
    tries = policy.max_reset_retries + 1
    for number in range(1, tries + 1):
        try:
            return attempt()
        except Exception as exc:  # an env may raise anything; each failure is counted and retried
            on_failure()
            last_error = exc
            if number == tries:
                break
            sleep(delay)
            delay *= 2
    raise EnvError(
        f"{what}: reset failed {tries} times in a row (retried with back-off from {policy.first_backoff_s} s, "
        f"doubling each time); last error: {type(last_error).__name__}: {last_error}. Fix the env's reset(), "
        "or raise max_reset_retries if the failures are transient."
    ) from last_error


def leaves(obs) -> list[np.ndarray]:
    """The arrays inside a batched observation (an array, or a dict/tuple of them, nested)."""
    if isinstance(obs, dict):
        return [leaf for value in obs.values() for leaf in leaves(value)]
    if isinstance(obs, tuple):
        return [leaf for value in obs for leaf in leaves(value)]
    return [obs]


def float_leaves(obs) -> list[np.ndarray]:
    """Only floating arrays can hold NaN/Inf, so integer observations (Atari frames) are never scanned."""
    return [leaf for leaf in leaves(obs) if leaf.dtype.kind in "fc"]


def space_has_floats(space) -> bool:
    """Whether observations from ``space`` can hold NaN/Inf at all (decided once, not per step)."""
    if isinstance(space, gymnasium.spaces.Dict):
        return any(space_has_floats(sub_space) for sub_space in space.spaces.values())
    if isinstance(space, gymnasium.spaces.Tuple):
        return any(space_has_floats(sub_space) for sub_space in space.spaces)
    dtype = getattr(space, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind in "fc"


def nonfinite_rows(obs, reward: np.ndarray) -> np.ndarray:
    """A bool [B] mask of the envs whose observation or reward holds NaN or Inf."""
    bad = ~np.isfinite(reward)
    for leaf in float_leaves(obs):
        bad |= ~np.isfinite(leaf.reshape(leaf.shape[0], -1)).all(axis=1)
    return bad


def zero_nonfinite(obs) -> None:
    """Replace NaN/Inf by 0 in place, for a reset observation that is itself broken."""
    for leaf in float_leaves(obs):
        np.nan_to_num(leaf, copy=False, nan=0.0, posinf=0.0, neginf=0.0)


def write_row(batch, index: int, value) -> None:
    """Copy one env's observation into row ``index`` of a batched observation of the same structure."""
    if isinstance(batch, dict):
        for key, sub_batch in batch.items():
            write_row(sub_batch, index, value[key])
    elif isinstance(batch, tuple):
        for sub_batch, sub_value in zip(batch, value):
            write_row(sub_batch, index, sub_value)
    else:
        batch[index] = value


def writable_copy(obs):
    """A copy of a batched observation that the caller may patch without touching the env's own buffers."""
    if isinstance(obs, dict):
        return {key: writable_copy(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(writable_copy(value) for value in obs)
    return np.array(obs, copy=True)
