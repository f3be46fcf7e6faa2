"""Generic snapshots of environments whose whole state lives in plain numpy/Python attributes.

Classic-control envs (CartPole, Pendulum, their vector versions) and Menger's sanity envs keep their
state in a few numpy arrays, scalars and a ``numpy.random.Generator``. Copying exactly those attributes,
layer by layer through the wrapper stack (TimeLimit's elapsed steps included), is enough to resume a
trajectory bit for bit. A snapshot holds only numpy arrays and JSON-able values, never pickles, so the
checkpoint code can store it safely.

An env with any attribute we cannot copy faithfully (an emulator handle such as ALE's, a physics engine,
a socket) is reported as not snapshotable: ``capture`` returns None rather than a snapshot that would
silently resume from the wrong state.
"""

from __future__ import annotations

import enum
import functools
import types
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec

RNG_TAG = "__bit_generator_state__"
NUMPY_SCALAR_TAG = "__numpy_scalar__"
TUPLE_TAG = "__tuple__"

# Attribute values that describe an env rather than hold its state: they are rebuilt identically when
# the env is constructed again, so they are neither copied nor a reason to refuse a snapshot.
_DESCRIPTIVE_TYPES = (
    gymnasium.Space,
    EnvSpec,
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    functools.partial,
    enum.Enum,
)


class _Unsupported(Exception):
    """Raised inside encoding when a value cannot be captured faithfully."""


def capture(env: Any) -> dict | None:
    """A snapshot of ``env`` and every wrapper around it, or None when it cannot be captured faithfully."""
    layers = []
    for layer in _layers(env):
        try:
            attrs = {
                name: _encode(value)
                for name, value in vars(layer).items()
                if not _is_link_or_descriptive(layer, name, value)
            }
        except _Unsupported:
            return None
        layers.append({"type": _type_name(layer), "attrs": attrs})
    return {"layers": layers}


def restore(env: Any, snapshot: dict) -> None:
    """Write a snapshot from ``capture`` back into an env built the same way (same id, kwargs, wrappers)."""
    layers = list(_layers(env))
    saved_layers = snapshot["layers"]
    saved_types = [saved["type"] for saved in saved_layers]
    live_types = [_type_name(layer) for layer in layers]
    if saved_types != live_types:
        raise ValueError(
            f"Snapshot was taken from wrappers {saved_types} but this env has {live_types}; "
            "restore into an env made with the same id, kwargs and preset."
        )
    for layer, saved in zip(layers, saved_layers):
        for name, value in saved["attrs"].items():
            setattr(layer, name, _decode(value, getattr(layer, name, None)))


def _layers(env: Any):
    """The env and the envs it wraps, outermost first."""
    while True:
        yield env
        inner = vars(env).get("env")
        if not isinstance(inner, (gymnasium.Env, gymnasium.vector.VectorEnv)):
            return
        env = inner


def _is_link_or_descriptive(layer: Any, name: str, value: Any) -> bool:
    is_wrapped_env_link = name == "env" and isinstance(value, (gymnasium.Env, gymnasium.vector.VectorEnv))
    return is_wrapped_env_link or isinstance(value, _DESCRIPTIVE_TYPES)


def _type_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise _Unsupported
        return value.copy()
    if isinstance(value, np.generic):
        return {NUMPY_SCALAR_TAG: np.asarray(value)}
    if isinstance(value, np.random.Generator):
        return {RNG_TAG: value.bit_generator.state}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, tuple):
        return {TUPLE_TAG: [_encode(item) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _encode(item) for key, item in value.items()}
    raise _Unsupported


def _decode(value: Any, current: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_decode(item, None) for item in value]
    if not isinstance(value, dict):
        return value
    if RNG_TAG in value:
        return _restored_generator(value[RNG_TAG], current)
    if NUMPY_SCALAR_TAG in value:
        return np.asarray(value[NUMPY_SCALAR_TAG])[()]
    if TUPLE_TAG in value:
        return tuple(_decode(item, None) for item in value[TUPLE_TAG])
    return {key: _decode(item, None) for key, item in value.items()}


def _restored_generator(state: dict, current: Any) -> np.random.Generator:
    """Reuse the live generator when possible, so anything sharing it sees the restored stream too."""
    if isinstance(current, np.random.Generator) and type(current.bit_generator).__name__ == state["bit_generator"]:
        current.bit_generator.state = state
        return current
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)
