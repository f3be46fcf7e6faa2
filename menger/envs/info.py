"""The facts an env reports in its ``info`` at an episode's end (``env.info_keys``: ``is_success``, ...).

A ``VecEnv`` asked for some keys reads them off the last info of every episode that ends in a step and hands
them on in ``StepResult.episode_info`` (row -> {key: value}); the actor puts them beside the episode's return in
its unroll's tag, and the trainer logs their means (``episode/<key>_mean``). Where a gymnasium vector env puts
that last info depends on its autoreset mode:

* NEXT_STEP and DISABLED: in the step's ``infos``, as arrays over the envs with a ``_key`` mask of the envs
  that set the key;
* SAME_STEP: in ``infos["final_info"]`` (same layout), since the step's own ``infos`` already belong to the
  episode that starts in the same step.

Values are numbers or bools, made floats; a key an episode did not report, or reported as NaN or Inf, is left
out of that episode (not counted as zero). Anything else is an error that names the key.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from menger.envs.faults import EnvError

EpisodeInfo = dict[int, dict[str, float]]  # row of the vector env -> the listed keys its ended episode reported


def info_value(env_id: str, key: str, value: Any) -> float | None:
    """`value` of `key` as a float, or None where it carries no number (NaN, Inf); EnvError for a non-number."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    raise EnvError(f"{env_id}: env.info_keys lists {key!r}, and the env's info gave {value!r} "
                   f"({type(value).__name__}) for it at an episode's end; env.info_keys takes keys whose values are "
                   f"numbers or bools: remove {key!r} from env.info_keys, or report a number under it")


def single_info(env_id: str, info: dict, keys: Iterable[str]) -> dict[str, float]:
    """The listed keys of one env's info (a single gymnasium env's ``step`` info)."""
    out = {}
    for key in keys:
        if key in info:
            number = info_value(env_id, key, info[key])
            if number is not None:
                out[key] = number
    return out


def vector_info(env_id: str, infos: dict, keys: Iterable[str], rows: np.ndarray,
                final: bool = False) -> EpisodeInfo:
    """The listed keys for each of `rows` (the envs whose episode ended) from a gymnasium vector env's ``infos``;
    `final`: read ``infos["final_info"]`` (SAME_STEP autoreset)."""
    if final:
        infos = infos.get("final_info") or {}
    out: EpisodeInfo = {int(row): {} for row in rows}
    for key in keys:
        if key not in infos:
            continue
        values, present = infos[key], infos.get(f"_{key}")
        for row in out:
            if present is not None and not present[row]:
                continue
            number = info_value(env_id, key, values[row])
            if number is not None:
                out[row][key] = number
    return out
