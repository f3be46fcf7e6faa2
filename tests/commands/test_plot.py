"""`menger plot`: a PNG from a run's metrics, resumed runs, and a clear error when there is nothing yet."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from menger.logging import JsonlLogger
from menger.commands.plot import (
    NoMetricsError,
    continuous_wall_time,
    draw_run,
    evaluation_points,
    metric_column,
    plot_run,
    read_target_return,
    supersede_replayed,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def synthetic_metrics(count: int, first_frame: int = 0) -> list[tuple[dict, int]]:
    rows = []
    for index in range(count):
        frames = first_frame + 1000 * index
        rows.append((
            {
                "time/wall_s": 0.5 * index,
                "time/env_frames": float(frames),
                "actor/fps": 2000.0 + 50 * math.sin(index),
                "learner/fps": 1900.0,
                "learner/policy_lag_mean": 1.0 + 0.2 * math.cos(index),
                "learner/policy_lag_max": 3.0,
                "episode/return_mean": float("nan") if index < 3 else frames / 100,
            },
            frames,
        ))
    return rows


def write_run(run_dir, *segments: list[tuple[dict, int]]) -> None:
    for segment in segments:
        with JsonlLogger(run_dir / "metrics.jsonl") as logger:
            for metrics, step in segment:
                logger.write(metrics, step)


def test_plot_run_writes_a_png_with_the_target_line(tmp_path):
    write_run(tmp_path, synthetic_metrics(60))
    (tmp_path / "config.yaml").write_text("stop:\n  target_return: 500\n")

    path = plot_run(tmp_path)

    assert path == tmp_path / "plot.png"
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 20_000
    assert not list(tmp_path.glob(".*partial"))


def test_plot_run_honours_out_and_a_resumed_run(tmp_path):
    write_run(tmp_path, synthetic_metrics(40), synthetic_metrics(40, first_frame=30_000))
    out = tmp_path / "figures" / "overview.png"
    assert plot_run(tmp_path, out=str(out)) == out
    assert out.read_bytes().startswith(PNG_SIGNATURE)


def test_draw_run_puts_the_four_panels_and_target_in_place():
    records = [{"step": step, **metrics} for metrics, step in synthetic_metrics(10)]
    figure = draw_run(records, title="demo", target_return=75.0)
    titles = [axes.get_title() for axes in figure.axes]
    assert titles == ["episode return vs env frames", "episode return vs wall-clock time", "throughput", "policy lag"]
    target_lines = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [tuple(line.get_ydata()) for line in target_lines] == [(75.0, 75.0)]


def test_plot_run_without_metrics_says_what_to_run(tmp_path):
    with pytest.raises(NoMetricsError, match=r"metrics.jsonl does not exist.*menger train"):
        plot_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(NoMetricsError, match="empty"):
        plot_run(tmp_path)
    with pytest.raises(NoMetricsError, match="not a directory"):
        plot_run(tmp_path / "missing")
    assert not (tmp_path / "plot.png").exists()


def test_supersede_replayed_keeps_what_the_resumed_run_relearned():
    steps = [0, 10, 20, 30, 40, 20, 30, 50]
    kept = supersede_replayed([{"step": step, "segment": int(index >= 5)} for index, step in enumerate(steps)])
    assert [(record["step"], record["segment"]) for record in kept] == [
        (0, 0), (10, 0), (20, 1), (30, 1), (50, 1)
    ]


def test_supersede_replayed_keeps_repeated_steps_of_a_paused_learner():
    steps = [0, 0, 0, 10, 10, 20]
    assert [record["step"] for record in supersede_replayed([{"step": s} for s in steps])] == steps


def test_continuous_wall_time_lays_segments_end_to_end():
    wall = np.array([0.0, 1.0, 2.0, np.nan, 0.5, 1.5])
    continuous, resumes = continuous_wall_time(wall)
    np.testing.assert_array_equal(continuous, [0.0, 1.0, 2.0, np.nan, 2.5, 3.5])
    assert resumes == [2.0]


def test_metric_column_turns_nulls_and_missing_keys_into_nan():
    column = metric_column([{"a": 1.0}, {"a": None}, {}], "a")
    assert column[0] == 1.0 and np.isnan(column[1:]).all()


def test_read_target_return(tmp_path):
    config = tmp_path / "config.yaml"
    assert read_target_return(config) is None
    config.write_text("stop:\n  max_frames: 100\n")
    assert read_target_return(config) is None
    config.write_text(json.dumps({"stop": {"target_return": 195}}))
    assert read_target_return(config) == 195.0


def test_the_deterministic_evaluation_is_its_own_line_with_a_marker_per_evaluation():
    records = [{"step": 1000 * i, "time/wall_s": float(i), "episode/return_mean": 10.0 * i} for i in range(6)]
    for index, (count, value) in enumerate([(None, None), (1, 50.0), (1, 50.0), (2, 80.0), (2, 80.0), (3, 90.0)]):
        if count is not None:
            records[index].update({"eval/count": count, "eval/return_mean": value})
    points = evaluation_points(records)  # each record repeats the last evaluation: only the fresh ones count
    assert np.isnan(points[[0, 2, 4]]).all() and points[[1, 3, 5]].tolist() == [50.0, 80.0, 90.0]
    by_frames = draw_run(records, "run").axes[0]
    line = next(line for line in by_frames.get_lines() if line.get_label() == "deterministic evaluation")
    assert line.get_xdata().tolist() == [1000, 3000, 5000] and line.get_marker() == "o"
