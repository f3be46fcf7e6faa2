"""The `tune:` section of an experiment: which keys `menger tune` searches, and over what, checked before anything
starts (every key names a config value, every range is well formed, and each end of it makes a valid
experiment)."""
from __future__ import annotations

from dataclasses import dataclass

from menger.config import ConfigError, apply_overrides, from_dict, to_dict


TUNE_KINDS = ("log_uniform", "uniform", "int_uniform", "choice")


@dataclass(frozen=True)
class Tuned:
    """One tuned key of `tune:`: its distribution (`kind`) and its bounds (`low`, `high`) or `choices`."""

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple = ()


def tune_spec(config) -> list[Tuned]:
    """The experiment's `tune:` section as `Tuned` entries, refused (ConfigError, every problem at once) where a
    key names no config value, a range is malformed, or a value it may take is one the config refuses."""
    data, problems, spec = to_dict(config), [], []
    data.pop("tune", None)
    for key, entry in _flat_tune(config.tune).items():
        where = f"tune.{key}"
        leaf = _leaf(data, str(key))
        if leaf is _MISSING or isinstance(leaf, dict):
            import difflib

            close = difflib.get_close_matches(str(key), _leaf_keys(data), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(f"{where}: {key!r} names no config value{hint} (`menger config` lists them)")
            continue
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in TUNE_KINDS:
            problems.append(f"{where}: give one distribution, e.g. {{log_uniform: [1e-4, 1e-2]}}; one of "
                            f"{', '.join(TUNE_KINDS)}; got {entry!r}")
            continue
        kind, bounds = next(iter(entry.items()))
        if kind == "choice":
            if not isinstance(bounds, list) or len(bounds) < 2:
                problems.append(f"{where}: choice needs a list of at least two values; got {bounds!r}")
                continue
            tuned, values = Tuned(str(key), kind, choices=tuple(bounds)), list(bounds)
        else:
            numeric = isinstance(bounds, list) and len(bounds) == 2 and all(
                isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
            if not numeric or not bounds[0] < bounds[1]:
                problems.append(f"{where}: {kind} needs [low, high] with low < high; got {bounds!r}")
                continue
            if kind == "log_uniform" and bounds[0] <= 0:
                problems.append(f"{where}: log_uniform needs low > 0; got {bounds!r}")
                continue
            if kind == "int_uniform" and not all(isinstance(b, int) for b in bounds):
                problems.append(f"{where}: int_uniform needs whole numbers; got {bounds!r}")
                continue
            if isinstance(leaf, bool) or not isinstance(leaf, (int, float)) and leaf is not None:
                problems.append(f"{where}: {key} holds {leaf!r}, not a number; tune it with choice")
                continue
            tuned, values = Tuned(str(key), kind, float(bounds[0]), float(bounds[1])), list(bounds)
        for value in values:  # each end of the range (each choice) must make a valid experiment
            try:
                from_dict(type(config), apply_overrides(data, [f"{key}={_yaml_text(value)}"]))
            except ConfigError as exc:
                problems.append(f"{where}: {key}={value!r} is refused by the config: {exc}")
                break
        else:
            spec.append(tuned)
    if problems:
        raise ConfigError(problems)
    return spec


_MISSING = object()


def _flat_tune(tune: dict, prefix: str = "") -> dict:
    """`{ppo.lr: {...}}` and `{ppo: {lr: {...}}}` (what `--set tune.ppo.lr=...` makes) alike: dotted key ->
    distribution."""
    out = {}
    for key, entry in tune.items():
        nested = isinstance(entry, dict) and entry and not any(kind in entry for kind in TUNE_KINDS)
        if nested and all(isinstance(inner, dict) for inner in entry.values()):
            out.update(_flat_tune(entry, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = entry
    return out


def _leaf(data: dict, key: str):
    node = data
    for name in key.split("."):
        if not isinstance(node, dict) or name not in node:
            return _MISSING
        node = node[name]
    return node


def _leaf_keys(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out += _leaf_keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def _yaml_text(value) -> str:
    import json

    return json.dumps(value)
