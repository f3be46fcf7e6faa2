"""`extends:` in an experiment file: start from a preset or another file and change only what differs.

    # my-cartpole.yaml
    extends: cartpole-ppo          # a preset name, or a path (relative to this file's folder)
    ppo: {lr: 0.001}               # deep-merged over the base: ppo.gamma and the rest stay the preset's

A mapping in the file merges key by key into the base's mapping; anything else (a number, a string, a list)
replaces the base's value. A base may extend another base (a chain); a chain that comes back to a file it already
read is refused, naming the chain. A file that extends and sets no `name:` is named after itself (its runs go to
`runs/<file stem>-TIME`). `--set` overrides apply after the whole chain is merged.
"""
from __future__ import annotations

from pathlib import Path

from menger.config import ConfigError, load_yaml
from menger.experiment.legacy import migrate_legacy_keys
from menger.experiment.presets import list_presets, preset_files

EXTENDS_KEY = "extends"


def deep_merge(base: dict, over: dict) -> dict:
    """`over` merged into a copy of `base`: mappings key by key (recursively), every other value replaced."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def resolve_extends(data: dict, origin: Path | None = None) -> dict:
    """`data` (read from the file `origin`, or given in code when None) with its `extends:` chain merged under it;
    data without `extends:` comes back as it is (legacy keys migrated)."""
    chain = [_label(origin)] if origin is not None else []
    seen = [origin.resolve()] if origin is not None else []
    return _resolve(migrate_legacy_keys(data), origin, chain, seen)


def _resolve(data: dict, origin: Path | None, chain: list[str], seen: list[Path]) -> dict:
    if EXTENDS_KEY not in data:
        return data
    reference = data[EXTENDS_KEY]
    where = f"in {origin}" if origin is not None else "in the experiment"
    if not isinstance(reference, str) or not reference.strip():
        raise ConfigError(f"'{EXTENDS_KEY}' {where} must be a preset name or a YAML file path, got {reference!r}; "
                          f"write for example '{EXTENDS_KEY}: cartpole-ppo'")
    path = base_file(reference.strip(), origin)
    label = _label(path, reference.strip())
    if path.resolve() in seen:
        cycle = " -> ".join([*chain, label])
        raise ConfigError(f"'{EXTENDS_KEY}' goes round in a circle: {cycle}; remove the '{EXTENDS_KEY}:' key of one "
                          "of these files")
    base = _resolve(migrate_legacy_keys(load_yaml(path)), path, [*chain, label], [*seen, path.resolve()])
    own = {key: value for key, value in data.items() if key != EXTENDS_KEY}
    if origin is not None and "name" not in own:
        own["name"] = origin.stem  # a file's runs are named after it, not after its base
    return deep_merge(base, own)


def base_file(reference: str, origin: Path | None) -> Path:
    """The file `extends: reference` names: a path (relative to the extending file's folder, or to the current
    one), else a preset's file."""
    folder = origin.parent if origin is not None else Path.cwd()
    candidate = Path(reference).expanduser()
    candidate = candidate if candidate.is_absolute() else folder / candidate
    if candidate.is_file():
        return candidate
    presets = preset_files()
    if reference in presets:
        return presets[reference]
    import difflib

    close = difflib.get_close_matches(reference, list(presets), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f" (in {origin})" if origin is not None else ""
    raise ConfigError(f"'{EXTENDS_KEY}: {reference}'{where} is neither a preset nor a file: no {candidate}{hint} "
                      f"(presets: {', '.join(list_presets())})")


def _label(path: Path, reference: str | None = None) -> str:
    presets = preset_files()
    name = path.stem
    return name if presets.get(name) == path else str(reference or path)
