"""The tune directory's records: `lineage.jsonl` (one record per event of a population), the picture of each
member's score and values against its frames (`lineage.png`), and the atomic JSON writes every file of the
directory is made with."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from menger.extras import require

LINEAGE_FILE = "lineage.jsonl"


def write_json(path: Path, data) -> None:
    """`data` as `path`, written whole or not at all (a temporary file, fsynced, then renamed)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


# ----- the lineage and its picture ------------------------------------------------------------------------------
def read_lineage(out_dir: str | Path) -> list[dict]:
    path = Path(out_dir) / LINEAGE_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    return out


def schedules(records: list[dict]) -> dict[int, list[tuple[int, dict, float | None]]]:
    """Each member's hyperparameter schedule from its lineage: [(frames, values, score)] at its start, at each
    ready and after each exploit."""
    out: dict[int, list] = {}
    for r in records:
        if r["event"] == "start":
            out.setdefault(r["member"], []).append((0, r["values"], None))
        elif r["event"] == "ready":
            out.setdefault(r["member"], []).append((r["frames"], r["values"], r["score"]))
        elif r["event"] == "exploit":
            out.setdefault(r["member"], []).append((r["frames"], r["values"], r["source_score"]))
    return out


def plot_lineage(out_dir: str | Path) -> Path:
    """`lineage.png`: each member's score and each tuned value against its env frames; a copy is a dashed jump
    from the source's point."""
    require("matplotlib", "plot", "the lineage plot of `menger tune --population` (lineage.png)")
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    records = read_lineage(out_dir)
    tracks = schedules(records)
    keys = sorted({k for points in tracks.values() for _, values, _ in points for k in values})
    figure = Figure(figsize=(7.5, 2.6 * (1 + len(keys))), layout="constrained")
    axes = figure.subplots(1 + len(keys), 1, sharex=True, squeeze=False)[:, 0]
    colours = [f"C{i % 10}" for i in range(len(tracks))]
    for (member, points), colour in zip(sorted(tracks.items()), colours):
        segments = _segments(points)
        for i, segment in enumerate(segments):
            frames = [p[0] for p in segment]
            label = f"member {member}" if i == 0 else None
            scores = [(f, s) for f, _, s in segment if s is not None and math.isfinite(s)]
            if scores:
                axes[0].plot(*zip(*scores), color=colour, marker=".", label=label)
            for ax, key in zip(axes[1:], keys):
                ax.step(frames, [p[1].get(key) for p in segment], where="post", color=colour, marker=".")
    for r in records:
        if r["event"] == "exploit":
            for ax in axes[1:]:
                ax.axvline(r["frames"], color="0.85", linewidth=0.6, zorder=0)
    axes[0].set_ylabel(records[0].get("metric", "score") if records else "score")
    axes[0].set_title(f"population-based training: {out_dir.resolve().name}")
    axes[0].legend(fontsize=7, ncol=4)
    for ax, key in zip(axes[1:], keys):
        ax.set_ylabel(key)
        if all(isinstance(p[1].get(key), (int, float)) and p[1].get(key) > 0
               for points in tracks.values() for p in points):
            ax.set_yscale("log")
    axes[-1].set_xlabel("env frames (per member)")
    destination = out_dir / "lineage.png"
    temporary = destination.with_name(".lineage.png.tmp")
    figure.savefig(temporary, format="png", dpi=110)
    os.replace(temporary, destination)
    return destination


def _segments(points: list[tuple]) -> list[list[tuple]]:
    """A member's points cut where an exploit moved it (its frames jump), so a copy is not drawn as training."""
    out, current = [], []
    for point in points:
        if current and point[0] < current[-1][0]:
            out.append(current)
            current = []
        current.append(point)
    return out + [current] if current else out
