import numpy as np
import pytest

from menger.apps.chip import load_problem
from menger.apps.chip.costs import proxy_cost
from menger.apps.chip.incremental import IncrementalCost


@pytest.mark.parametrize("name, moves", [("ariane133_ng45", 40), ("macro_tiles_10x10", 60)])
def test_incremental_equals_full_after_random_moves(name, moves):
    problem = load_problem(name)
    rng = np.random.default_rng(1)
    cost = IncrementalCost(problem.model, problem.initial, track_congestion=True)
    movers = np.concatenate([problem.movable, problem.model.soft_macros])
    for _ in range(moves):
        node = int(rng.choice(movers))
        cost.move(node, rng.uniform(0, problem.grid.width), rng.uniform(0, problem.grid.height),
                  orientation=int(rng.integers(8)), active=bool(rng.random() < 0.9))
    full = proxy_cost(problem.model, cost.layout)
    got = cost.costs()
    for field in ("wirelength", "density", "congestion"):
        assert getattr(got, field) == pytest.approx(getattr(full, field), rel=1e-9, abs=1e-12)


def test_moving_back_restores_the_costs():
    problem = load_problem("macro_tiles_10x10")
    cost = IncrementalCost(problem.model, problem.initial)
    before = cost.costs()
    node = int(problem.movable[3])
    x, y = cost.layout.x[node], cost.layout.y[node]
    cost.move(node, 600.0, 600.0)
    assert cost.costs() != before
    cost.move(node, x, y)
    assert cost.costs().wirelength == pytest.approx(before.wirelength)
    assert cost.costs().congestion == pytest.approx(before.congestion)


def test_untracked_congestion_says_how_to_enable_it():
    problem = load_problem("macro_tiles_10x10")
    cost = IncrementalCost(problem.model, problem.initial, track_congestion=False)
    with pytest.raises(RuntimeError, match="track_congestion=True"):
        cost.congestion_maps()
