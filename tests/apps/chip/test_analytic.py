import json

import numpy as np
import pytest
import torch

from menger.apps.chip import load_problem
from menger.apps.chip import costs as C
from menger.apps.chip.analytic import (AnalyticSettings, place_soft_macros_analytic, soft_density,
                                       weighted_average_wirelength)
from menger.apps.chip.baselines import finish, greedy_placement
from menger.apps.chip.commands import place_main
from menger.apps.chip.plc import load_plc
from menger.apps.chip.problem import legality_problems

from .helpers import assert_legal


def test_weighted_average_wirelength_tends_to_each_nets_span():
    rng = np.random.default_rng(0)
    net = np.sort(rng.integers(0, 30, 200))
    net = np.searchsorted(np.unique(net), net)  # nets 0..n-1, none empty
    coord = rng.uniform(0, 100, len(net))
    span = np.maximum.reduceat(coord, np.r_[0, np.flatnonzero(np.diff(net)) + 1]) - \
        np.minimum.reduceat(coord, np.r_[0, np.flatnonzero(np.diff(net)) + 1])
    nets = int(net.max()) + 1
    sharp = weighted_average_wirelength(torch.tensor(coord), torch.tensor(net), nets, gamma=0.001).numpy()
    np.testing.assert_allclose(sharp, span, atol=0.01)  # off by at most a few γ (less when two values tie)
    smooth = weighted_average_wirelength(torch.tensor(coord), torch.tensor(net), nets, gamma=10.0).numpy()
    assert (smooth <= span + 1e-9).all() and (smooth < span - 1e-3).any()  # a lower bound that loosens with γ


def test_soft_density_matches_the_cost_models_grid():
    problem = load_problem("ariane133_ng45")
    model, layout = problem.model, problem.initial
    soft = model.soft_macros
    w, h = model.footprint(layout, soft)
    header = model.header
    grid = soft_density(torch.tensor(layout.x[soft]), torch.tensor(layout.y[soft]), torch.tensor(w), torch.tensor(h),
                        torch.ones(len(soft), dtype=torch.float64),
                        torch.arange(header.columns + 1, dtype=torch.float64) * model.cell_width,
                        torch.arange(header.rows + 1, dtype=torch.float64) * model.cell_height,
                        model.cell_width * model.cell_height)
    np.testing.assert_allclose(grid.numpy(), C.density_grid(model, layout, soft), atol=1e-9)


@pytest.fixture(scope="module")
def ariane():
    return load_problem("ariane133_ng45")


def test_analytic_pass_moves_only_soft_macros_and_returns_its_cheapest_scored_iterate(ariane):
    model = ariane.model
    start = ariane.initial
    result = place_soft_macros_analytic(model, start, AnalyticSettings(iterations=40, score_every=10))
    fixed = np.setdiff1d(np.arange(model.netlist.num_nodes), model.soft_macros)
    np.testing.assert_array_equal(result.layout.x[fixed], start.x[fixed])
    np.testing.assert_array_equal(result.layout.y[fixed], start.y[fixed])
    assert [iteration for iteration, _ in result.trace] == [-1, 9, 19, 29, 39]
    assert result.cost.weighted() == pytest.approx(min(cost for _, cost in result.trace))
    assert C.proxy_cost(model, result.layout) == result.cost  # the cost is the returned layout's, from scratch
    assert result.cost.weighted() < C.proxy_cost(model, start).weighted() - 0.01
    assert not [p for p in legality_problems(ariane, result.layout) if p.startswith("soft macro")]


def test_analytic_pass_keeps_the_start_when_nothing_it_tries_is_cheaper(ariane):
    settings = AnalyticSettings(iterations=2, score_every=1, step_cells=50.0)  # steps that throw everything away
    result = place_soft_macros_analytic(ariane.model, ariane.initial, settings)
    assert result.iteration == -1 and result.cost == C.proxy_cost(ariane.model, ariane.initial)


@pytest.mark.parametrize("field, value", [("iterations", 0), ("score_every", 0), ("gamma_cells", 0.0),
                                          ("stretch", -1.0), ("density_growth", 0.5)])
def test_analytic_settings_refuse_values_that_cannot_work(field, value):
    with pytest.raises(ValueError, match=field):
        AnalyticSettings(**{field: value})


def test_finish_with_the_analytic_pass_is_never_dearer_than_force_directed_alone(ariane):
    greedy = greedy_placement(ariane)
    _, fd = finish(ariane, greedy, soft="fd")
    final, analytic = finish(ariane, greedy)
    assert analytic.weighted() < fd.weighted()
    assert_legal(ariane, final)
    with pytest.raises(ValueError, match="soft placer"):
        finish(ariane, greedy, soft="dreamplace")


def test_legality_problems_name_overlaps_the_canvas_edge_and_blockages(ariane):
    def hard(problems):
        return [p for p in problems if p.startswith("hard macro")]

    layout = greedy_placement(ariane)  # its soft macros are still the shipped ones, some past the canvas
    assert hard(legality_problems(ariane, layout)) == []
    a, b = ariane.movable[:2]
    layout.x[b], layout.y[b] = layout.x[a], layout.y[a]
    layout.x[ariane.movable[2]] = ariane.header.width
    problems = hard(legality_problems(ariane, layout))
    assert any("overlap" in p for p in problems) and any("outside" in p for p in problems)
    # The placement Ariane ships with (TILOS's commercial-flow placement) reaches past its own .plc canvas.
    assert len(hard(legality_problems(ariane, ariane.initial))) == 18  # and 18 of its soft macros

    blocked = load_problem("simple_grouped_with_coords_with_blockage")
    layout = blocked.initial.copy()
    blockage = blocked.header.blockages[0]
    macro = blocked.movable[0]
    layout.x[macro], layout.y[macro] = (blockage.x_min + blockage.x_max) / 2, (blockage.y_min + blockage.y_max) / 2
    assert any("blockage" in p for p in legality_problems(blocked, layout))


def test_placed_ariane_file_is_legal_and_rescores_to_its_report(tmp_path, capsys):
    """What `menger place` writes is checked from the file alone, as `menger cost` reads it."""
    out = tmp_path / "greedy"
    assert place_main(["ariane133_ng45", "--method", "greedy", "--out", str(out)]) == 0
    report = json.loads((out / "cost_report.json").read_text())
    assert report["soft"] == "analytic" and report["proxy_cost"] < 1.0128  # the shipped placement's cost
    assert report["legality_problems"] == []
    problem = load_problem("ariane133_ng45", out / "placement.plc")
    assert legality_problems(problem, problem.initial) == []
    rescored = C.proxy_cost(problem.model, problem.initial)
    assert rescored.weighted() == pytest.approx(report["proxy_cost"], rel=1e-9)
    assert len(load_plc(out / "placement.plc").node_index) == len(load_plc(
        problem.netlist_path.parent / "initial.plc").node_index)
