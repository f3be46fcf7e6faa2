"""``menger plot``: one PNG that answers "is it learning, how fast, and how stale are the actors?".

Reads ``<run_dir>/metrics.jsonl`` (written by ``JsonlLogger``) and draws four panels: return against
env frames (with the stop target from ``<run_dir>/config.yaml``), return against wall-clock time,
throughput, and policy lag. It uses matplotlib's Agg canvas directly, so it never needs a display and
never changes pyplot's global backend for the caller.

A resumed run appends to the same file. Its frames keep counting up; its wall clock may restart at
zero, so each segment's wall time is laid after the previous one and resume points are marked. If a
resume went back to a checkpoint older than the last record, the records it replays supersede the
ones logged after that checkpoint (that training was lost).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import yaml

from menger.extras import require
from menger.logging.jsonl import read_jsonl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"
PLOT_FILE = "plot.png"
EVAL_LABEL = "deterministic evaluation"
PLOT_PURPOSE = "drawing plot.png"


class NoMetricsError(FileNotFoundError):
    """The run directory holds no metrics to plot (yet)."""


def plot_run(run_dir: str | os.PathLike[str], out: str | None = None) -> Path:
    """Draw the run's 2x2 overview and return where it was written (``run_dir/plot.png`` unless ``out``)."""
    run_dir = Path(run_dir)
    records = load_metrics(run_dir)
    figure = draw_run(records, title=run_dir.resolve().name, target_return=read_target_return(run_dir / CONFIG_FILE))
    destination = Path(out) if out is not None else run_dir / PLOT_FILE
    _save_atomically(figure, destination)
    return destination


def load_metrics(run_dir: Path) -> list[dict]:
    """The run's records with replayed stretches resolved; raises NoMetricsError saying what to run."""
    metrics_path = run_dir / METRICS_FILE
    if not run_dir.is_dir():
        raise NoMetricsError(
            f"{run_dir} is not a directory. Pass the run directory that `menger train <preset>` created "
            f"(it holds {METRICS_FILE})."
        )
    if not metrics_path.is_file():
        raise NoMetricsError(
            f"No metrics in {run_dir}: {METRICS_FILE} does not exist yet. Start training with "
            f"`menger train <preset>` (or `menger resume {run_dir}`); it writes {METRICS_FILE} about once a "
            "second, then run `menger plot` again."
        )
    records = read_jsonl(metrics_path)
    if not records:
        raise NoMetricsError(
            f"No metrics in {run_dir}: {metrics_path} is empty, so training has not reported yet. "
            "Wait for the first report (about a second after training starts) and run `menger plot` again."
        )
    return supersede_replayed(records)


def read_target_return(config_path: Path) -> float | None:
    """``stop.target_return`` from the run's config, or None when absent (the plot just lacks the line)."""
    if not config_path.is_file():
        return None
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        warnings.warn(f"could not read {config_path} ({error}); plotting without the target line.", stacklevel=2)
        return None
    stop = config.get("stop") if isinstance(config, dict) else None
    target = stop.get("target_return") if isinstance(stop, dict) else None
    return float(target) if isinstance(target, (int, float)) and not isinstance(target, bool) else None


def supersede_replayed(records: Sequence[Mapping]) -> list[dict]:
    """Drop records that a resume from an older checkpoint replaced (their step was reached again)."""
    kept: list[dict] = []
    for record in records:
        step = record.get("step", 0)
        if kept and step < kept[-1].get("step", 0):
            while kept and kept[-1].get("step", 0) >= step:
                kept.pop()
        kept.append(dict(record))
    return kept


def continuous_wall_time(wall_s: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Wall time that keeps increasing across resumes, and where each resumed segment starts.

    A segment's clock restarts (``time/wall_s`` goes down); it is shifted to begin where the previous
    segment ended. Missing values stay NaN.
    """
    continuous = np.full(wall_s.shape, np.nan)
    offset, previous, resumes = 0.0, None, []
    for index, wall in enumerate(wall_s):
        if not np.isfinite(wall):
            continue
        if previous is not None and wall < previous:
            offset = float(continuous[_last_finite_index(continuous, index)])
            resumes.append(offset)
        continuous[index] = offset + wall
        previous = wall
    return continuous, resumes


def evaluation_points(records: Sequence[Mapping]) -> np.ndarray:
    """``eval/return_mean`` at the records where a new evaluation had just finished, NaN elsewhere: every record
    repeats the last evaluation, which would draw a staircase of stale values."""
    returns, count = metric_column(records, "eval/return_mean"), metric_column(records, "eval/count")
    if not np.isfinite(count).any():  # records written before eval/count existed
        return returns
    fresh = np.isfinite(count) & (count != np.concatenate(([np.nan], count[:-1])))
    return np.where(fresh, returns, np.nan)


def metric_column(records: Sequence[Mapping], key: str) -> np.ndarray:
    """One metric across records as floats; missing keys and nulls (NaN/inf at write time) become NaN."""
    values = [record.get(key) for record in records]
    return np.array([np.nan if value is None else float(value) for value in values], dtype=float)


def draw_run(records: Sequence[Mapping], title: str, target_return: float | None = None) -> Figure:
    """The four panels as a matplotlib Figure (not yet saved)."""
    require("matplotlib", "plot", PLOT_PURPOSE)
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    frames = metric_column(records, "step")
    wall, resumes = continuous_wall_time(metric_column(records, "time/wall_s"))
    resume_frames = [frames[index] for index in _segment_starts(metric_column(records, "time/wall_s"))]
    figure = Figure(figsize=(12, 8))
    figure.suptitle(f"menger run: {title}")
    # Fixed margins that fit short tick labels (EngFormatter keeps them short): the constrained layout engine
    # measured every label twice and took half of the time of the plot `menger train` writes at its end.
    (by_frames, by_wall), (throughput, lag) = figure.subplots(
        2, 2, gridspec_kw=dict(left=0.07, right=0.98, bottom=0.07, top=0.92, wspace=0.2, hspace=0.3))
    returns = {"mean return (last 20 episodes)": metric_column(records, "episode/return_mean")}
    evaluated = evaluation_points(records)
    if np.isfinite(evaluated).any():  # apex, sac, eval.interval_s: the deterministic evaluation
        returns[EVAL_LABEL] = evaluated

    _panel(by_frames, frames, returns, "episode return vs env frames", "env frames", "return", resume_frames)
    _panel(by_wall, wall, returns, "episode return vs wall-clock time", "wall-clock seconds", "return", resumes)
    _panel(throughput, wall, {"actor/fps": metric_column(records, "actor/fps"),
                              "learner/fps": metric_column(records, "learner/fps")},
           "throughput", "wall-clock seconds", "frames / s", resumes)
    _panel(lag, frames, {"mean": metric_column(records, "learner/policy_lag_mean"),
                         "max": metric_column(records, "learner/policy_lag_max")},
           "policy lag", "env frames", "versions behind", resume_frames)
    if target_return is not None:
        for axes in (by_frames, by_wall):
            axes.axhline(target_return, color="tab:green", linestyle="--", label=f"target {target_return:g}")
            axes.legend(loc="lower right")
    for axes in (by_frames, lag):
        axes.xaxis.set_major_formatter(EngFormatter())
    for axes in (throughput, lag):
        axes.set_ylim(bottom=0)  # a halving of throughput or doubling of lag should look like one
    return figure


def _panel(axes: Axes, x: np.ndarray, series: dict[str, np.ndarray], title: str, x_label: str, y_label: str,
           resumes: Sequence[float]) -> None:
    axes.set_title(title)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.grid(alpha=0.3)
    drawn = False
    for label, y in series.items():
        shown = np.isfinite(x) & np.isfinite(y)
        if shown.any():
            marker = "o" if label == EVAL_LABEL else "." if shown.sum() < 30 else None
            axes.plot(x[shown], y[shown], label=label, marker=marker)
            drawn = True
    if not drawn:
        axes.text(0.5, 0.5, "no data yet", transform=axes.transAxes, ha="center", va="center", color="gray")
        return
    for number, position in enumerate(resumes):
        axes.axvline(position, color="gray", linestyle=":", linewidth=1, label="resumed" if number == 0 else None)
    axes.legend(loc="lower right" if "return" in title else "best")


def _segment_starts(wall_s: np.ndarray) -> list[int]:
    starts, previous = [], None
    for index, wall in enumerate(wall_s):
        if np.isfinite(wall):
            if previous is not None and wall < previous:
                starts.append(index)
            previous = wall
    return starts


def _last_finite_index(values: np.ndarray, before: int) -> int:
    return int(np.flatnonzero(np.isfinite(values[:before]))[-1])


def _save_atomically(figure: Figure, destination: Path) -> None:
    """Write next to the destination, then rename, so an image viewer never sees half a PNG."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.partial")
    figure.savefig(partial, format=destination.suffix.lstrip(".") or "png", dpi=100)
    os.replace(partial, destination)
