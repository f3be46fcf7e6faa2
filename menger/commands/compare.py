"""``menger plot RUN... [--group NAME=RUN,RUN]``: several runs, or groups of runs, in one figure.

A group is the runs of one setting over several seeds: a parent directory of run directories (what
``menger train EXP --seeds 1 2 3`` writes: ``PARENT/seed-1``, ...), or ``--group NAME=RUN,RUN,...``; a run given on
its own is a group of one. Each run's curve (a metric against env frames) is interpolated linearly onto one grid of
env frames shared by every group; a group is drawn as its runs (thin), their mean, and a band: the 95 %
percentile-bootstrap interval of the mean over runs (``--band bootstrap``, the default) or the runs' min-max
(``--band minmax``). The mean and band are drawn only where every run of the group has data, so a run that stopped
early never pulls the mean towards the others' last values. The legend says which band it is.

The metric: ``eval/return_mean`` at each deterministic evaluation when every run has some, else the mean return
of the last episodes (``episode/return_mean``); ``--metric KEY`` picks any key of ``metrics.jsonl``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from menger.commands.bench import bootstrap_interval
from menger.commands.plot import (CONFIG_FILE, METRICS_FILE, PLOT_FILE, PLOT_PURPOSE, NoMetricsError,
                                  _save_atomically, evaluation_points, load_metrics, metric_column,
                                  read_target_return)
from menger.extras import require

EVAL_METRIC, EPISODE_METRIC = "eval/return_mean", "episode/return_mean"
BANDS = {"bootstrap": "95 % bootstrap interval of the mean", "minmax": "min-max over runs"}
COMPARE_FILE = "compare.png"
GRID_POINTS = 200


@dataclass(frozen=True)
class Group:
    """Runs of one setting (one seed each), drawn as one mean and band."""

    name: str
    runs: tuple[Path, ...]


def _natural(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def group_runs(folder: Path) -> list[Path]:
    """The run directories directly inside `folder` (those with a metrics.jsonl), seed-2 before seed-10."""
    if not folder.is_dir():
        return []
    return sorted((child for child in folder.iterdir() if (child / METRICS_FILE).is_file()), key=_natural)


def is_group(path: Path) -> bool:
    """A folder of runs (no metrics of its own, runs inside it)."""
    return path.is_dir() and not (path / METRICS_FILE).exists() and bool(group_runs(path))


def _runs_of(text: str) -> list[Path]:
    path = Path(text)
    if is_group(path):
        return group_runs(path)
    if not (path / METRICS_FILE).is_file():
        raise NoMetricsError(f"{path} is neither a run directory (it has no {METRICS_FILE}) nor a folder of runs "
                             "(like the one `menger train EXP --seeds 1 2 3` writes); give run directories that "
                             "`menger train` printed, or their parent")
    return [path]


def parse_groups(paths: Sequence[str], named: Sequence[str] = ()) -> list[Group]:
    """Groups from the command line: each path (a folder of runs is a group named after it, a run a group of one),
    then each `NAME=RUN,RUN,...` (a folder of runs in the list adds all its runs)."""
    groups = [Group(Path(path).resolve().name, tuple(_runs_of(path))) for path in paths]
    for text in named:
        name, separator, members = text.partition("=")
        if not separator or not name.strip() or not members.strip():
            raise ValueError(f"--group {text!r}: write NAME=RUN,RUN,... (a name, '=', run directories separated by "
                             "commas)")
        runs = [run for member in members.split(",") if member.strip() for run in _runs_of(member.strip())]
        groups.append(Group(name.strip(), tuple(runs)))
    if not groups:
        raise ValueError("menger plot: give at least one run directory, a folder of runs, or --group NAME=RUN,RUN")
    return groups


def run_curve(run_dir: Path, metric: str) -> np.ndarray:
    """[(env frames, value)] at the records where `metric` has a value (a new evaluation, for eval/return_mean)."""
    records = load_metrics(run_dir)
    values = evaluation_points(records) if metric == EVAL_METRIC else metric_column(records, metric)
    frames = metric_column(records, "step")
    shown = np.isfinite(frames) & np.isfinite(values)
    return np.stack([frames[shown], values[shown]], axis=1) if shown.any() else np.zeros((0, 2))


def choose_metric(groups: Sequence[Group], metric: str | None = None) -> str:
    """`metric`, or the deterministic evaluation where every run has one, else the episodes' mean return."""
    if metric:
        return metric
    runs = [run for group in groups for run in group.runs]
    return EVAL_METRIC if all(len(run_curve(run, EVAL_METRIC)) for run in runs) else EPISODE_METRIC


def on_grid(curve: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The curve interpolated linearly at the grid's frames; NaN outside the frames it spans."""
    values = np.full(len(grid), np.nan)
    if len(curve):
        inside = (grid >= curve[0, 0]) & (grid <= curve[-1, 0])
        values[inside] = np.interp(grid[inside], curve[:, 0], curve[:, 1])
    return values


def mean_and_band(table: np.ndarray, band: str = "bootstrap") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per grid column of `table` [runs, points]: the mean over runs and the band's low and high, NaN in a column
    where any run has no value."""
    if band not in BANDS:
        raise ValueError(f"band {band!r}: choose one of {', '.join(BANDS)}")
    points = table.shape[1]
    mean, low, high = (np.full(points, np.nan) for _ in range(3))
    for column in range(points):
        values = table[:, column]
        if len(values) and np.isfinite(values).all():
            mean[column] = values.mean()
            low[column], high[column] = bootstrap_interval(values.tolist()) if band == "bootstrap" else (values.min(),
                                                                                                  values.max())
    return mean, low, high


def draw_comparison(curves: dict[str, list[np.ndarray]], metric: str, band: str = "bootstrap",
                    target_return: float | None = None, points: int = GRID_POINTS):
    """One axes: for each group (name -> its runs' curves) the runs thin, the mean and the band, on one shared
    grid of env frames."""
    require("matplotlib", "plot", PLOT_PURPOSE)
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    spans = [curve[[0, -1], 0] for runs in curves.values() for curve in runs if len(curve)]
    if not spans:
        raise NoMetricsError(f"no run has a value of {metric} yet; train longer, or pick another --metric")
    start, end = min(s[0] for s in spans), max(s[1] for s in spans)
    grid = np.linspace(start, end, points if end > start else 1)
    figure = Figure(figsize=(9, 5.5))
    axes = figure.subplots(gridspec_kw=dict(left=0.09, right=0.98, bottom=0.1, top=0.9))
    axes.set_title(f"{metric} vs env frames: mean over runs, band: {BANDS[band]}")
    axes.set_xlabel("env frames")
    axes.set_ylabel(metric)
    axes.xaxis.set_major_formatter(EngFormatter())
    axes.grid(alpha=0.3)
    colors = [f"C{index % 10}" for index in range(len(curves))]
    for color, (name, runs) in zip(colors, curves.items()):
        for curve in runs:
            if len(runs) > 1 and len(curve):
                axes.plot(curve[:, 0], curve[:, 1], color=color, alpha=0.25, linewidth=0.8,
                          marker="." if len(curve) < 30 else None)
        mean, low, high = mean_and_band(np.stack([on_grid(curve, grid) for curve in runs]), band)
        label = f"{name} ({len(runs)} run{'s' if len(runs) != 1 else ''})"
        if len(grid) == 1:  # every run logged once, at the same frames: a point and its interval
            axes.errorbar(grid, mean, yerr=[mean - low, high - mean], color=color, marker="o", capsize=4,
                          label=f"{label}, bar: {BANDS[band]}" if len(runs) > 1 else label)
            continue
        axes.plot(grid, mean, color=color, label=label)
        if len(runs) > 1:
            axes.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0,
                              label=f"{name}: {BANDS[band]}")
    if target_return is not None and "return" in metric:
        axes.axhline(target_return, color="tab:green", linestyle="--", label=f"target {target_return:g}")
    axes.legend(loc="best", fontsize=8)
    return figure


def plot_comparison(paths: Sequence[str], groups: Sequence[str] = (), out: str | os.PathLike | None = None,
                    metric: str | None = None, band: str = "bootstrap") -> Path:
    """Draw the groups of `paths` and `groups` (module doc) in one figure and return where it was written:
    `out`, else PLOT_FILE in the folder of runs when only one is given, else COMPARE_FILE here."""
    chosen = parse_groups(paths, groups)
    metric = choose_metric(chosen, metric)
    curves = {}
    for group in chosen:
        name, number = group.name, 2
        while name in curves:  # two folders called the same
            name, number = f"{group.name} ({number})", number + 1
        curves[name] = [run_curve(run, metric) for run in group.runs]
    targets = {read_target_return(run / CONFIG_FILE) for group in chosen for run in group.runs}
    figure = draw_comparison(curves, metric, band, target_return=targets.pop() if len(targets) == 1 else None)
    if out is None:
        single = len(paths) == 1 and not groups and is_group(Path(paths[0]))
        out = Path(paths[0]) / PLOT_FILE if single else Path(COMPARE_FILE)
    _save_atomically(figure, Path(out))
    return Path(out)
