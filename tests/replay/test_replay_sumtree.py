"""SumTree and MinTree against brute-force references (prefix sums, minima), at several shapes of tree."""
import numpy as np
import pytest

from menger.replay.sumtree import MinTree, SumTree

# (capacity, fanout, top_nodes): a flat top only, one level, several levels, and the defaults at 2^14 leaves.
SHAPES = [(8, 16, 4096), (64, 4, 4), (1000, 4, 2), (1 << 14, 16, 4096), (300, 2, 1)]


def brute_sample(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The leaf whose interval [prefix, prefix + weight) holds each u (exact for integer weights)."""
    ends = np.cumsum(weights)
    return np.searchsorted(ends, u, side="right")


@pytest.mark.parametrize("capacity, fanout, top_nodes", SHAPES)
def test_sum_tree_matches_prefix_sums_under_random_updates(capacity, fanout, top_nodes):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity, fanout=fanout, top_nodes=top_nodes)
    assert tree.capacity >= capacity and tree.capacity & (tree.capacity - 1) == 0
    reference = np.zeros(tree.capacity)
    for _ in range(30):
        indices = rng.choice(capacity, size=rng.integers(1, min(capacity, 50) + 1), replace=False)
        weights = rng.integers(0, 5, size=len(indices)).astype(np.float64)   # integers: sums are exact
        tree.update(indices, weights)
        reference[indices] = weights
        assert tree.total == reference.sum()
        np.testing.assert_array_equal(tree.get(indices), weights)
        np.testing.assert_array_equal(tree.prefix_sums(), np.concatenate([[0], np.cumsum(reference)[:-1]]))
        if reference.sum() > 0:
            u = rng.integers(0, int(reference.sum()), size=200) + 0.5
            np.testing.assert_array_equal(tree.sample(u), brute_sample(reference, u))


@pytest.mark.parametrize("capacity, fanout, top_nodes", SHAPES)
def test_sum_tree_never_returns_a_zero_weight_leaf(capacity, fanout, top_nodes):
    rng = np.random.default_rng(1)
    tree = SumTree(capacity, fanout=fanout, top_nodes=top_nodes)
    weights = rng.random(capacity) * (rng.random(capacity) < 0.3)      # mostly zeros, float sums
    weights[capacity - 1] = 0.0
    weights[0] = 0.5
    tree.update(np.arange(capacity), weights)
    u = np.concatenate([rng.random(2000), [0.0, 1.0 - 2 ** -53, 1.0]]) * tree.total   # and the very ends
    chosen = tree.sample(u)
    assert (weights[chosen] > 0).all()
    ends = np.cumsum(weights)
    inner = u < ends[-1] * (1 - 1e-12)
    np.testing.assert_array_equal(chosen[inner], brute_sample(weights, u[inner]))


def test_incremental_updates_equal_a_rebuild_bit_for_bit():
    rng = np.random.default_rng(2)
    incremental, rebuilt = SumTree(5000), SumTree(5000)
    for _ in range(50):
        indices = rng.choice(5000, size=300, replace=False)
        incremental.update(indices, rng.random(300) ** 3)
        incremental.total  # noqa: B018  (a read flushes the pending leaves into the inner nodes)
    rebuilt.update(np.arange(5000), incremental.leaves[:5000].copy())
    rebuilt.rebuild()
    assert rebuilt.total == incremental.total
    u = rng.random(1000) * incremental.total
    np.testing.assert_array_equal(rebuilt.sample(u), incremental.sample(u))
    for level_a, level_b in zip(incremental._levels, rebuilt._levels):
        np.testing.assert_array_equal(level_a, level_b)


def test_sum_tree_refuses_bad_input():
    tree = SumTree(10)
    with pytest.raises(IndexError, match="leaf indices"):
        tree.update([16], [1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.update([0], [-1.0])
    with pytest.raises(ValueError, match="total weight is 0"):
        tree.sample([0.0])
    with pytest.raises(ValueError, match="power of two"):
        SumTree(10, fanout=3)


@pytest.mark.parametrize("capacity, fanout, top_nodes", SHAPES)
def test_min_tree_tracks_the_minimum_and_its_leftmost_leaf(capacity, fanout, top_nodes):
    rng = np.random.default_rng(3)
    tree = MinTree(capacity, fanout=fanout, top_nodes=top_nodes)
    assert tree.argmin() == -1 and tree.min() == np.inf
    reference = np.full(tree.capacity, np.inf)
    for _ in range(40):
        indices = rng.choice(capacity, size=rng.integers(1, min(capacity, 30) + 1), replace=False)
        values = np.where(rng.random(len(indices)) < 0.2, np.inf, rng.integers(0, 20, len(indices)))
        tree.update(indices, values)
        reference[indices] = values
        assert tree.min() == reference.min()
        expected = int(np.argmin(reference)) if np.isfinite(reference.min()) else -1
        assert tree.argmin() == expected


def test_tie_breaking_min_tree_prefers_the_smaller_tie_among_equal_values():
    rng = np.random.default_rng(4)
    tree = MinTree(3000, fanout=4, top_nodes=8, tie_break=True)
    values = np.full(tree.capacity, np.inf)
    ties = np.full(tree.capacity, np.iinfo(np.int64).max)
    for step in range(40):
        indices = rng.choice(3000, size=50, replace=False)
        new_values = rng.integers(0, 3, 50).astype(np.float64)     # many equal values
        new_ties = step * 100 + rng.permutation(50)
        tree.update(indices, new_values, ties=new_ties)
        values[indices], ties[indices] = new_values, new_ties
        best = np.lexsort((ties, values))[0]
        assert tree.argmin() == best and tree.min() == values[best]
    tree.update(np.arange(3000), np.inf, ties=0)
    assert tree.argmin() == -1
