"""Checkpoints: save -> load -> the same samples, bit for bit; restored tables are never stuck (Reverb #103)."""
import numpy as np
import pytest
from replay_items import SPEC, make_items, one_item

from menger.replay import (MinSize, Queue, ReplayTimeout, SampleToInsertRatio, Table, fifo, lifo, lowest_priority,
                           prioritized, uniform)

CONFIGS = {
    "prioritized-fifo": dict(sampler=prioritized(0.6), remover=fifo()),
    "prioritized-lowest-limited": dict(sampler=prioritized(1.0), remover=lowest_priority(), max_times_sampled=3),
    "uniform-lifo": dict(sampler=uniform(), remover=lifo()),
    "uniform-fifo-limited": dict(sampler=uniform(), remover=fifo(), max_times_sampled=2),   # rows emptied anywhere
    "fifo-fifo-limited": dict(sampler=fifo(), remover=fifo(), max_times_sampled=2),
}


def build(config: dict, seed: int, limiter=None) -> Table:
    return Table("replay", 64, rate_limiter=limiter or SampleToInsertRatio(2, 16, 24), item_spec=SPEC, seed=seed,
                 **config)


def drive(table: Table, rng: np.random.Generator, steps: int, start: int) -> int:
    """Actors and a learner in turn: insert a few, sample when allowed, update the priorities."""
    for _ in range(steps):
        count = int(rng.integers(1, 6))
        if table.can_insert(count):
            table.insert_batch(make_items(count, start), rng.random(count) + 0.01, timeout_s=0)
            start += count
        if table.can_sample(4):
            sample = table.sample(4, timeout_s=0)
            table.update_priorities(sample.keys, rng.random(4) + 0.01)
    return start


def same_samples(a: Table, b: Table, rounds: int):
    for _ in range(rounds):
        first, second = a.sample(4, timeout_s=0), b.sample(4, timeout_s=0)
        np.testing.assert_array_equal(first.keys, second.keys)
        np.testing.assert_array_equal(first.probabilities, second.probabilities)
        np.testing.assert_array_equal(first.table_size, second.table_size)
        for name in SPEC:
            np.testing.assert_array_equal(first.data[name], second.data[name])


@pytest.mark.parametrize("name", CONFIGS)
def test_a_restored_table_samples_exactly_what_the_original_would(name):
    original = build(CONFIGS[name], seed=1)
    next_id = drive(original, np.random.default_rng(0), 200, 0)
    state = original.state()
    restored = build(CONFIGS[name], seed=999)           # another seed: the state brings the generator
    restored.load_state(state)
    assert len(restored) == len(original) and restored.metrics() == original.metrics()
    # Going on the same way, both tables make the same decisions: inserts, evictions, samples, removals.
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    drive(original, a, 100, next_id)
    drive(restored, b, 100, next_id)
    for key in ["rows", "keys", "priorities", "times_sampled", "ticks", "free_rows", "next_seq", "rate_limiter"]:
        np.testing.assert_array_equal(original.state()[key], restored.state()[key])
    if original.can_sample(4):
        same_samples(original, restored, rounds=min(3, len(original) // 4))


def test_the_state_survives_the_checkpoint_format_bit_for_bit():
    from menger.checkpoint import flatten_state, unflatten_state

    original = build(CONFIGS["prioritized-fifo"], seed=2)
    drive(original, np.random.default_rng(1), 150, 0)
    tensors, structure = flatten_state({"replay": original.state()})
    restored = build(CONFIGS["prioritized-fifo"], seed=3)
    restored.load_state(unflatten_state(tensors, structure)["replay"])
    same_samples(original, restored, rounds=5)


def test_a_restored_table_can_be_inserted_into_and_sampled_at_once():
    original = build(CONFIGS["prioritized-fifo"], seed=4)
    rng = np.random.default_rng(2)
    drive(original, rng, 120, 0)
    while not original.can_insert(1):                       # leave it inside its window, as a trainer would
        original.sample(1, timeout_s=0)
    restored = build(CONFIGS["prioritized-fifo"], seed=4)
    restored.load_state(original.state())
    assert restored.rate_limiter.size == len(restored) == len(original)
    restored.insert(one_item(10_000), 1.0, timeout_s=0)
    assert len(restored.sample(4, timeout_s=0)) == 4


def test_reverb_103_a_checkpoint_never_brings_its_own_limiter():
    """The #103 story: a table saved with inserts blocked, loaded by code that built a MinSize table."""
    saved = build(CONFIGS["prioritized-fifo"], seed=5)
    start = 0
    while saved.can_insert(1):
        saved.insert(one_item(start), 1.0, timeout_s=0)
        start += 1
    with pytest.raises(ReplayTimeout):
        saved.insert(one_item(start), 1.0, timeout_s=0)        # the saved limiter blocks inserts
    restored = build(CONFIGS["prioritized-fifo"], seed=5, limiter=MinSize(1))
    restored.load_state(saved.state())
    assert restored.rate_limiter.params == MinSize(1).params
    assert restored.rate_limiter.size == len(restored) == len(saved)
    for i in range(100):                                     # the code's limiter rules: inserts never block
        restored.insert(one_item(start + i), 1.0, timeout_s=0)
    assert len(restored.sample(8, timeout_s=0)) == 8


def test_restoring_into_another_window_rebases_without_blocking_both_sides():
    saved = build(CONFIGS["prioritized-fifo"], seed=6)
    drive(saved, np.random.default_rng(3), 150, 0)
    for limiter in [SampleToInsertRatio(4, 10, 8), SampleToInsertRatio(1, 40, 2), Queue(64), MinSize(64)]:
        restored = build(CONFIGS["prioritized-fifo"], seed=6, limiter=limiter)
        restored.load_state(saved.state())
        assert limiter.size == len(restored)
        assert restored.can_insert(1) or restored.can_sample(1)


def test_a_state_from_a_differently_built_table_is_refused():
    state = build(CONFIGS["prioritized-fifo"], seed=7).state()
    other = Table("replay", 65, prioritized(0.6), fifo(), MinSize(1), item_spec=SPEC)
    with pytest.raises(ValueError, match="max_size: saved 64, here 65"):
        other.load_state(state)
    with pytest.raises(ValueError, match=r"sampler: saved \{'kind': 'prioritized', 'alpha': 0.6\}"):
        Table("replay", 64, prioritized(0.5), fifo(), MinSize(1), item_spec=SPEC).load_state(state)
    with pytest.raises(ValueError, match="item_spec"):
        Table("replay", 64, prioritized(0.6), fifo(), MinSize(1), item_spec={"x": ((), np.float32)}).load_state(state)
    with pytest.raises(ValueError, match="the state is of table 'replay'"):
        Table("other", 64, prioritized(0.6), fifo(), MinSize(1), item_spec=SPEC).load_state(state)
    with pytest.raises(ValueError, match="not a replay table state"):
        build(CONFIGS["prioritized-fifo"], seed=7).load_state({"format": "something else"})
    damaged = dict(state, free_rows=state["free_rows"][1:])
    with pytest.raises(ValueError, match="damaged"):
        build(CONFIGS["prioritized-fifo"], seed=7).load_state(damaged)


def test_a_restored_uniform_table_draws_as_the_original_after_its_highest_rows_left():
    """The uniform sampler draws below the highest row in use: a restore, which knows only the rows that hold
    items, must find the same bound as the table whose top items were deleted."""
    original = Table("replay", 64, uniform(), fifo(), MinSize(1), item_spec=SPEC, seed=3)
    keys = original.insert_batch(make_items(40), 1.0, timeout_s=0)
    original.sample(8, timeout_s=0)                     # the sampler has seen all 40 rows in use
    original.delete(keys[25:])
    restored = Table("replay", 64, uniform(), fifo(), MinSize(1), item_spec=SPEC, seed=4)
    restored.load_state(original.state())
    same_samples(original, restored, rounds=5)
