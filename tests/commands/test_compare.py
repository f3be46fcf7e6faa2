"""`menger plot RUN...`: several runs and groups of seeds in one figure, mean and band on a shared frame grid."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from menger.commands.compare import (BANDS, choose_metric, mean_and_band, on_grid, parse_groups, plot_comparison,
                                     run_curve)
from menger.commands.plot import NoMetricsError
from menger.logging import JsonlLogger

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_run(run_dir, frames, returns, evals=None):
    with JsonlLogger(run_dir / "metrics.jsonl") as logger:
        for index, (step, value) in enumerate(zip(frames, returns)):
            metrics = {"episode/return_mean": value, "time/wall_s": 0.1 * index}
            if evals is not None:
                metrics.update({"eval/return_mean": evals[index], "eval/count": index})
            logger.write(metrics, step)


def seed_group(parent, slopes, last_frame=10_000):
    for seed, slope in enumerate(slopes, start=1):
        frames = np.arange(1000, last_frame + 1, 1000)
        write_run(parent / f"seed-{seed}", frames, slope * frames / 1000)
    return parent


def test_a_folder_of_runs_is_a_group_and_a_run_a_group_of_one(tmp_path):
    seed_group(tmp_path / "ppo", [1.0, 2.0, 3.0])
    for seed in (10, 2):  # seed-2 before seed-10
        (tmp_path / "ppo" / f"seed-{seed}").mkdir(exist_ok=True)
    write_run(tmp_path / "ppo" / "seed-10", [1000], [1.0])
    write_run(tmp_path / "single", [1000, 2000], [1.0, 2.0])
    groups = parse_groups([str(tmp_path / "ppo"), str(tmp_path / "single")],
                          [f"mine={tmp_path / 'single'},{tmp_path / 'ppo' / 'seed-1'}"])
    assert [(g.name, [r.name for r in g.runs]) for g in groups] == [
        ("ppo", ["seed-1", "seed-2", "seed-3", "seed-10"]), ("single", ["single"]), ("mine", ["single", "seed-1"])]


def test_bad_inputs_say_what_to_give(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoMetricsError, match="neither a run directory.*nor a folder of runs"):
        parse_groups([str(tmp_path / "empty")])
    with pytest.raises(ValueError, match="NAME=RUN,RUN"):
        parse_groups([], ["justaname"])
    with pytest.raises(ValueError, match="at least one run"):
        parse_groups([])


def test_curves_are_interpolated_onto_the_grid_and_nan_outside_their_span():
    curve = np.array([[1000.0, 1.0], [3000.0, 3.0]])
    assert np.allclose(on_grid(curve, np.array([0.0, 1000, 2000, 3000, 4000])), [np.nan, 1, 2, 3, np.nan],
                       equal_nan=True)


def test_mean_and_bands_and_none_where_a_run_has_no_value():
    table = np.array([[1.0, 1.0, np.nan], [2.0, 3.0, 5.0], [3.0, 8.0, 5.0]])
    mean, low, high = mean_and_band(table, "minmax")
    assert np.allclose(mean, [2, 4, np.nan], equal_nan=True) and list(low[:2]) == [1, 1] and list(high[:2]) == [3, 8]
    mean, low, high = mean_and_band(table, "bootstrap")
    assert low[0] < 2 < high[0] and 1 <= low[0] and high[0] <= 3  # an interval of the mean, inside the data
    assert np.isnan(low[2]) and mean_and_band(table, "bootstrap")[1][0] == low[0]  # a fixed rng: same every time
    with pytest.raises(ValueError, match="bootstrap, minmax"):
        mean_and_band(table, "std")


def test_the_evaluation_is_drawn_when_every_run_evaluates(tmp_path):
    write_run(tmp_path / "a", [1000, 2000], [1.0, 2.0], evals=[5.0, 6.0])
    write_run(tmp_path / "b", [1000, 2000], [1.0, 2.0])
    both, evaluated = parse_groups([str(tmp_path / "a"), str(tmp_path / "b")]), parse_groups([str(tmp_path / "a")])
    assert choose_metric(both) == "episode/return_mean" and choose_metric(evaluated) == "eval/return_mean"
    assert choose_metric(both, "actor/fps") == "actor/fps"
    assert run_curve(tmp_path / "a", "eval/return_mean").tolist() == [[1000, 5.0], [2000, 6.0]]


def test_a_folder_of_seeds_gives_one_figure_with_a_band_in_the_folder(tmp_path, monkeypatch):
    import menger.commands.compare as compare

    drawn = {}

    def spy(figure_maker):
        def make(curves, metric, band="bootstrap", **kw):
            figure = figure_maker(curves, metric, band, **kw)
            axes = figure.axes[0]
            drawn["bands"] = len(axes.collections)
            drawn["legend"] = [t.get_text() for t in axes.get_legend().get_texts()]
            return figure
        return make

    monkeypatch.setattr(compare, "draw_comparison", spy(compare.draw_comparison))
    parent = seed_group(tmp_path / "runs" / "cartpole-ppo-1", [1.0, 2.0, 3.0])
    for seed in (1, 2, 3):
        (parent / f"seed-{seed}" / "config.yaml").write_text("stop: {target_return: 20}\n")
    path = plot_comparison([str(parent)])
    assert path == parent / "plot.png" and path.read_bytes().startswith(PNG_SIGNATURE)
    assert drawn["bands"] == 1 and f"cartpole-ppo-1: {BANDS['bootstrap']}" in drawn["legend"]
    assert "cartpole-ppo-1 (3 runs)" in drawn["legend"] and "target 20" in drawn["legend"]


def test_several_groups_share_one_figure_written_where_asked(tmp_path, monkeypatch):
    seed_group(tmp_path / "a", [1.0, 2.0], last_frame=8000)
    seed_group(tmp_path / "b", [3.0, 4.0])
    monkeypatch.chdir(tmp_path)
    assert plot_comparison([str(tmp_path / "a"), str(tmp_path / "b")]) == Path("compare.png")
    assert (tmp_path / "compare.png").read_bytes().startswith(PNG_SIGNATURE)
    out = plot_comparison([], [f"x={tmp_path / 'a'}", f"y={tmp_path / 'b' / 'seed-1'}"], out=tmp_path / "o.png",
                          band="minmax")
    assert out.read_bytes().startswith(PNG_SIGNATURE)
