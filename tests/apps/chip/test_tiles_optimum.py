"""The argument in docs/chip.md that bounds macro_tiles_10x10's best proxy cost, checked on the cost code.

All 540 nets join facing pins of neighbouring tiles, so a wirelength-optimal placement is the 10×10 tile
itself (moved, rotated or mirrored as a whole); density is the same for every legal placement; and
congestion is the macros' own H blockage plus the H demand of the horizontal nets, smoothed ±2 columns.
Greedy builds the tile in the canvas corner, where the clipped smoothing window concentrates that demand;
two or more columns from the edge every row's peak is exactly three nets' worth.
"""

import numpy as np
import pytest

from menger.apps.chip import load_problem
from menger.apps.chip.baselines import greedy_placement, random_placement
from menger.apps.chip.costs import proxy_cost


@pytest.fixture(scope="module")
def tiles():
    return load_problem("macro_tiles_10x10")


def tile_layout(problem, first_column: int, first_row: int):
    """Macro M_R{r}_C{c} on cell (first_row + r, first_column + c), orientation N: the design's own tile."""
    layout = problem.initial.copy()
    for macro in problem.movable:
        _, row, column = problem.netlist.names[macro].split("_")
        layout.x[macro] = (first_column + int(column[1:]) + 0.5) * problem.grid.cell_width
        layout.y[macro] = (first_row + int(row[1:]) + 0.5) * problem.grid.cell_height
        layout.orientation[macro] = 0
    return layout


def floors(problem):
    """Per-part lower bounds: the facing-pin gap per net, one macro per cell, and the macro H blockage."""
    header, grid = problem.header, problem.grid
    gap = grid.cell_width - problem.netlist.width[problem.movable].max()
    h_capacity = grid.cell_height * header.routes_per_micron_h
    macro_h = problem.netlist.height[problem.movable].max() * header.macro_routing_alloc_h / h_capacity
    fill = problem.netlist.width[problem.movable].max() * problem.netlist.height[problem.movable].max()
    return gap / (header.width + header.height), 0.5 * fill / (grid.cell_width * grid.cell_height), macro_h, h_capacity


def test_every_legal_placement_has_the_same_density_and_at_least_the_floors(tiles):
    wirelength, density, macro_h, _ = floors(tiles)
    for seed in range(3):
        cost = proxy_cost(tiles.model, random_placement(tiles, np.random.default_rng(seed)))
        assert cost.density == pytest.approx(density)
        assert cost.wirelength >= wirelength and cost.congestion >= macro_h


def test_greedy_is_the_corner_tile_and_an_interior_tile_is_cheaper(tiles):
    wirelength, density, macro_h, h_capacity = floors(tiles)
    greedy = proxy_cost(tiles.model, greedy_placement(tiles))
    corner = proxy_cost(tiles.model, tile_layout(tiles, 0, 0))
    interior = proxy_cost(tiles.model, tile_layout(tiles, 5, 5))
    assert greedy.weighted() == pytest.approx(corner.weighted(), abs=1e-12)
    assert interior.wirelength == pytest.approx(wirelength) and interior.density == pytest.approx(density)
    # three nets per tile boundary, five boundaries inside the ±2 smoothing window, each spread over 5 columns
    assert interior.congestion == pytest.approx(macro_h + 3.0 / h_capacity)
    assert interior.weighted() < greedy.weighted() - 1e-5


@pytest.mark.parametrize("first_column, cheapest", [(0, False), (1, False), (2, True), (9, True), (10, False)])
def test_only_tiles_clear_of_the_side_edges_reach_the_interior_congestion(tiles, first_column, cheapest):
    _, _, macro_h, h_capacity = floors(tiles)
    congestion = proxy_cost(tiles.model, tile_layout(tiles, first_column, 3)).congestion
    assert (congestion == pytest.approx(macro_h + 3.0 / h_capacity, abs=1e-12)) == cheapest
