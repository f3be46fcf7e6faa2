"""Table semantics: removers, max_times_sampled, queues, keys, priorities, validation, deadlines, weights."""
import threading
import time

import numpy as np
import pytest
from replay_items import SPEC, make_items, one_item

from menger.replay import (MinSize, ReplayClosed, ReplayTimeout, SampleToInsertRatio, Table, fifo,
                           importance_weights, lifo, lowest_priority, prioritized, uniform)


def table(max_size=10, sampler=None, remover=None, limiter=None, max_times_sampled=0, seed=0):
    return Table("t", max_size, sampler or uniform(), remover or fifo(), limiter or MinSize(1),
                 max_times_sampled=max_times_sampled, item_spec=SPEC, seed=seed)


def contents(t: Table) -> list[int]:
    """The ids of the items in the table, oldest first."""
    state = t.state()
    return state["data"]["action"].tolist()


# ----- removers ------------------------------------------------------------------------------------------------
def test_fifo_remover_evicts_the_oldest():
    t = table(max_size=5)
    t.insert_batch(make_items(5), 1.0, timeout_s=0)
    t.insert_batch(make_items(3, start=5), 1.0, timeout_s=0)
    assert contents(t) == [3, 4, 5, 6, 7]
    t.insert(one_item(8), 1.0, timeout_s=0)
    assert contents(t) == [4, 5, 6, 7, 8]
    t.insert_batch(make_items(12, start=9), 1.0, timeout_s=0)       # more than max_size at once: the newest stay
    assert contents(t) == [16, 17, 18, 19, 20] and t.metrics()["replay/evicted"] == 16


def test_lifo_remover_drops_new_items_once_full():
    t = table(max_size=4, remover=lifo())
    keys = t.insert_batch(make_items(6), 1.0, timeout_s=0)
    assert contents(t) == [0, 1, 2, 3]
    assert t.update_priorities(keys, np.full(6, 2.0)) == 4         # the dropped items' keys are gone
    assert t.metrics()["replay/updates_ignored"] == 2


def test_lowest_priority_remover_evicts_the_lowest_and_the_oldest_among_equals():
    t = table(max_size=4, remover=lowest_priority())
    t.insert_batch(make_items(4), [3.0, 1.0, 2.0, 1.0], timeout_s=0)
    t.insert(one_item(4), 5.0, timeout_s=0)         # evicts item 1 (priority 1, older than item 3)
    assert sorted(contents(t)) == [0, 2, 3, 4]
    t.insert(one_item(5), 0.5, timeout_s=0)         # the new item is the lowest: it is the one dropped
    assert sorted(contents(t)) == [0, 2, 3, 4]
    keys = t.state()["keys"]
    t.update_priorities(keys[[0]], [1.0])           # item 0 now ties with item 3 and was updated later
    t.insert(one_item(6), 9.0, timeout_s=0)
    assert sorted(contents(t)) == [0, 2, 4, 6]


@pytest.mark.parametrize("remover", [fifo(), lifo(), lowest_priority()])
def test_the_table_never_exceeds_max_size_and_batches_equal_single_inserts(remover):
    rng = np.random.default_rng(5)
    one_by_one, batched = table(max_size=7, remover=remover), table(max_size=7, remover=remover)
    start = 0
    for count in [3, 1, 6, 9, 2, 15, 1, 7]:
        priorities = rng.integers(1, 4, size=count).astype(float)
        keys = [one_by_one.insert(one_item(start + i), priorities[i], timeout_s=0) for i in range(count)]
        assert batched.insert_batch(make_items(count, start), priorities, timeout_s=0).tolist() == keys
        assert len(one_by_one) == len(batched) <= 7
        start += count
    a, b = one_by_one.state(), batched.state()
    for name in ["rows", "keys", "priorities", "times_sampled", "ticks", "free_rows"]:
        np.testing.assert_array_equal(a[name], b[name])
    assert a["rate_limiter"] == b["rate_limiter"] and a["next_seq"] == b["next_seq"] and a["tick"] == b["tick"]


# ----- max_times_sampled and queues -----------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", [uniform(), prioritized(1.0), fifo(), lifo()])
def test_an_item_sampled_max_times_sampled_times_leaves(sampler):
    t = table(max_size=20, sampler=sampler, max_times_sampled=3)
    t.insert_batch(make_items(10), np.arange(1, 11), timeout_s=0)
    counts = {}
    for _ in range(6):
        sample = t.sample(5, timeout_s=0)
        for key in sample.keys.tolist():
            counts[key] = counts.get(key, 0) + 1
    assert sum(counts.values()) == 30 and max(counts.values()) <= 3 and len(t) == 0
    t.insert(one_item(10), 1.0, timeout_s=0)
    t.sample(2, timeout_s=0)
    with pytest.raises(ReplayTimeout, match=r"can be sampled 1 more times \(max_times_sampled=3\)"):
        t.sample(2, timeout_s=0)


def test_draws_after_an_item_is_used_up_see_the_table_without_it():
    t = table(max_size=10, sampler=prioritized(1.0), max_times_sampled=1)
    t.insert_batch(make_items(3), [1.0, 2.0, 3.0], timeout_s=0)
    sample = t.sample(3, timeout_s=0)
    assert sorted(sample.data["action"].tolist()) == [0, 1, 2]        # each item once: without replacement
    weights = sample.data["action"] + 1.0
    left = 6.0 - np.concatenate([[0.0], np.cumsum(weights)[:-1]])
    np.testing.assert_allclose(sample.probabilities, weights / left)
    assert sample.table_size.tolist() == [3, 2, 1]


def test_fifo_sampler_returns_the_oldest_until_used_up():
    t = table(max_size=10, sampler=fifo(), max_times_sampled=2)
    t.insert_batch(make_items(4), 1.0, timeout_s=0)
    sample = t.sample(5, timeout_s=0)
    assert sample.data["action"].tolist() == [0, 0, 1, 1, 2] and sample.table_size.tolist() == [4, 4, 3, 3, 2]
    assert contents(t) == [2, 3]
    unlimited = table(max_size=10, sampler=lifo())
    unlimited.insert_batch(make_items(4), 1.0, timeout_s=0)
    assert unlimited.sample(3, timeout_s=0).data["action"].tolist() == [3, 3, 3]


def test_queue_is_a_fifo_queue_of_n():
    queue = Table.queue("q", 3, item_spec=SPEC)
    queue.insert_batch(make_items(3), 1.0, timeout_s=0)
    with pytest.raises(ReplayTimeout, match="'q': insert of 1 item"):
        queue.insert(one_item(3), 1.0, timeout_s=0.01)
    assert queue.sample(2, timeout_s=0).data["action"].tolist() == [0, 1]
    queue.insert_batch(make_items(2, start=3), 1.0, timeout_s=0)
    with pytest.raises(ReplayTimeout) as partial:
        queue.insert_batch(make_items(2, start=5), 1.0, timeout_s=0.01)
    assert partial.value.completed == 0
    assert [queue.sample(1, timeout_s=0).data["action"][0] for _ in range(3)] == [2, 3, 4]
    with pytest.raises(ReplayTimeout, match="holds 0 items"):
        queue.sample(1, timeout_s=0.01)
    with pytest.raises(ValueError, match="can deadlock"):
        queue.sample(4, timeout_s=1)


# ----- keys and priorities --------------------------------------------------------------------------------------
def test_keys_are_unique_and_increase_and_removed_keys_are_ignored():
    t = table(max_size=4)
    first = t.insert_batch(make_items(4), 1.0, timeout_s=0)
    later = t.insert_batch(make_items(4, start=4), 1.0, timeout_s=0)
    keys = np.concatenate([first, later])
    assert len(set(keys.tolist())) == 8 and (np.diff(keys) > 0).all()
    assert t.update_priorities(keys, np.full(8, 3.0)) == 4
    assert t.metrics()["replay/updates_ignored"] == 4 and t.metrics()["replay/priority_max"] == 3.0


def test_a_repeated_key_takes_its_last_priority():
    t = table(sampler=prioritized(1.0))
    keys = t.insert_batch(make_items(2), 1.0, timeout_s=0)
    assert t.update_priorities([keys[0], keys[1], keys[0]], [5.0, 2.0, 7.0]) == 2
    assert t.state()["priorities"].tolist() == [7.0, 2.0]


def test_priorities_are_checked():
    t = table()
    for bad in [-1.0, float("nan"), float("inf")]:
        with pytest.raises(ValueError, match="finite and >= 0"):
            t.insert(one_item(0), bad, timeout_s=0)
    with pytest.raises(ValueError, match="2 priorities for 3 items"):
        t.insert_batch(make_items(3), [1.0, 2.0], timeout_s=0)


def test_zero_priorities_are_never_sampled_and_all_zero_samples_uniformly():
    t = table(max_size=10, sampler=prioritized(0.0))
    keys = t.insert_batch(make_items(4), [0.0, 1.0, 0.0, 5.0], timeout_s=0)
    sample = t.sample(500, timeout_s=0)
    assert set(sample.data["action"].tolist()) == {1, 3}
    np.testing.assert_array_equal(sample.probabilities, 0.5)            # alpha 0: every nonzero alike
    t.update_priorities(keys, np.zeros(4))
    sample = t.sample(500, timeout_s=0)
    assert set(sample.data["action"].tolist()) == {0, 1, 2, 3} and (sample.probabilities == 0.25).all()


# ----- validation -----------------------------------------------------------------------------------------------
def test_items_must_match_the_spec():
    t = table()
    bad = one_item(0)
    del bad["done"]
    with pytest.raises(ValueError, match=r"missing \['done'\]"):
        t.insert(bad, 1.0, timeout_s=0)
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        t.insert(one_item(0) | {"extra": 1}, 1.0, timeout_s=0)
    with pytest.raises(ValueError, match=r"shape \(3,\), the item_spec says \(4,\)"):
        t.insert(one_item(0) | {"obs": np.zeros(3, np.float32)}, 1.0, timeout_s=0)
    with pytest.raises(ValueError, match="cannot hold without changing its kind"):
        t.insert(one_item(0) | {"action": 1.5}, 1.0, timeout_s=0)
    with pytest.raises(ValueError, match="holds 2 items, the others 3"):
        t.insert_batch(make_items(3) | {"done": np.zeros(2, bool)}, 1.0, timeout_s=0)


def test_configurations_that_can_only_hang_are_refused():
    with pytest.raises(ValueError, match="max_size=5 is below the limiter's min_size_to_sample=10"):
        table(max_size=5, limiter=MinSize(10))
    with pytest.raises(ValueError, match="samples_per_insert=4 asks for more samples"):
        table(max_size=100, limiter=SampleToInsertRatio(4, 10, 8), max_times_sampled=2)
    with pytest.raises(ValueError, match="sampler must be one of"):
        table(sampler=lowest_priority())
    with pytest.raises(ValueError, match="remover must be one of"):
        table(remover=uniform())
    t = table(max_size=3, max_times_sampled=2)
    with pytest.raises(ValueError, match="more samples than a full table can give"):
        t.sample(7, timeout_s=0)
    with pytest.raises(ValueError, match="Sample at most 16 items"):
        table(max_size=100, limiter=SampleToInsertRatio(1, 10, 8.5)).sample(32, timeout_s=0)


# ----- deadlines ------------------------------------------------------------------------------------------------
def test_a_blocked_sample_past_its_deadline_raises_replay_timeout():
    t = table(limiter=MinSize(3))
    t.insert_batch(make_items(2), 1.0, timeout_s=0)
    started = time.monotonic()
    with pytest.raises(ReplayTimeout) as error:
        t.sample(1, timeout_s=0.05)
    assert 0.04 < time.monotonic() - started < 2
    assert isinstance(error.value, TimeoutError) and error.value.table == "t"
    assert error.value.operation == "sample" and error.value.counters["inserts"] == 2
    message = str(error.value)
    assert "table 't': sample of 1 item(s) timed out after 0.05 s" in message
    assert "holds 2 items, fewer than min_size_to_sample=3" in message and "inserts=2, samples=0" in message
    assert t.metrics()["replay/sample_blocked_s"] > 0.03


def test_a_blocked_insert_past_its_deadline_raises_replay_timeout_with_what_went_in():
    t = table(max_size=100, limiter=SampleToInsertRatio(1, 5, 2))      # window [3, 7]: at most 7 unsampled
    with pytest.raises(ReplayTimeout) as error:
        t.insert_batch(make_items(10), 1.0, timeout_s=0.05)
    assert error.value.completed == 7 and len(error.value.keys) == 7 and len(t) == 7
    assert "(7 of the 10 went in)" in str(error.value) and "inserts wait for samples" in str(error.value)
    assert t.metrics()["replay/insert_blocked_s"] > 0.03


def test_a_waiting_sample_is_woken_by_an_insert_and_close_wakes_everyone():
    t = table(limiter=MinSize(1))
    got = []
    waiter = threading.Thread(target=lambda: got.append(t.sample(1, timeout_s=10).data["action"][0]))
    waiter.start()
    time.sleep(0.05)
    t.insert(one_item(42), 1.0, timeout_s=0)
    waiter.join(5)
    assert got == [42]
    queue = Table.queue("q", 2, item_spec=SPEC)
    errors = []
    blocked = threading.Thread(target=lambda: errors.append(pytest.raises(ReplayClosed, queue.sample, 1, 10)))
    blocked.start()
    time.sleep(0.05)
    queue.close()
    blocked.join(5)
    assert not blocked.is_alive() and errors
    with pytest.raises(ReplayClosed):
        queue.insert(one_item(0), 1.0, timeout_s=0)


def test_timeouts_are_checked():
    with pytest.raises(ValueError, match="timeout_s must be >= 0"):
        table().sample(1, timeout_s=-1)


# ----- probabilities and importance weights ---------------------------------------------------------------------
def test_probabilities_are_priority_to_the_alpha_over_the_sum():
    t = table(max_size=50, sampler=prioritized(0.6))
    priorities = np.linspace(0.1, 3.0, 30)
    t.insert_batch(make_items(30), priorities, timeout_s=0)
    sample = t.sample(64, timeout_s=0)
    weights = priorities ** 0.6
    np.testing.assert_allclose(sample.probabilities, weights[sample.data["action"]] / weights.sum(), rtol=1e-12)
    assert (sample.table_size == 30).all()
    assert sample.min_probability == pytest.approx(weights.min() / weights.sum(), rel=1e-12)


def test_importance_weights_against_a_direct_computation():
    t = table(max_size=50, sampler=prioritized(0.7))
    priorities = np.linspace(0.5, 4.0, 40)
    t.insert_batch(make_items(40), priorities, timeout_s=0)
    sample = t.sample(32, timeout_s=0)
    beta = 0.4
    probability = priorities ** 0.7 / (priorities ** 0.7).sum()
    direct = (40 * probability[sample.data["action"]]) ** -beta / (40 * probability.min()) ** -beta
    np.testing.assert_allclose(importance_weights(sample, beta), direct, rtol=1e-12)
    assert importance_weights(sample, 0.0).tolist() == [1.0] * 32
    uniform_table = table(max_size=50)
    uniform_table.insert_batch(make_items(40), priorities, timeout_s=0)
    np.testing.assert_allclose(importance_weights(uniform_table.sample(8, timeout_s=0), 0.9), 1.0)
    with pytest.raises(ValueError, match="beta"):
        importance_weights(sample, -1)


def test_metrics_and_bytes():
    t = table(max_size=1000, sampler=prioritized(0.5))
    assert t.nbytes > 1000 * 45 and t.metrics()["replay/size"] == 0
    t.insert_batch(make_items(100), np.linspace(1, 2, 100), timeout_s=0)
    t.sample(50, timeout_s=0)
    m = t.metrics()
    assert (m["replay/size"], m["replay/inserts"], m["replay/samples"]) == (100, 100, 50)
    assert m["replay/samples_per_insert"] == 0.5 and m["replay/bytes"] == t.nbytes
    assert (m["replay/priority_min"], m["replay/priority_max"]) == (1.0, 2.0)
    assert m["replay/priority_mean"] == pytest.approx(1.5)


@pytest.mark.parametrize("sampler", [uniform(), prioritized(0.5), fifo(), lifo()])
def test_a_long_random_run_matches_a_reference_model(sampler):
    """Inserts (single and batches), samples that use items up out of order, evictions: against plain lists.

    A small table wraps its insertion-order ring many times and packs it, with holes left by used-up items.
    """
    rng = np.random.default_rng(11)
    t = table(max_size=16, sampler=sampler, max_times_sampled=2)
    order, times, next_id = [], {}, 0
    for _ in range(1500):
        if rng.random() < 0.5 or len(order) < 4:
            count = int(rng.integers(1, 6))
            if count == 1:
                t.insert(one_item(next_id), float(rng.random() + 0.1), timeout_s=0)
            else:
                t.insert_batch(make_items(count, next_id), rng.random(count) + 0.1, timeout_s=0)
            order += list(range(next_id, next_id + count))
            times.update({i: 0 for i in range(next_id, next_id + count)})
            next_id += count
            while len(order) > 16:                    # the fifo remover
                del times[order.pop(0)]
        else:
            batch = int(rng.integers(1, 4))
            for drawn in t.sample(batch, timeout_s=0).data["action"].tolist():
                assert drawn in times                 # never an item already used up or evicted
                if sampler.kind == "fifo":
                    assert drawn == order[0]
                elif sampler.kind == "lifo":
                    assert drawn == order[-1]
                times[drawn] += 1
                if times[drawn] == 2:
                    order.remove(drawn)
                    del times[drawn]
        assert contents(t) == order and len(t) == len(order)
