import numpy as np
import pytest

from menger.apps.chip import data_path, load_problem
from menger.cli import main
from menger.apps.chip.netlist import HARD_MACRO, MACRO_PIN, PORT, SOFT_MACRO, load_netlist, parse_netlist_text
from menger.apps.chip.plc import format_plc, load_plc, parse_plc_text

from .helpers import SHARED_DATA, macro, pin, port


def test_nets_come_from_driver_inputs_with_driver_weight():
    text = (macro("M0", 10, 10, 5, 5) + pin("M0/a", "M0", 1, 2, inputs=["P0"], weight=3.0)
            + port("P0", 0, 0, inputs=["M0/a"]))
    netlist = parse_netlist_text(text)
    assert netlist.names == ("M0", "M0/a", "P0")
    assert list(netlist.kind) == [HARD_MACRO, MACRO_PIN, PORT]
    assert netlist.parent[1] == 0 and (netlist.x_offset[1], netlist.y_offset[1]) == (1.0, 2.0)
    assert list(netlist.net_ptr) == [0, 2, 4]
    assert list(netlist.net_nodes) == [1, 2, 2, 1]
    assert list(netlist.net_weight) == [3.0, 1.0]


def test_unknown_sink_is_a_clear_error():
    with pytest.raises(ValueError, match="'nowhere'"):
        parse_netlist_text(port("P0", 0, 0, inputs=["nowhere"]))


def test_ariane_counts_match_its_source_notes():
    netlist = load_netlist(str(data_path("ariane133_ng45") / "netlist.pb.txt.gz"))
    counts = {kind: int((netlist.kind == kind).sum()) for kind in (HARD_MACRO, SOFT_MACRO, MACRO_PIN, PORT)}
    assert counts == {HARD_MACRO: 133, SOFT_MACRO: 782, MACRO_PIN: 18477, PORT: 495}
    assert netlist.num_nets == 12422 and netlist.net_weight.sum() == 22584
    assert netlist.metadata["soft_macro_area_bloating_ratio"] == 2.0


def test_packaged_data_matches_shared_copy_when_present():
    shared = SHARED_DATA / "circuit_training" / "macro_tiles_10x10" / "netlist.pb.txt"
    if not shared.exists():
        pytest.skip("shared/data is not beside this checkout")
    assert (data_path("macro_tiles_10x10") / "netlist.pb.txt").read_bytes() == shared.read_bytes()


def test_plc_header_fields():
    header = load_plc(data_path("ariane133_ng45") / "initial.plc").header
    assert (header.columns, header.rows) == (24, 21)
    assert header.width == pytest.approx(1433.406)
    assert (header.routes_per_micron_h, header.routes_per_micron_v) == (57.031, 56.818)
    assert (header.macro_routing_alloc_h, header.macro_routing_alloc_v) == (39.583, 30.303)
    assert header.smoothing == 0
    assert header.recorded == {"wirelength": 3219216.09, "wirelength_cost": 0.0497, "congestion_cost": 0.7128,
                               "density_cost": 0.6067}
    assert header.node_counts == {"hard macro": 133, "port": 495, "soft macro": 782, "stdcell": 0}
    blocked = load_plc(data_path("simple_grouped_with_coords_with_blockage") / "initial.plc").header
    assert [(b.x_min, b.y_max, b.rate) for b in blocked.blockages] == [(0, 10, 1.0), (490, 500, 1.0)]


@pytest.mark.parametrize("name", ["ariane133_ng45", "macro_tiles_10x10", "simple_grouped_with_coords_with_blockage"])
def test_plc_round_trip(name):
    original = load_plc(data_path(name) / "initial.plc")
    again = parse_plc_text(format_plc(original))
    assert again.header == original.header
    for field in ("node_index", "x", "y", "orientation", "fixed"):
        np.testing.assert_array_equal(getattr(again, field), getattr(original, field))


def test_plc_without_grid_is_refused():
    with pytest.raises(ValueError, match="Columns"):
        parse_plc_text("# Width : 1 Height : 1\n")


def ariane_plc_text(old: str = "", new: str = "", extra_lines: str = "") -> str:
    text = (data_path("ariane133_ng45") / "initial.plc").read_text()
    assert old in text
    return text.replace(old, new) + extra_lines


def write_ariane_plc(tmp_path, **edits):
    path = tmp_path / "other.plc"
    path.write_text(ariane_plc_text(**edits))
    return path


def test_placement_for_another_clustering_is_refused_naming_both_counts(tmp_path):
    # as a placement of another clustering of Ariane133 reads: 810 soft macros, nodes past the netlist's last
    plc = write_ariane_plc(tmp_path, old="# SOFT_MACROs     :       782", new="# SOFT_MACROs     :       810",
                           extra_lines="19888 10.0 10.0 N 0\n")
    with pytest.raises(ValueError) as refused:
        load_problem("ariane133_ng45", plc)
    message = str(refused.value)
    assert "does not match netlist" in message and "810 soft macros" in message and "782 soft macros" in message
    assert "node 19888" in message and "0 to 19886" in message
    assert "133 hard macros" in message and "495 ports" in message


@pytest.mark.parametrize("extra, why", [("19888 10.0 10.0 N 0\n", "nodes the netlist lacks"),
                                        ("496 10.0 10.0 N 0\n", "name pins"),  # node 496 of Ariane133 is a macro pin
                                        ("0 10.0 10.0 - 1\n", "node 0 has 2 body lines")])
def test_placement_whose_body_does_not_fit_is_refused_without_header_counts(tmp_path, extra, why):
    text = "".join(line for line in ariane_plc_text().splitlines(keepends=True) if "MACROs " not in line
                   and "PORTs " not in line and "STDCELLs " not in line)
    (tmp_path / "bare.plc").write_text(text + extra)
    assert load_plc(tmp_path / "bare.plc").header.node_counts == {}
    with pytest.raises(ValueError, match=why):
        load_problem("ariane133_ng45", tmp_path / "bare.plc")
    (tmp_path / "fits.plc").write_text(text)  # the same header and body without the bad line: accepted
    assert load_problem("ariane133_ng45", tmp_path / "fits.plc").movable.size == 133


def test_cost_command_refuses_a_mismatched_placement_with_exit_status_1(tmp_path, capsys):
    plc = write_ariane_plc(tmp_path, extra_lines="19888 10.0 10.0 N 0\n")
    assert main(["cost", "ariane133_ng45", str(plc)]) == 1
    captured = capsys.readouterr()
    assert "does not match netlist" in captured.err and "782 soft macros" in captured.err
    assert "wirelength" not in captured.out  # refused before anything was computed


def test_packaged_name_and_missing_name():
    assert load_problem("macro_tiles_10x10").movable.size == 100
    with pytest.raises(FileNotFoundError, match="macro_tiles_10x10"):
        load_problem("no_such_design")
