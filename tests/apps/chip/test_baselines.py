import numpy as np
import pytest

from menger.apps.chip import load_problem
from menger.apps.chip.baselines import (candidate_costs, finish, greedy_placement, random_placement,
                                        simulated_annealing, unplaced_layout)
from menger.apps.chip.costs import density_cost, wirelength_cost
from menger.apps.chip.incremental import IncrementalCost

from .helpers import assert_legal


@pytest.fixture(scope="module")
def tiles():
    return load_problem("macro_tiles_10x10")


def test_random_and_greedy_are_legal(tiles):
    assert_legal(tiles, random_placement(tiles, np.random.default_rng(0)))
    assert_legal(tiles, greedy_placement(tiles))


def test_greedy_is_legal_on_ariane():
    problem = load_problem("ariane133_ng45")
    assert_legal(problem, greedy_placement(problem))


def test_candidate_costs_match_moving_the_macro(tiles):
    cost = IncrementalCost(tiles.model, unplaced_layout(tiles), track_congestion=False)
    for macro in tiles.movable[:5]:
        cost.move(int(macro), *map(float, tiles.grid.cell_centre(int(macro) % 400)))
    macro = int(tiles.movable[5])
    cells = np.array([0, 57, 210, 399])
    predicted = candidate_costs(cost, macro, cells, w_density=1.0)
    actual = []
    for cell in cells:
        cost.move(macro, *map(float, tiles.grid.cell_centre(int(cell))))
        actual.append(wirelength_cost(tiles.model, cost.layout) + density_cost(tiles.model, cost.layout))
    # Only the macro's own nets enter the candidate score, so it matches the full cost up to a constant.
    np.testing.assert_allclose(predicted - predicted[0], np.array(actual) - actual[0], atol=1e-12)
    assert len(set(np.round(actual, 9))) > 1


def test_annealing_is_legal_and_beats_its_random_start(tiles):
    rng = np.random.default_rng(0)
    start = random_placement(tiles, rng)
    annealed = simulated_annealing(tiles, budget_s=2.0, rng=rng, start=start)
    assert_legal(tiles, annealed)
    _, before = finish(tiles, start, soft_macro_steps=0)
    _, after = finish(tiles, annealed, soft_macro_steps=0)
    assert after.weighted() < before.weighted() - 0.02


def test_annealing_snapshots_its_best_so_far_at_each_interval_and_at_the_end(tiles):
    rng = np.random.default_rng(0)
    start = random_placement(tiles, rng)
    snapshots: list = []
    annealed = simulated_annealing(tiles, budget_s=1.0, rng=rng, start=start, snapshots=snapshots,
                                   snapshot_every_s=0.25)
    seconds = [at for at, _ in snapshots]
    assert 3 <= len(snapshots) <= 5 and seconds == sorted(seconds) and seconds[-1] >= 1.0
    np.testing.assert_array_equal(snapshots[-1][1].x, annealed.x)  # the last snapshot is the result
    costs = [finish(tiles, layout, soft_macro_steps=0, soft="fd")[1].weighted() for _, layout in snapshots]
    assert all(later <= earlier + 1e-9 for earlier, later in zip(costs, costs[1:]))  # best so far never gets dearer
