"""Presets: the experiment files Menger ships (`menger/presets`) and those a plug-in algorithm ships beside its
spec; `menger presets` lists them with their summaries."""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from menger import registry


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


def list_presets() -> dict[str, str]:
    """Preset name -> its summary: the opening comment's first line, or, where that line breaks off
    mid-sentence (it ends in a comma or a word), the comment up to its first full stop or colon."""
    out = {}
    for path in sorted(preset_files().values(), key=lambda p: p.stem):
        lines = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            lines.append(line.lstrip("# ").strip())
        summary = lines[0] if lines else ""
        if len(lines) > 1 and summary.endswith((",", ";")):
            text = " ".join(lines)
            end = re.search(r"[.:]\s", text)
            summary = text[:end.start()] if end else text
        out[path.stem] = summary
    return out
