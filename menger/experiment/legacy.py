"""Keys and module paths of earlier versions, moved to where they live now, with a warning naming the new one:
run directories written by those versions keep loading, and old experiment files and --set overrides keep
working."""
from __future__ import annotations

import logging
import warnings

log = logging.getLogger("menger.config")

# Where each key of the flat `runtime` section of earlier versions lives now. Run directories written by those
# versions keep loading, and old experiment files and --set overrides keep working, with a warning naming the new key.
LEGACY_RUNTIME_KEYS = {
    "ray_address": "ray.address", "ray_actor_cpus": "ray.actor_cpus", "ray_actor_gpus": "ray.actor_gpus",
    "max_policy_lag": "coordination.max_policy_lag", "slots_per_actor": "coordination.slots_per_actor",
    "batch_unrolls": "coordination.batch_unrolls",
    "heartbeat_timeout_s": "supervision.heartbeat_timeout_s", "startup_grace_s": "supervision.startup_grace_s",
    "no_actor_deadline_s": "supervision.no_actor_deadline_s", "max_restarts": "supervision.max_restarts",
    "inference_batch": "inference.batch", "inference_timeout_ms": "inference.timeout_ms",
    "device": "learner.device", "amp": "learner.amp", "learner_threads": "learner.threads",
    "learners": "learner.count", "collective_timeout_s": "learner.collective_timeout_s",
}
# Keys that were strings and are sections now: a plain value is the section's `mode`.
LEGACY_MODE_KEYS = {"coordination": "coordination.mode", "inference": "inference.mode"}


def _warn_moved(old: str, new: str) -> None:
    log.warning("config key '%s' has moved to '%s'; the old name still works, but write the new one", old, new)


def _moved_provider_modules() -> dict[str, str]:
    """Module paths of earlier versions: the env providers (the applications) lived at `menger.envs.NAME`; each
    now lives where its `menger.env_providers` entry point says."""
    from importlib.metadata import entry_points

    return {f"menger.envs.{entry.name}": entry.value.split(":")[0]
            for entry in entry_points(group="menger.env_providers")}


def _migrate_module(value, moved: dict[str, str]):
    if isinstance(value, str):
        for old, new in moved.items():
            if value == old or value.startswith((old + ".", old + ":")):
                return new + value[len(old):]
    return value


def migrate_legacy_keys(data: dict) -> dict:
    """Experiment data with the keys and module paths of earlier versions moved to where they live now: the flat
    `runtime` keys into their sections (see the table), the applications' modules out of `menger.envs`."""
    data = dict(data)
    for section, key in (("env", "id"), ("model", "network")):
        value = data.get(section, {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and value.startswith("menger.envs."):
            data[section] = {**data[section], key: _migrate_module(value, _moved_provider_modules())}
    runtime = data.get("runtime")
    if not isinstance(runtime, dict):
        return data
    runtime = dict(runtime)
    for old, new in {**LEGACY_MODE_KEYS, **LEGACY_RUNTIME_KEYS}.items():  # modes first: they become sections
        if old not in runtime or (old in LEGACY_MODE_KEYS and isinstance(runtime[old], dict)):
            continue
        section, key = new.split(".")
        value = runtime.pop(old)  # for a mode key, `old` is the section's own name
        if not isinstance(runtime.get(section, {}), dict):
            runtime[old] = value
            continue  # a malformed section: from_dict names it
        runtime[section] = {**runtime.get(section, {}), key: value}
        _warn_moved(f"runtime.{old}", f"runtime.{new}")
    return {**data, "runtime": runtime}


def migrate_legacy_override(override: str) -> str:
    """`runtime.OLD=value` -> `runtime.NEW=value` for the keys in the table; anything else unchanged."""
    dotted, separator, value = override.partition("=")
    names = dotted.strip().split(".")
    if not separator or len(names) != 2 or names[0] != "runtime":
        return override
    new = LEGACY_RUNTIME_KEYS.get(names[1]) or LEGACY_MODE_KEYS.get(names[1])
    if new is None:
        return override
    _warn_moved(dotted.strip(), f"runtime.{new}")
    return f"runtime.{new}={value}"


# Names that lived here in earlier versions: each algorithm's section moved to its folder (menger.algorithms).
_MOVED = {"PPOConfig": "menger.algorithms.ppo.spec", "VTraceConfig": "menger.algorithms.impala.spec",
          "A3CConfig": "menger.algorithms.a3c.spec", "ApexConfig": "menger.algorithms.apex.spec",
          "GorilaConfig": "menger.algorithms.gorila.spec", "R2D2Config": "menger.algorithms.r2d2.spec",
          "SACConfig": "menger.algorithms.sac.spec"}


def moved_name(name: str):
    """A name `menger.experiment` no longer defines: the class where it moved (with a DeprecationWarning)."""
    if name in _MOVED:
        import importlib

        warnings.warn(f"menger.experiment.{name} has moved to {_MOVED[name]}.{name}; the old path works for this "
                      "release only", DeprecationWarning, stacklevel=3)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'menger.experiment' has no attribute {name!r}")
