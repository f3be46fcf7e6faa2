"""Presets: the experiment files Menger ships (`menger/presets`) and those a plug-in algorithm ships beside its
spec; `menger presets` lists them with their summaries."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from menger import registry
from menger.config import ConfigError


def preset_dir() -> Path:
    return Path(str(resources.files("menger") / "presets"))


def preset_files() -> dict[str, Path]:
    """Preset name -> its file: Menger's own (`menger/presets`), then those a plug-in algorithm ships in the
    `presets/` folder beside its spec (a name Menger already has is not replaced)."""
    files = {path.stem: path for path in sorted(preset_dir().glob("*.yaml"))}
    for algorithm in registry.all_algorithms():
        folder = algorithm.preset_dir
        for path in sorted(folder.glob("*.yaml")) if folder is not None else ():
            files.setdefault(path.stem, path)
    return files


SUMMARY_LIMIT = 240  # characters: past this, a summary is cut back to a phrase its first line ends


def list_presets() -> dict[str, str]:
    """Preset name -> its summary: a whole phrase of the opening comment (`summary`)."""
    out = {}
    for path in sorted(preset_files().values(), key=lambda p: p.stem):
        lines = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            lines.append(line.lstrip("# ").strip())
        out[path.stem] = summary(lines)
    return out


def summary(lines: list[str]) -> str:
    """The opening comment's first line when it ends a phrase (at `.`, `:`, `;`, `!`, `?`, or the comment's end);
    else the comment up to the end of the phrase the line breaks off in, or, where that runs past SUMMARY_LIMIT
    characters, the first line up to its last phrase end. Phrase ends inside brackets do not count, and a summary
    never ends in the middle of one."""
    if not lines:
        return ""
    first = lines[0]
    if len(lines) == 1 or first.endswith((".", "!", "?")):
        return first
    if first.endswith((":", ";")):
        return first[:-1]
    text = " ".join(line for line in lines if line)
    ends = _phrase_ends(text)
    forward = next((end for end in ends if end >= len(first)), len(text))
    if forward <= SUMMARY_LIMIT:
        return text[:forward].rstrip(":;, ")
    back = [end for end in ends if end < len(first)]
    return text[:back[-1]].rstrip(":;, ") if back else text[:forward].rstrip(":;, ")


def _phrase_ends(text: str) -> list[int]:
    """Where a phrase ends: after `.`, `:`, `;`, `!` or `?` followed by a space, outside brackets (a full stop is
    kept, a colon or semicolon is not part of the phrase)."""
    ends, depth = [], 0
    for index, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}" and depth > 0
        if depth == 0 and char in ".:;!?" and text[index + 1:index + 2] == " ":
            ends.append(index + 1 if char in ".!?" else index)
    return ends


def generic_preset(algo: str) -> str:
    """The preset named after the algorithm (`ppo`, `apex`, ...: any env, set with env.id), for
    `menger train --algo ALGO`; a ConfigError naming what exists where there is none."""
    import difflib

    if algo not in registry.names():
        close = difflib.get_close_matches(algo, registry.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown algorithm {algo!r}{hint} (algorithms: {', '.join(registry.names())})")
    if algo in preset_files():
        return algo
    generic = [name for name in registry.names() if name in preset_files()]
    own = registry.get(algo).presets
    raise ConfigError(f"{algo} has no generic preset to train on any env (those that do: {', '.join(generic)}); "
                      f"start from one of its own presets instead: menger train {own[0] if own else 'PRESET'} "
                      f"--env ID" + (f" (its presets: {', '.join(own)})" if own else ""))
