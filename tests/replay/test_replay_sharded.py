"""ShardedTables: the split follows priority mass, probabilities are over the union, keys route back, a blocked
shard blocks the whole batch, checkpoints resume bit for bit, unlike shards are refused."""
import threading
import time

import numpy as np
import pytest
from replay_items import SPEC, make_items

from menger.replay import (MinSize, RateLimiter, ReplayClosed, ReplayTimeout, ShardedTables, Table, fifo,
                           importance_weights, prioritized, uniform)


def shard(index: int, sampler=None, limiter=None, seed=None, spec=None, max_size=64) -> Table:
    return Table(f"replay{index}", max_size, sampler or prioritized(0.6), fifo(), limiter or MinSize(1),
                 item_spec=spec or SPEC, seed=index if seed is None else seed)


def filled(priorities: list, sampler=None, seed: int = 0, shard_seeds=(0, 1, 2)) -> ShardedTables:
    """One shard per list of priorities; shard s's items have ids 100 * s, 100 * s + 1, ... (their ``action``)."""
    tables = [shard(s, sampler, seed=shard_seeds[s]) for s in range(len(priorities))]
    for s, (table, p) in enumerate(zip(tables, priorities)):
        if len(p):
            table.insert_batch(make_items(len(p), start=100 * s), np.asarray(p, dtype=np.float64), timeout_s=0)
    return ShardedTables(tables, seed=seed)


def chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


# ----- the split ---------------------------------------------------------------------------------------------------
def test_shards_give_items_in_proportion_to_their_priority_mass():
    # Masses 1 : 2 : 5 with alpha = 1, sizes 20 : 10 : 5 the other way round (so a split by size would fail too).
    replay = filled([[0.05] * 20, [0.2] * 10, [1.0] * 5], sampler=prioritized(1.0), seed=3)
    counts = np.zeros(3)
    for _ in range(20):
        np.add.at(counts, replay.sample(1000, timeout_s=0).keys % 3, 1)
    assert counts.sum() == 20_000
    limit = 13.8155                                   # chi-square, 2 degrees of freedom, p = 1e-3
    assert chi_square(counts, np.array([1, 2, 5]) / 8) < limit
    assert chi_square(counts, np.full(3, 1 / 3)) > 100 * limit            # an equal split is rejected, by far
    assert chi_square(counts, np.array([20, 10, 5]) / 35) > 100 * limit   # so is a split by size


def test_probabilities_are_priority_to_the_alpha_over_the_union():
    rng = np.random.default_rng(0)
    priorities = [rng.random(12) + 0.1, rng.random(5) * 4 + 0.1, rng.random(30) * 0.5 + 0.01]
    replay = filled(priorities, sampler=prioritized(0.6), seed=1)
    union = {100 * s + i: p for s, shard_priorities in enumerate(priorities) for i, p in enumerate(shard_priorities)}
    weights = {item: p ** 0.6 for item, p in union.items()}
    total = sum(weights.values())
    sample = replay.sample(256, timeout_s=0)
    expected = np.array([weights[item] / total for item in sample.data["action"]])
    np.testing.assert_allclose(sample.probabilities, expected, rtol=1e-12)
    assert np.all(sample.table_size == len(union))
    assert sample.min_probability == pytest.approx(min(weights.values()) / total, rel=1e-12)
    # Schaul et al.'s weights over the union: (N * P(i)) ** -beta over the largest, the union's least likely item.
    reference = (len(union) * expected) ** -0.4 / (len(union) * min(weights.values()) / total) ** -0.4
    np.testing.assert_allclose(importance_weights(sample, 0.4), reference, rtol=1e-10)


def test_uniform_shards_sample_the_union_uniformly():
    replay = filled([[1.0] * 3, [5.0] * 9, []], sampler=uniform(), seed=2)     # an empty shard is never asked
    sample = replay.sample(64, timeout_s=0)
    np.testing.assert_allclose(sample.probabilities, 1 / 12, rtol=1e-12)
    assert sample.min_probability == pytest.approx(1 / 12) and np.all(sample.table_size == 12)
    assert not np.any(sample.keys % 3 == 2)


def test_all_priorities_zero_samples_the_union_uniformly_as_one_table_does():
    replay = filled([[0.0] * 2, [0.0] * 6], seed=4, shard_seeds=(0, 1))
    sample = replay.sample(100, timeout_s=0)
    np.testing.assert_allclose(sample.probabilities, 1 / 8, rtol=1e-12)
    assert sample.min_probability == pytest.approx(1 / 8)


# ----- keys --------------------------------------------------------------------------------------------------------
def test_keys_are_unique_over_the_union_and_name_their_items():
    replay = filled([[1.0] * 8, [1.0] * 8, [1.0] * 8], seed=5)
    sample = replay.sample(500, timeout_s=0)
    assert np.array_equal(sample.data["action"] // 100, sample.keys % 3)     # the key's shard holds the item
    by_key = {}
    for key, item in zip(sample.keys.tolist(), sample.data["action"].tolist()):
        assert by_key.setdefault(key, item) == item                           # one key, one item
    assert len(by_key) == 24                                                  # 3 shards' keys 0..7 kept apart
    for name in SPEC:
        assert len(sample.data[name]) == 500


def test_update_priorities_and_delete_route_to_the_keys_shard():
    replay = filled([[1.0] * 6, [1.0] * 6, [1.0] * 6], seed=6)
    sample = replay.sample(200, timeout_s=0)
    before = [replay.shard(s).state()["priorities"] for s in range(3)]
    of_shard_2 = np.unique(sample.keys[sample.keys % 3 == 2])
    assert replay.update_priorities(of_shard_2, 7.0) == len(of_shard_2)
    after = [replay.shard(s).state()["priorities"] for s in range(3)]
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert np.count_nonzero(after[2] == 7.0) == len(of_shard_2)

    of_shard_1 = np.unique(sample.keys[sample.keys % 3 == 1])
    assert replay.delete(of_shard_1) == len(of_shard_1)
    assert [replay.shard(s).size for s in range(3)] == [6, 6 - len(of_shard_1), 6]
    assert replay.delete(of_shard_1) == 0                                     # gone already
    assert replay.update_priorities(of_shard_1, 1.0) == 0
    assert replay.metrics()["replay/updates_ignored"] == len(of_shard_1)


def test_bad_priorities_are_refused_before_any_shard_is_touched():
    replay = filled([[1.0] * 4, [1.0] * 4], seed=7, shard_seeds=(0, 1))
    keys = replay.sample(8, timeout_s=0).keys
    before = [replay.shard(s).state()["priorities"] for s in range(2)]
    with pytest.raises(ValueError, match="finite and >= 0"):
        replay.update_priorities(keys, np.r_[np.ones(len(keys) - 1), np.nan])
    for s in range(2):
        np.testing.assert_array_equal(replay.shard(s).state()["priorities"], before[s])


# ----- limiters ----------------------------------------------------------------------------------------------------
def blocked_replay() -> ShardedTables:
    """Shard 1 holds 2 items of the 5 its limiter needs, and the most mass, so every batch asks it."""
    tables = [shard(0), shard(1, limiter=MinSize(5)), shard(2)]
    tables[0].insert_batch(make_items(4), 1.0, timeout_s=0)
    tables[1].insert_batch(make_items(2, start=100), 50.0, timeout_s=0)
    tables[2].insert_batch(make_items(4, start=200), 1.0, timeout_s=0)
    return ShardedTables(tables, seed=8)


def test_a_shard_whose_limiter_blocks_makes_the_batch_time_out_whole():
    replay = blocked_replay()
    rng_before = replay.state()["rng"]
    assert not replay.can_sample(32)
    started = time.monotonic()
    with pytest.raises(ReplayTimeout, match=r"shard 1 \(table 'replay1'\)") as caught:
        replay.sample(32, timeout_s=0.05)
    assert time.monotonic() - started >= 0.05
    assert caught.value.shard == 1 and caught.value.table == "replay1" and caught.value.operation == "sample"
    assert "min_size_to_sample=5" in str(caught.value) and "nothing was sampled" in str(caught.value)
    assert replay.metrics()["replay/samples"] == 0                          # no shard handed anything out
    assert replay.state()["rng"] == rng_before                              # nor was the generator moved
    replay.shard(1).insert_batch(make_items(3, start=102), 50.0, timeout_s=0)
    assert replay.can_sample(32) and len(replay.sample(32, timeout_s=0)) == 32


def test_a_waiting_sample_passes_once_the_blocked_shard_is_filled_and_the_wait_leaves_no_trace():
    replay = blocked_replay()
    filler = threading.Timer(0.05, lambda: replay.shard(1).insert_batch(make_items(3, start=102), 50.0,
                                                                         timeout_s=0))
    filler.start()
    waited = replay.sample(32, timeout_s=5.0)
    filler.join()
    assert len(waited) == 32 and replay.metrics()["replay/sample_blocked_s"] > 0
    unblocked = blocked_replay()                      # the same, filled before sampling: the same batch
    unblocked.shard(1).insert_batch(make_items(3, start=102), 50.0, timeout_s=0)
    at_once = unblocked.sample(32, timeout_s=0)
    np.testing.assert_array_equal(waited.keys, at_once.keys)
    np.testing.assert_array_equal(waited.probabilities, at_once.probabilities)


def test_an_insert_landing_while_the_split_reads_the_shards_is_seen_whole():
    replay = blocked_replay()                      # shard 1 is blocked until 3 more items land
    shard_1 = replay.shard(1)
    asked = shard_1.can_sample
    landed = []

    def can_sample_after_an_insert(count):         # the actor's insert lands after the split read the masses
        if not landed:
            landed.append(shard_1.insert_batch(make_items(3, start=102), 50.0, timeout_s=0))
        return asked(count)

    shard_1.can_sample = can_sample_after_an_insert
    mixed = replay.sample(32, timeout_s=0)
    unblocked = blocked_replay()
    unblocked.shard(1).insert_batch(make_items(3, start=102), 50.0, timeout_s=0)
    at_once = unblocked.sample(32, timeout_s=0)
    np.testing.assert_array_equal(mixed.keys, at_once.keys)          # the split was drawn again, after the insert
    np.testing.assert_array_equal(mixed.probabilities, at_once.probabilities)


def test_close_wakes_a_waiting_sample():
    replay = blocked_replay()
    closer = threading.Timer(0.05, replay.close)
    closer.start()
    with pytest.raises(ReplayClosed):
        replay.sample(32, timeout_s=5.0)
    closer.join()
    with pytest.raises(ReplayClosed):
        replay.shard(0).insert_batch(make_items(1), 1.0, timeout_s=0)


def test_empty_shards_time_out_saying_so():
    replay = ShardedTables([shard(0), shard(1)], seed=0)
    with pytest.raises(ReplayTimeout, match="every shard is empty") as caught:
        replay.sample(4, timeout_s=0)
    assert caught.value.shard is None


def test_a_batch_whose_part_could_deadlock_a_shard_is_refused_at_once():
    # spi = 4, window [0, 12]: one table serves batches of 12 (diff moves in steps of 4), but a part of 11 can
    # wait for inserts that wait for it, and a sharded batch of 12 can ask one shard for 11.
    limiter = RateLimiter(4, 1, 0, 12)
    assert not limiter.deadlocks(12) and limiter.deadlocks(11)
    replay = ShardedTables([shard(0), shard(1, limiter=limiter)], seed=0)
    with pytest.raises(ValueError, match=r"shard 1 \(table 'replay1'\) refuses 11, so sharded batches of at most 10"):
        replay.sample(12, timeout_s=0)


# ----- checkpoints -------------------------------------------------------------------------------------------------
def test_a_restored_replay_samples_exactly_what_the_original_would():
    rng = np.random.default_rng(9)
    original = filled([rng.random(20) + 0.1, rng.random(7) + 0.1, rng.random(13) + 0.1], seed=10)
    for _ in range(5):
        sample = original.sample(16, timeout_s=0)
        original.update_priorities(sample.keys, rng.random(16) + 0.05)
    state = original.state()
    restored = ShardedTables([shard(s, seed=100 + s) for s in range(3)], seed=999)   # the state brings the seeds
    restored.load_state(state)
    assert restored.metrics() == original.metrics()
    for round_ in range(5):
        a, b = original.sample(16, timeout_s=0), restored.sample(16, timeout_s=0)
        np.testing.assert_array_equal(a.keys, b.keys)
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
        np.testing.assert_array_equal(a.table_size, b.table_size)
        assert a.min_probability == b.min_probability
        for name in SPEC:
            np.testing.assert_array_equal(a.data[name], b.data[name])
        new = np.random.default_rng(round_).random(16) + 0.05
        original.update_priorities(a.keys, new)
        restored.update_priorities(b.keys, new)


def test_a_state_from_other_shards_is_refused():
    state = filled([[1.0] * 3, [1.0] * 3], seed=0, shard_seeds=(0, 1)).state()
    with pytest.raises(ValueError, match="has 2 shards"):
        ShardedTables([shard(0), shard(1), shard(2)], seed=0).load_state(state)
    with pytest.raises(ValueError, match="in the order they were saved"):
        ShardedTables([shard(1), shard(0)], seed=0).load_state(state)
    with pytest.raises(ValueError, match="not a sharded replay state"):
        ShardedTables([shard(0), shard(1)], seed=0).load_state(state["shards"][0])


# ----- construction, metrics ---------------------------------------------------------------------------------------
def test_unlike_shards_are_refused():
    other_spec = dict(SPEC, obs=((8,), np.float32))
    with pytest.raises(ValueError, match=r"shard 1 \(table 'replay1'\) holds items .* same item_spec"):
        ShardedTables([shard(0), shard(1, spec=other_spec)], seed=0)
    with pytest.raises(ValueError, match="same sampler"):
        ShardedTables([shard(0, sampler=prioritized(0.6)), shard(1, sampler=prioritized(0.5))], seed=0)
    with pytest.raises(ValueError, match="same sampler"):
        ShardedTables([shard(0, sampler=prioritized(0.6)), shard(1, sampler=uniform())], seed=0)
    with pytest.raises(ValueError, match="no priority mass"):
        ShardedTables([shard(0, sampler=fifo()), shard(1, sampler=fifo())], seed=0)
    table = shard(0)
    with pytest.raises(ValueError, match="is also an earlier shard"):
        ShardedTables([table, table], seed=0)
    with pytest.raises(ValueError, match="non-empty list"):
        ShardedTables([], seed=0)
    with pytest.raises(IndexError, match="actor_id % num_shards"):
        ShardedTables([shard(0)], seed=0).shard(1)


def test_metrics_combine_the_shards():
    replay = filled([[1.0, 2.0], [3.0, 4.0, 5.0], []], seed=0)
    replay.sample(10, timeout_s=0)
    figures = replay.metrics()
    assert figures["replay/shards"] == 3 and figures["replay/size"] == 5 == replay.size == len(replay)
    assert [figures[f"replay/shard{s}/size"] for s in range(3)] == [2, 3, 0]
    assert figures["replay/bytes"] == replay.nbytes == sum(figures[f"replay/shard{s}/bytes"] for s in range(3))
    assert figures["replay/inserts"] == 5 and figures["replay/samples"] == 10
    assert figures["replay/samples_per_insert"] == 2.0
    assert figures["replay/priority_min"] == 1.0 and figures["replay/priority_max"] == 5.0   # the empty shard's 0s
    assert figures["replay/priority_mean"] == pytest.approx(3.0)                             # are left out


def test_priority_mass_and_min_probability_of_a_table():
    table = shard(0, sampler=prioritized(0.5))
    assert table.priority_mass() == 0.0 and table.min_probability() == 0.0
    table.insert_batch(make_items(3), np.array([1.0, 4.0, 0.0]), timeout_s=0)
    assert table.priority_mass() == pytest.approx(3.0)
    assert table.min_probability() == pytest.approx(1 / 3)       # the smallest nonzero: priority 1 of mass 3
    assert shard(1, sampler=uniform()).priority_mass() == 0.0
    with pytest.raises(ValueError, match="no priority mass"):
        shard(2, sampler=fifo()).priority_mass()
