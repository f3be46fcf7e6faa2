"""The placement rule: earliest offset in the horizon where the job fits for its whole duration."""

import numpy as np
import pytest

from menger.apps.cluster.placement import NO_FIT, earliest_offset, earliest_offsets


def reference_offset(used, duration, demand, capacity):
    """Literal reading of the rule, one candidate offset at a time."""
    horizon = len(used)
    for offset in range(horizon - duration + 1):
        if np.all(used[offset:offset + duration] + demand <= capacity):
            return offset
    return NO_FIT


def test_empty_cluster_starts_now():
    used = np.zeros((5, 2), dtype=np.int64)
    assert earliest_offset(used, 3, np.array([4, 4]), 10) == 0


def test_waits_for_a_gap_long_enough():
    used = np.zeros((8, 2), dtype=np.int64)
    used[0, 0] = 8   # busy now
    used[3, 0] = 8   # a one-step gap at rows 1..2 is too short for duration 3
    assert earliest_offset(used, 3, np.array([5, 1]), 10) == 4
    assert earliest_offset(used, 2, np.array([5, 1]), 10) == 1


def test_the_last_offset_of_the_horizon_counts_and_nothing_beyond():
    used = np.zeros((6, 1), dtype=np.int64)
    used[:3] = 10
    assert earliest_offset(used, 3, np.array([1]), 10) == 3
    assert earliest_offset(used, 4, np.array([1]), 10) == NO_FIT


def test_a_demand_on_any_resource_can_block():
    used = np.array([[0, 9], [0, 9], [0, 0]], dtype=np.int64)
    assert earliest_offset(used, 1, np.array([10, 2]), 10) == 2


def test_empty_slot_never_fits():
    used = np.zeros((4, 2), dtype=np.int64)
    offsets = earliest_offsets(used, np.array([0, 2]), np.array([[0, 0], [3, 3]]), 10)
    assert offsets.tolist() == [NO_FIT, 0]


@pytest.mark.parametrize("seed", range(5))
def test_batch_and_single_forms_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    used = rng.integers(0, 9, size=(12, 3))
    durations = rng.integers(1, 13, size=40)
    demands = rng.integers(0, 6, size=(40, 3))
    expected = [reference_offset(used, d, r, 10) for d, r in zip(durations, demands)]
    assert earliest_offsets(used, durations, demands, 10).tolist() == expected
    assert [earliest_offset(used, int(d), r, 10) for d, r in zip(durations, demands)] == expected
    assert NO_FIT in expected and 0 in expected and any(e > 0 for e in expected)
