"""The insertion-order log behind fifo/lifo: a pop over holes leaves the log ready for the fast path."""
import numpy as np

from menger.replay.selectors import OrderLog


def test_popping_past_a_hole_moves_the_tail_so_later_pops_stay_on_the_fast_path():
    log = OrderLog(8)
    log.add(np.arange(8))
    log.remove(np.array([0]))                       # a hole at the front (an item deleted by key)
    assert log.pop_oldest(2).tolist() == [1, 2]     # the slow path: it has to skip the hole

    def no_scan(n):
        raise AssertionError("pop_oldest scanned for live rows although none of the next ones is a hole")

    log.oldest = no_scan
    assert log.pop_oldest(3).tolist() == [3, 4, 5]  # the fast path: a plain window of live rows
    log.add(np.array([0, 1]))
    assert log.pop_oldest(4).tolist() == [6, 7, 0, 1]
