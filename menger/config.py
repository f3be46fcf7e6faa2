"""Frozen, documented, validated configuration dataclasses.

Every component declares its own small frozen dataclass; each field says what it means through ``field(doc=...)``
and may carry ``choices`` or a ``min``/``max`` range. Plain data (YAML, ``--set a.b=c`` overrides) becomes a config
only through :func:`from_dict`, which refuses anything it does not understand and says what to change::

    @dataclass(frozen=True)
    class PPOConfig:
        clip: float = field(0.2, doc="PPO ratio clipping epsilon.", min=0.0, max=1.0)
        hidden: tuple[int, ...] = field((64, 64), doc="Hidden layer widths of the MLP torso.")

    data = apply_overrides(load_yaml("ppo.yaml"), ["ppo.clip=0.1"])
    cfg = from_dict(ExperimentConfig, data)          # ConfigError: unknown key 'ppo.clip_eps'; did you mean ...

Cross-field rules live in the dataclass's own ``__post_init__`` and raise :class:`ConfigError`; a config built
directly in code can call :func:`validate` there to get the same per-field checks as one built from data.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import yaml

__all__ = [
    "ConfigError",
    "apply_overrides",
    "describe",
    "dump_yaml",
    "field",
    "from_dict",
    "load_yaml",
    "to_dict",
    "validate",
]

_NO_DEFAULT: Any = dataclasses.MISSING


class ConfigError(ValueError):
    """A config value is unknown, missing, mistyped or out of range.

    ``problems`` holds every problem found (each naming its full dotted key); the message shows the first one
    on its own line so that it is read first, and lists the others below it.
    """

    def __init__(self, problems: str | list[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        first, rest = self.problems[0], self.problems[1:]
        if rest:
            first += f"\n{len(rest)} more problem(s):\n" + "\n".join(f"  - {problem}" for problem in rest)
        super().__init__(first)


def field(
    default: Any = _NO_DEFAULT,
    *,
    doc: str,
    choices: tuple | None = None,
    min: float | None = None,  # noqa: A002 - the names users read in the docs
    max: float | None = None,  # noqa: A002
    default_factory: Any = _NO_DEFAULT,
) -> Any:
    """A dataclass field whose documentation and allowed values travel with it (checked by from_dict / validate)."""
    if not doc or not doc.strip():
        raise TypeError("field() needs a non-empty doc= string: every config key is documented for `--help`")
    if choices is not None and not isinstance(choices, tuple):
        raise TypeError(f"field(choices=...) must be a tuple, got {type(choices).__name__}")
    metadata = {"doc": doc.strip(), "choices": choices, "min": min, "max": max}
    factory = _NO_DEFAULT if default_factory is None else default_factory
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


# ---------------------------------------------------------------------------------------------------------------
# Building configs from plain data


def from_dict(cls: type, data: dict | None, *, path: str = "") -> Any:
    """Build the (nested) frozen dataclass ``cls`` from plain data, or raise ConfigError naming each bad key."""
    _require_dataclass(cls)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(
            f"'{path or '<top level>'}' must be a mapping of keys to values, got {_describe_value(data)}; "
            f"write it as 'key: value' lines in YAML"
        )
    fields = _init_fields(cls)
    hints = _type_hints(cls)
    problems = _unknown_key_problems(data, fields, path)
    values: dict[str, Any] = {}
    for name, fld in fields.items():
        key = _join(path, name)
        if name not in data:
            if fld.default is _NO_DEFAULT and fld.default_factory is _NO_DEFAULT:
                problems.append(f"missing required key '{key}' ({_type_name(hints[name])}): {_doc(fld)}; "
                                f"set it in the YAML file or with --set {key}=...")
            continue
        try:
            values[name] = _check_field(data[name], hints[name], fld, key)
        except ConfigError as error:
            problems.extend(error.problems)
    if problems:
        raise ConfigError(problems)
    return _construct(cls, values, path)


def validate(cfg: Any, *, path: str = "") -> Any:
    """Check every field of an already built config (types, ranges, choices), recursively; return it unchanged.

    Call it from ``__post_init__`` so that a config built directly in code is held to the same rules as one built
    from YAML.
    """
    _require_dataclass(type(cfg))
    hints = _type_hints(type(cfg))
    problems: list[str] = []
    for name, fld in _init_fields(type(cfg)).items():
        try:
            _check_field(getattr(cfg, name), hints[name], fld, _join(path, name))
        except ConfigError as error:
            problems.extend(error.problems)
    if problems:
        raise ConfigError(problems)
    return cfg


def _construct(cls: type, values: dict[str, Any], path: str) -> Any:
    """Instantiate ``cls``; a cross-field rule broken in its ``__post_init__`` is reported with the key's prefix."""
    try:
        return cls(**values)
    except ValueError as error:  # ConfigError is a ValueError
        problems = error.problems if isinstance(error, ConfigError) else [str(error)]
        prefix = f"in '{path}': " if path else ""
        raise ConfigError([prefix + problem for problem in problems]) from error


def _unknown_key_problems(data: dict, fields: dict[str, dataclasses.Field], path: str) -> list[str]:
    valid = list(fields)
    problems = []
    for key in data:
        if key in fields:
            continue
        if not isinstance(key, str):
            problems.append(f"key {key!r} under '{path or '<top level>'}' is not a string; config keys are names")
            continue
        suggestion = difflib.get_close_matches(key, valid, n=1)
        hint = f"; did you mean '{_join(path, suggestion[0])}'?" if suggestion else ""
        listing = ", ".join(_join(path, name) for name in valid) or "(none)"
        problems.append(f"unknown key '{_join(path, key)}'{hint} valid keys: {listing}")
    return problems


def _check_field(value: Any, annotation: Any, fld: dataclasses.Field, key: str) -> Any:
    """Convert ``value`` to the field's type and check its choices and range; return the converted value."""
    value = _convert(value, annotation, key)
    choices, low, high = (fld.metadata.get(name) for name in ("choices", "min", "max"))
    if choices is not None and value is not None and value not in choices:
        options = ", ".join(repr(choice) for choice in choices)
        close = difflib.get_close_matches(str(value), [str(choice) for choice in choices], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"'{key}' = {value!r} is not one of {options}{hint}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if low is not None and value < low or high is not None and value > high:
            raise ConfigError(f"'{key}' = {value!r} is out of range; choose a value in {_range_text(low, high)}")
    return value


def _convert(value: Any, annotation: Any, key: str) -> Any:
    """Return ``value`` as an instance of ``annotation`` or raise ConfigError; no lossy coercion is done."""
    if annotation is Any:
        return value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return _convert_union(value, args, annotation, key)
    if origin is Literal:
        if any(value == arg and type(value) is type(arg) for arg in args):
            return value
        raise ConfigError(f"'{key}' = {value!r} is not one of {', '.join(repr(arg) for arg in args)}")
    if origin in (tuple, list) or annotation in (tuple, list):
        return _convert_sequence(value, origin or annotation, args, annotation, key)
    if origin is dict or annotation is dict:
        return _convert_mapping(value, args, key)
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return validate(value, path=key)
        return from_dict(annotation, value, path=key)
    return _convert_scalar(value, annotation, key)


def _convert_union(value: Any, args: tuple, annotation: Any, key: str) -> Any:
    if value is None and type(None) in args:
        return None
    candidates = [arg for arg in args if arg is not type(None)]
    errors = []
    for candidate in candidates:
        try:
            return _convert(value, candidate, key)
        except ConfigError as error:
            errors.append(error)
    if len(candidates) == 1:  # Optional[X]: the inner error is the most precise
        raise errors[0]
    words = [str(arg) for candidate in candidates if typing.get_origin(candidate) is Literal
             for arg in typing.get_args(candidate)]
    close = difflib.get_close_matches(value, words, n=1) if isinstance(value, str) else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"'{key}' must be {_union_name(candidates)}, got {_describe_value(value)}{hint}")


_PLAIN_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _union_name(args) -> str:
    """What a union accepts, in words: `Union[int, Literal["auto"]]` is "an integer or 'auto'"."""
    words = []
    for arg in args:
        if typing.get_origin(arg) is Literal:
            words += [repr(choice) for choice in typing.get_args(arg)]
        else:
            words.append(_PLAIN_NAMES.get(arg, _type_name(arg)))
    return " or ".join(words)


def _convert_sequence(value: Any, origin: type, args: tuple, annotation: Any, key: str) -> Any:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"'{key}' must be a list ({_type_name(annotation)}), got {_describe_value(value)}; "
                          f"write it as [a, b, ...]")
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            raise ConfigError(f"'{key}' must have exactly {len(args)} items ({_type_name(annotation)}), "
                              f"got {len(value)}")
        item_types = list(args)
    else:
        item_types = [args[0] if args else Any] * len(value)
    items = [_convert(item, item_type, f"{key}[{index}]")
             for index, (item, item_type) in enumerate(zip(value, item_types))]
    return origin(items)


def _convert_mapping(value: Any, args: tuple, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a mapping, got {_describe_value(value)}; write it as 'name: value' lines")
    key_type, value_type = args if args else (Any, Any)
    return {_convert(name, key_type, f"{key} (a key)"): _convert(item, value_type, _join(key, str(name)))
            for name, item in value.items()}


def _convert_scalar(value: Any, annotation: Any, key: str) -> Any:
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"'{key}' is {value!r}: no setting takes a value that is not finite; set a "
                                  "finite number")
            return float(value)
        raise ConfigError(f"'{key}' must be a number (float), got {_describe_value(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"'{key}' must be an integer, got {_describe_value(value)}"
                          + ("; drop the fractional part" if isinstance(value, float) else ""))
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"'{key}' must be true or false, got {_describe_value(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"'{key}' must be a string, got {_describe_value(value)}; quote it in YAML if needed")
    if annotation is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise ConfigError(f"'{key}' must be a path (string), got {_describe_value(value)}")
    if isinstance(annotation, type) and isinstance(value, annotation):
        return value
    raise ConfigError(f"'{key}' has type {_type_name(annotation)}, which configs cannot read from plain data; "
                      f"use int, float, str, bool, Path, Literal, tuple, list, dict or a nested config")


# ---------------------------------------------------------------------------------------------------------------
# Plain data, YAML and overrides


def to_dict(cfg: Any) -> dict:
    """Plain data (dicts, lists, scalars) that round-trips through YAML and :func:`from_dict`."""
    _require_dataclass(type(cfg))
    return _plain(cfg)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {fld.name: _plain(getattr(value, fld.name)) for fld in dataclasses.fields(value) if fld.init}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {name: _plain(item) for name, item in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads '1e-3' as a float, for files and --set values alike, and refuses a key given
    twice in one mapping (PyYAML silently keeps the last one, so an edit lower in a file would hide one above).

    PyYAML follows YAML 1.1, where a float needs a dot ('1.0e-3'); 'lr: 1e-3' would otherwise be a string.
    """

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"the key {key!r} is given twice in one mapping (lines {seen[key] + 1} and "
                                  f"{key_node.start_mark.line + 1}); keep one of them")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass: no object construction


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Return a copy of ``data`` with each ``a.b.c=value`` applied (value parsed as YAML; missing levels created)."""
    result = _deep_copy(data)
    for override in overrides:
        dotted, separator, text = override.partition("=")
        names = dotted.strip().split(".")
        if not separator or not all(name.strip() for name in names):
            raise ConfigError(f"malformed override {override!r}: expected the form key.subkey=value, "
                              f"for example ppo.clip=0.1 or model.hidden=[64,64]")
        try:
            value = _parse_yaml(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"override {override!r}: the value is not valid YAML ({error}); "
                              f"quote strings that contain ':' or brackets") from error
        _set_dotted(result, [name.strip() for name in names], value, override)
    return result


def _set_dotted(data: dict, names: list[str], value: Any, override: str) -> None:
    node = data
    for depth, name in enumerate(names[:-1]):
        child = node.setdefault(name, {})
        if not isinstance(child, dict):
            parent = ".".join(names[: depth + 1])
            raise ConfigError(f"override {override!r}: '{parent}' holds {_describe_value(child)}, not a mapping, "
                              f"so it has no sub-keys; override '{parent}' itself")
        node = child
    node[names[-1]] = value


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {name: _deep_copy(item) for name, item in data.items()}
    if isinstance(data, list):
        return [_deep_copy(item) for item in data]
    return data


def load_yaml(path: str | Path) -> dict:
    """Read a YAML mapping; an empty file is an empty mapping."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror or error}") from error
    try:
        data = _parse_yaml(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from error
    except ConfigError as error:
        raise ConfigError(f"config file {path}: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of keys to values at the top level, "
                          f"got {_describe_value(data)}")
    return data


def dump_yaml(data: dict, path: str | Path) -> None:
    """Write plain data (or a config) as YAML, keys in declaration order."""
    plain = _plain(data)
    Path(path).write_text(yaml.safe_dump(plain, sort_keys=False, default_flow_style=None), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# Documentation


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    """One key of a config schema as `menger config` and the documentation site show it. A section (a nested
    config) has `section=True`, its class name as `type` and no default."""

    key: str
    type: str
    default: str
    limits: str
    doc: str
    section: bool = False


def key_docs(cls: type) -> list[KeyDoc]:
    """Every key of a config dataclass, dotted, in declaration order: each section before its own keys."""
    _require_dataclass(cls)
    return _key_docs(cls, "")


def _key_docs(cls: type, path: str) -> list[KeyDoc]:
    hints = _type_hints(cls)
    rows = []
    for name, fld in _init_fields(cls).items():
        key, annotation = _join(path, name), hints[name]
        if dataclasses.is_dataclass(annotation):
            rows.append(KeyDoc(key, annotation.__name__, "", "", _doc(fld), section=True))
            rows.extend(_key_docs(annotation, key))
            continue
        rows.append(KeyDoc(key, _type_name(annotation), _default_text(fld), _limits_text(fld), _doc(fld)))
    return rows


def describe(cls: type) -> str:
    """A listing of every key (dotted), its type, default, allowed values and doc, for `--help`."""
    lines = []
    for row in key_docs(cls):
        limits = f"  [{row.limits}]" if row.limits else ""
        lines.append(f"{row.key}: {row.type}" if row.section else f"{row.key}: {row.type} = {row.default}{limits}")
        lines.append(f"    {row.doc}")
    return "\n".join(lines)


def _default_text(fld: dataclasses.Field) -> str:
    if fld.default is not _NO_DEFAULT:
        return repr(_plain(fld.default))
    if fld.default_factory is not _NO_DEFAULT:
        return repr(_plain(fld.default_factory()))
    return "(required)"


def _limits_text(fld: dataclasses.Field) -> str:
    choices, low, high = (fld.metadata.get(name) for name in ("choices", "min", "max"))
    parts = []
    if choices is not None:
        parts.append("one of " + ", ".join(repr(choice) for choice in choices))
    if low is not None or high is not None:
        parts.append("in " + _range_text(low, high))
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------------------------
# Small helpers


def _require_dataclass(cls: type) -> None:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"expected a config dataclass, got {cls!r}")


def _init_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {fld.name: fld for fld in dataclasses.fields(cls) if fld.init}


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as error:
        raise TypeError(f"cannot resolve the field types of {cls.__qualname__} ({error}); "
                        f"define config classes at module level") from error


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _doc(fld: dataclasses.Field) -> str:
    return fld.metadata.get("doc") or "(undocumented)"


def _range_text(low: float | None, high: float | None) -> str:
    return f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"


def _describe_value(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin is not None:
        inner = ", ".join("..." if arg is Ellipsis else _type_name(arg) for arg in args)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    return getattr(annotation, "__name__", repr(annotation))
