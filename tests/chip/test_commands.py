import json

import pytest

from menger.envs.chip.commands import cost_main, place_main
from menger.envs.chip.plc import load_plc


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
    assert cost_main(["ariane133_ng45", str(__import__("menger.envs.chip", fromlist=["data_path"])
                                             .data_path("ariane133_ng45") / "initial.plc")]) == 0
    out = capsys.readouterr().out
    assert "relative error" in out and "congestion" in out
