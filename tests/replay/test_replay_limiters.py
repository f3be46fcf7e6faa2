"""The rate limiter primitive: Reverb's rule, the deadlock rules (checked by searching the states), restores."""
import itertools
import math
import sys

import pytest

from menger.replay import MinSize, Queue, RateLimiter, SampleToInsertRatio


def counted(limiter: RateLimiter, inserts: int, samples: int, deletes: int = 0) -> RateLimiter:
    limiter.inserts, limiter.samples, limiter.deletes = inserts, samples, deletes
    return limiter


def test_the_rule_is_reverbs():
    limiter = RateLimiter(samples_per_insert=2, min_size_to_sample=3, min_diff=4, max_diff=10)
    # Below the minimum size inserts are free and samples wait.
    counted(limiter, inserts=2, samples=0)
    assert limiter.can_insert(1) and not limiter.can_sample(1)
    # From there on: an insert of n passes while (inserts + n) * spi - samples <= max_diff ...
    counted(limiter, inserts=5, samples=0)            # diff 10
    assert not limiter.can_insert(1) and limiter.can_sample(6) and not limiter.can_sample(7)
    counted(limiter, inserts=5, samples=2)            # diff 8: one more insert makes 10
    assert limiter.can_insert(1) and not limiter.can_insert(2)
    # ... and a sample of n while inserts * spi - samples - n >= min_diff.
    assert limiter.can_sample(4) and not limiter.can_sample(5)
    assert limiter.error == 8 - 3 * 2                  # Reverb's documented error: (inserts - min) * spi - samples


def test_admissible_inserts_counts_what_would_pass_one_after_another():
    for spi, min_size, window in [(1, 1, (0, 5)), (3, 4, (6, 30)), (0.5, 2, (-3, 7)), (8, 10, (70, 90))]:
        for inserts, samples in itertools.product(range(0, 14), range(0, 40, 3)):
            limiter = counted(RateLimiter(spi, min_size, *window), inserts, samples)
            expected = 0
            while expected < 12 and limiter.can_insert(expected + 1):
                expected += 1
            assert limiter.admissible_inserts(12) == expected, (spi, inserts, samples)


def test_a_window_narrower_than_reverbs_rule_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match=r"\[0, 7\] is 7 wide, narrower than 2 \* max\(1, samples_per_insert=4\) = 8"):
        RateLimiter(4, 1, 0, 7)
    RateLimiter(4, 1, 0, 8)                                   # exactly 2 * max(1, spi) passes
    with pytest.raises(ValueError, match=r"= 2 \(Reverb's rule\)"):
        RateLimiter(0.25, 1, 0, 1.5)
    with pytest.raises(ValueError, match="error_buffer >= 16"):
        SampleToInsertRatio(samples_per_insert=16, min_size_to_sample=100, error_buffer=10)
    SampleToInsertRatio(samples_per_insert=16, min_size_to_sample=100, error_buffer=16)


def test_constructors_check_their_arguments():
    for bad in [dict(samples_per_insert=0), dict(samples_per_insert=math.inf), dict(min_size_to_sample=0),
                dict(min_size_to_sample=1.5), dict(min_diff=5, max_diff=5), dict(min_diff=math.nan)]:
        args = dict(samples_per_insert=1, min_size_to_sample=1, min_diff=0, max_diff=10) | bad
        with pytest.raises(ValueError):
            RateLimiter(**args)
    with pytest.raises(ValueError, match="lies above"):
        SampleToInsertRatio(1, 10, error_buffer=(20, 40))
    with pytest.raises(ValueError, match="at least 2 items"):
        Queue(1)


def test_sample_to_insert_ratio_centres_its_window_on_min_size_times_spi():
    limiter = SampleToInsertRatio(samples_per_insert=4, min_size_to_sample=100, error_buffer=50)
    assert (limiter.min_diff, limiter.max_diff) == (350, 450)
    assert SampleToInsertRatio(4, 100, error_buffer=(10, 500)).params == (4, 100, 10, 500)


def test_min_size_never_blocks_inserts():
    limiter = MinSize(10)
    for inserts in [0, 9, 10, 10**6, 10**12]:
        counted(limiter, inserts, samples=0)
        assert limiter.can_insert(1) and limiter.can_insert(10**6)
        assert limiter.admissible_inserts(1000) == 1000
    assert not counted(limiter, 9, 0).can_sample(1) and counted(limiter, 10, 10**9).can_sample(10**6)
    assert limiter.largest_sample_batch() is None


def test_queue_is_reverbs_queue_and_holds_n():
    assert Queue(4).params == (1, 1, 0, 4)
    queue = Queue(4)
    counted(queue, inserts=4, samples=0)
    assert not queue.can_insert(1) and queue.can_sample(4) and not queue.can_sample(5)
    counted(queue, inserts=4, samples=4, deletes=4)
    assert queue.can_insert(4) and not queue.can_insert(5) and not queue.can_sample(1)


def reachable_deadlock(limiter: RateLimiter, batch: int, max_inserts: int = 60) -> bool:
    """Search every state reachable by single inserts and samples of ``batch`` (no deletes): is one stuck?"""
    seen, frontier = set(), [(0, 0)]
    while frontier:
        state = frontier.pop()
        if state in seen:
            continue
        seen.add(state)
        inserts, samples = state
        counted(limiter, inserts, samples)
        can_insert, can_sample = limiter.can_insert(1), limiter.can_sample(batch)
        if not can_insert and not can_sample:
            return True
        if can_insert and inserts < max_inserts:
            frontier.append((inserts + 1, samples))
        if can_sample:
            frontier.append((inserts, samples + batch))
    return False


@pytest.mark.parametrize("spi, min_size, window", [(1, 1, (0, 2)), (1, 1, (0, 5)), (1, 3, (1, 5)), (2, 2, (1, 8)),
                                                   (3, 5, (10, 19)), (1, 4, (1.5, 6.5)), (4, 2, (4, 12)),
                                                   (8, 3, (16, 40))])
def test_the_batch_deadlock_rule_is_exact_for_integer_samples_per_insert(spi, min_size, window):
    """Refused batch sizes can deadlock, admitted ones never do, as a search of the reachable states shows."""
    limiter = RateLimiter(spi, min_size, *window)
    for batch in range(1, 20):
        assert limiter.deadlocks(batch) == reachable_deadlock(limiter, batch), batch
    largest = limiter.largest_sample_batch()
    assert all(not limiter.deadlocks(batch) for batch in range(1, largest + 1))
    refused = next(batch for batch in range(1, 100) if limiter.deadlocks(batch))
    with pytest.raises(ValueError, match=f"Sample at most {largest} items at a time"):
        counted(limiter, 0, 0).check_sample_batch(refused)


@pytest.mark.parametrize("spi, window", [(0.5, (0, 4)), (0.25, (-2, 3)), (1.5, (0, 6))])
def test_largest_sample_batch_is_safe_for_fractional_samples_per_insert(spi, window):
    limiter = RateLimiter(spi, 2, *window)
    for batch in range(1, limiter.largest_sample_batch() + 1):
        assert not reachable_deadlock(limiter, batch, max_inserts=80)


def test_reverbs_window_rule_means_one_insert_or_one_sample_always_passes():
    for spi, width in [(1, 2), (4, 8), (0.25, 2), (2.5, 5)]:
        limiter = RateLimiter(spi, 3, 10, 10 + width)
        assert not reachable_deadlock(limiter, batch=1, max_inserts=80)


def test_a_restore_takes_counters_of_the_same_limiter_and_makes_its_size_the_tables():
    saved = counted(SampleToInsertRatio(2, 10, 8), inserts=500, samples=960, deletes=400).state()
    limiter = SampleToInsertRatio(2, 10, 8)
    assert limiter.restore(saved, size=100)
    assert (limiter.inserts, limiter.samples, limiter.deletes, limiter.size) == (500, 960, 400, 100)
    assert limiter.restore(saved, size=80) and limiter.size == 80 and limiter.diff == 40
    rebuilt = RateLimiter.from_state(saved, size=100)
    assert rebuilt.params == limiter.params and rebuilt.counters() == counted(limiter, 500, 960, 400).counters()
    with pytest.raises(ValueError, match="do not belong together"):
        RateLimiter.from_state(saved, size=501)


def test_a_restore_under_other_parameters_rebases_and_never_blocks_both_sides():
    saved = counted(SampleToInsertRatio(1, 10, 5), inserts=2000, samples=1985).state()   # inserts blocked
    for limiter in [MinSize(1), SampleToInsertRatio(4, 100, 20), SampleToInsertRatio(1, 10, 5), Queue(300)]:
        for size in [0, 5, 100, 300]:
            if limiter.restore(saved, size):
                continue
            assert limiter.size == size and limiter.diff <= limiter.max_diff
            assert limiter.can_insert(1) or limiter.can_sample(1) or size < limiter.min_size_to_sample


def test_after_any_restore_an_insert_or_a_sample_passes():
    """Whatever the counters were, a restored limiter is never stuck (the window rule): Reverb #103 hung."""
    for spi, min_size, buffer in [(1, 10, 2), (4, 50, 4), (0.5, 20, 3)]:
        saved_limiter = SampleToInsertRatio(spi, min_size, buffer)
        for inserts, samples, size in itertools.product([0, 30, 60, 200], range(0, 800, 37), [0, 15, 60, 200]):
            if size > inserts:
                continue
            limiter = SampleToInsertRatio(spi, min_size, buffer)
            limiter.restore(counted(saved_limiter, inserts, samples).state(), size)
            assert limiter.can_insert(1) or limiter.can_sample(1), (inserts, samples, size)


def test_a_limiter_limits_one_table():
    limiter = MinSize(1)
    limiter.claim("a")
    with pytest.raises(ValueError, match="already limits table 'a'"):
        limiter.claim("b")


def test_repr_and_reasons_name_the_numbers():
    limiter = counted(SampleToInsertRatio(2, 10, 4), inserts=12, samples=0)
    assert repr(MinSize(3)) == "MinSize(3)" and repr(Queue(5)) == "Queue(5)"
    assert repr(RateLimiter(1, 3, -1, 4)) == ("RateLimiter(samples_per_insert=1, min_size_to_sample=3, min_diff=-1, "
                                              "max_diff=4)")
    assert "window [-inf, inf]" in MinSize(2).describe()
    assert "24 - samples" not in limiter.describe() and "size 12" in limiter.describe()
    assert "26 > max_diff 24" in limiter.insert_blocked_reason()
    assert "fewer than min_size_to_sample=10" in counted(limiter, 3, 0).sample_blocked_reason(1)
    assert sys.float_info.max == MinSize(1).max_diff
