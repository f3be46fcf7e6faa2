"""Sampling frequencies against their distributions: chi-square tests with fixed seeds, able to fail.

Each test draws from a table with a fixed seed and compares the counts with the expected probabilities; it also
checks that the same statistic rejects a wrong distribution (a wrong alpha, uniform for prioritized), so a
sampler that ignored alpha, or the test itself, could not pass by accident.
"""
import numpy as np
import pytest
from replay_items import SPEC, make_items

from menger.replay import MinSize, Table, fifo, prioritized, uniform

P_VALUE = 1e-3


def chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


def chi_square_quantile(dof: int, p_value: float = P_VALUE) -> float:
    """Upper quantile of chi-square (Wilson-Hilferty; within 1% for dof >= 3, no scipy needed)."""
    z = {1e-3: 3.090232, 1e-4: 3.719016}[p_value]
    return dof * (1 - 2 / (9 * dof) + z * np.sqrt(2 / (9 * dof))) ** 3


def draw_counts(table: Table, items: int, draws: int, batch: int = 1000) -> np.ndarray:
    counts = np.zeros(items)
    for _ in range(draws // batch):
        np.add.at(counts, table.sample(batch, timeout_s=0).data["action"], 1)
    return counts


def test_the_chi_square_quantile_is_right():
    assert chi_square_quantile(10) == pytest.approx(29.588, rel=0.01)       # tables: 29.588
    assert chi_square_quantile(49) == pytest.approx(85.351, rel=0.01)       # tables: 85.351


@pytest.mark.parametrize("alpha, wrong_alpha", [(0.6, 0.5), (1.0, 0.9), (0.0, 0.1)])
def test_prioritized_frequencies_follow_priority_to_the_alpha(alpha, wrong_alpha):
    items = 50
    priorities = np.linspace(0.2, 5.0, items)
    table = Table("t", 100, prioritized(alpha), fifo(), MinSize(1), item_spec=SPEC, seed=7)
    table.insert_batch(make_items(items), priorities, timeout_s=0)
    counts = draw_counts(table, items, 200_000)
    expected = priorities ** alpha / (priorities ** alpha).sum()
    limit = chi_square_quantile(items - 1)
    assert chi_square(counts, expected) < limit
    wrong = priorities ** wrong_alpha / (priorities ** wrong_alpha).sum()
    assert chi_square(counts, wrong) > 3 * limit           # a wrong alpha is detected, by far


def test_uniform_frequencies_are_uniform_whatever_the_priorities():
    items = 40
    table = Table("t", 100, uniform(), fifo(), MinSize(1), item_spec=SPEC, seed=8)
    priorities = np.linspace(0.1, 9.0, items)
    table.insert_batch(make_items(items), priorities, timeout_s=0)
    counts = draw_counts(table, items, 100_000)
    assert chi_square(counts, np.full(items, 1 / items)) < chi_square_quantile(items - 1)
    assert chi_square(counts, priorities / priorities.sum()) > 3 * chi_square_quantile(items - 1)


@pytest.mark.parametrize("left", [
    "every third gone (draws by rejection)",
    "the top half gone (the rows in use shrink)",
    "one in six left (draws from the list of rows)",
])
def test_uniform_draws_only_the_items_left_and_those_alike(left):
    """Items deleted from the middle and from the top of the rows: the deleted ones are never drawn, the rest
    alike, whichever way the uniform sampler draws (rejection below the highest row in use, or the row list)."""
    items = 120
    table = Table("t", 200, uniform(), fifo(), MinSize(1), item_spec=SPEC, seed=11)
    keys = table.insert_batch(make_items(items), 1.0, timeout_s=0)
    ids = np.arange(items)
    keep = {"every third gone (draws by rejection)": ids % 3 != 0,
            "the top half gone (the rows in use shrink)": (ids < items // 2) & (ids % 2 == 0),
            "one in six left (draws from the list of rows)": ids % 6 == 5}[left]
    table.delete(keys[~keep])
    counts = draw_counts(table, items, 60_000)
    assert counts[~keep].sum() == 0
    kept = int(keep.sum())
    limit = chi_square_quantile(kept - 1)
    assert chi_square(counts[keep], np.full(kept, 1 / kept)) < limit
    tilted = (ids[keep] + 1.0) / (ids[keep] + 1.0).sum()
    assert chi_square(counts[keep], tilted) > 3 * limit
    assert np.all(table.sample(50, timeout_s=0).probabilities == 1 / kept)


def test_prioritized_frequencies_hold_over_a_deep_tree_after_updates():
    """Many items (several tree levels below the top), priorities changed after the inserts."""
    items = 20_000
    rng = np.random.default_rng(9)
    table = Table("t", items, prioritized(0.8), fifo(), MinSize(1), item_spec=SPEC, seed=9)
    keys = table.insert_batch(make_items(items), 1.0, timeout_s=0)
    priorities = np.where(np.arange(items) < 100, 50.0, rng.random(items) + 0.01)    # 100 heavy items
    table.update_priorities(keys, priorities)
    actions = np.concatenate([table.sample(1000, timeout_s=0).data["action"] for _ in range(100)])
    # Bin items into 50 groups of 400 by id, so that each bin expects plenty of draws.
    weights = priorities ** 0.8
    expected = np.add.reduceat(weights, np.arange(0, items, 400)) / weights.sum()
    counts = np.bincount(actions // 400, minlength=50).astype(float)
    assert chi_square(counts, expected) < chi_square_quantile(49)
    flat = np.add.reduceat(priorities, np.arange(0, items, 400)) / priorities.sum()   # alpha 1 instead of 0.8
    assert chi_square(counts, flat) > 3 * chi_square_quantile(49)


def test_without_replacement_draws_follow_the_sequential_probabilities():
    """max_times_sampled=1: P(first i, then j) = w_i / W * w_j / (W - w_i), over the 6 ordered pairs."""
    weights = np.array([1.0, 2.0, 3.0])
    table = Table("t", 10, prioritized(1.0), fifo(), MinSize(1), max_times_sampled=1, item_spec=SPEC, seed=10)
    pairs = np.zeros((3, 3))
    for _ in range(3000):
        table.insert_batch(make_items(3), weights, timeout_s=0)
        first, second = table.sample(2, timeout_s=0).data["action"]
        pairs[first, second] += 1
        table.sample(1, timeout_s=0)                  # empty the table for the next round
    expected = weights[:, None] / 6 * weights[None, :] / (6 - weights[:, None])
    np.fill_diagonal(expected, 0)
    mask = ~np.eye(3, dtype=bool)
    assert chi_square(pairs[mask], expected[mask]) < chi_square_quantile(5)
    with_replacement = weights[:, None] * weights[None, :] / 36
    with_replacement = with_replacement[mask] / with_replacement[mask].sum()
    assert chi_square(pairs[mask], with_replacement) > chi_square_quantile(5)


def test_sampling_is_reproducible_for_a_seed():
    def run(seed):
        table = Table("t", 100, prioritized(0.6), fifo(), MinSize(1), item_spec=SPEC, seed=seed)
        table.insert_batch(make_items(80), np.linspace(1, 2, 80), timeout_s=0)
        return np.concatenate([table.sample(16, timeout_s=0).keys for _ in range(5)])
    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))
