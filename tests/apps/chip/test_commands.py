import json

import numpy as np
import pytest

from menger.apps.chip import load_problem
from menger.apps.chip.commands import FINISHED_ROLLOUTS, cost_main, place_main, place_with_rl
from menger.apps.chip.plc import load_plc

from .helpers import assert_legal


@pytest.mark.parametrize("method", ["random", "greedy", "sa"])
def test_place_writes_plc_png_and_report(tmp_path, capsys, method):
    out = tmp_path / method
    assert place_main(["macro_tiles_10x10", "--method", method, "--budget", "0.5", "--out", str(out)]) == 0
    report = json.loads((out / "cost_report.json").read_text())
    assert report["method"] == method and report["proxy_cost"] > 0
    assert (out / "placement.png").stat().st_size > 1000
    plc = load_plc(out / "placement.plc")
    assert len(plc.node_index) == 100 and plc.header.recorded["density_cost"] == pytest.approx(report["density"])
    assert "wirelength" in capsys.readouterr().out


def test_cost_reports_relative_error_against_the_header(capsys):
    assert cost_main(["ariane133_ng45", str(__import__("menger.apps.chip", fromlist=["data_path"])
                                             .data_path("ariane133_ng45") / "initial.plc")]) == 0
    out = capsys.readouterr().out
    assert "relative error" in out and "congestion" in out and "TILOS weighting (density x 0.5): 0.7095" in out
    assert "not legal (36 problems" in out  # the shipped placement reaches past its own canvas


@pytest.mark.slow
def test_chip_ppo_preset_trains_and_rolls_out_a_legal_placement(tmp_path):
    """The whole RL path of `menger place --method rl`, shortened: the preset trains (threads, a few
    updates) on a tiny design and its deterministic rollout is a legal placement."""
    problem = load_problem("toy_macro_stdcell")
    rollouts = place_with_rl(problem, "toy_macro_stdcell", 60.0, tmp_path, seed=0, overrides=(
        "stop.env_frames=64", "runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2",
        "runtime.unroll_length=8", "checkpoint.interval_s=3600"))
    assert 1 <= len(rollouts) <= FINISHED_ROLLOUTS
    assert [r.proxy for r in rollouts] == sorted(r.proxy for r in rollouts)
    for rollout in rollouts:
        assert_legal(problem, rollout.layout)
    saved = np.load(tmp_path / "rl_rollouts.npz")
    assert saved["x"].shape[1] == len(problem.movable) and (saved["elapsed_s"] >= 0).all()
    listed = json.loads((tmp_path / "rl_rollouts.json").read_text())["rollouts"]
    assert len(listed[0]) == 3  # step, proxy cost, seconds into the run
