"""Samplers and removers: which items a table hands out, and which it drops when it is full.

A table is built with one of each (Reverb's selectors)::

    Table(..., sampler=prioritized(0.6), remover=fifo(), ...)

* samplers: `uniform` (every item alike), `prioritized(alpha)` (``P(i) = p_i ** alpha / sum_k p_k ** alpha``; a
  priority of 0 is never sampled, and if every priority is 0 the table samples uniformly, as Reverb does),
  `fifo` (the oldest item), `lifo` (the newest);
* removers: `fifo` (evict the oldest), `lifo` (the newest: once full, a new item is dropped on insert), and
  `lowest_priority` (the lowest priority; among equal ones the least recently inserted or updated).

Each selector keeps its own index over the table's rows, which the table tells what changed, under its lock::

    index.add(rows)         # rows just filled (add_one(row) for one)
    index.update(rows)      # their priorities changed
    index.remove(rows)      # rows emptied (remove_one(row) for one)

`WeightedIndex` (prioritized) is a `SumTree` of weights with a `MinTree` of the nonzero ones (the smallest
probability, for importance weights); `UniformIndex` (uniform) draws rows by rejection below the highest one in use,
with no tree to keep; `OrderLog` (fifo, lifo) is the rows in insertion order; `LowestPriorityIndex`
is a tie-breaking `MinTree`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from menger.replay.sumtree import MinTree, SumTree

__all__ = ["Selector", "fifo", "lifo", "lowest_priority", "prioritized", "uniform"]

SAMPLERS = ("uniform", "prioritized", "fifo", "lifo")
REMOVERS = ("fifo", "lifo", "lowest_priority")


@dataclass(frozen=True)
class Selector:
    """A sampler or remover by name (``alpha``: the priority exponent, for ``prioritized`` only)."""

    kind: str
    alpha: float | None = None

    def state(self) -> dict:
        return {"kind": self.kind, "alpha": self.alpha}

    def __repr__(self) -> str:
        return f"prioritized({self.alpha:g})" if self.kind == "prioritized" else f"{self.kind}()"


def uniform() -> Selector:
    return Selector("uniform")


def prioritized(alpha: float) -> Selector:
    alpha = float(alpha)
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"the priority exponent alpha must be a finite number >= 0, got {alpha}")
    return Selector("prioritized", alpha)


def fifo() -> Selector:
    return Selector("fifo")


def lifo() -> Selector:
    return Selector("lifo")


def lowest_priority() -> Selector:
    return Selector("lowest_priority")


def check_selector(selector, role: str) -> Selector:
    allowed = SAMPLERS if role == "sampler" else REMOVERS
    if not isinstance(selector, Selector) or selector.kind not in allowed:
        names = ", ".join(f"{name}()" if name != "prioritized" else "prioritized(alpha)" for name in allowed)
        raise ValueError(f"{role} must be one of {names} from menger.replay, got {selector!r}")
    return selector


class _LazyIndex(ABC):
    """An index over rows that reads the table's own arrays, refreshed only when it is asked something.

    ``add``, ``update`` and ``remove`` (and ``add_one``, ``remove_one``) only note which rows changed; ``sync``
    recomputes those rows from the table's arrays (priority, tick, and whether the row holds an item) and hands
    them to the tree in one vectorised call. So an actor's single-item inserts cost a list append each, and the
    tree sees the same values whatever the order and batching of the changes.
    """

    def __init__(self, rows: int):
        self._changed: list[np.ndarray] = []
        self._changed_one: list[int] = []
        self._pending = 0
        self._most_pending = max(rows, 4096)   # a table only inserted into still syncs now and then

    def add(self, rows: np.ndarray) -> None:
        self._changed.append(rows)
        self._note(len(rows))

    update = remove = add

    def add_one(self, row: int) -> None:
        self._changed_one.append(row)
        self._note(1)

    remove_one = add_one

    def _note(self, count: int) -> None:
        self._pending += count
        if self._pending > self._most_pending:
            self.sync()

    @abstractmethod
    def sync(self) -> None:
        """Apply the pending changes to the index structure."""

    def _take_changed(self) -> np.ndarray | None:
        if not self._changed and not self._changed_one:
            return None
        parts = self._changed
        if self._changed_one:
            parts = [*parts, np.array(self._changed_one, dtype=np.int64)]
        self._changed, self._changed_one, self._pending = [], [], 0
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class WeightedIndex(_LazyIndex):
    """Rows by weight ``p ** alpha`` (prioritized; 0 for a priority of 0, as Reverb).

    Reads the table's ``priorities`` and ``keys`` (-1: empty row); `draw` and `min_probability` sync first.
    """

    def __init__(self, rows: int, alpha: float, priorities: np.ndarray, keys: np.ndarray):
        super().__init__(rows)
        self.alpha = alpha
        self._priorities, self._keys = priorities, keys
        self.tree = SumTree(rows)
        self.nonzero = MinTree(rows)   # the nonzero weights (zero and empty rows hold inf): the smallest probability

    @property
    def nbytes(self) -> int:
        return self.tree.nbytes + self.nonzero.nbytes

    def weights(self, priorities: np.ndarray) -> np.ndarray:
        """Always through ``np.power`` on an array: its result for an element does not depend on the array's
        length (a NumPy scalar's ``**`` can differ in the last bit), so weights never depend on batching."""
        weights = np.power(priorities, self.alpha)
        weights[priorities == 0] = 0.0      # 0 ** 0 is 1 in NumPy; an item of priority 0 is never sampled
        return weights

    def sync(self) -> None:
        rows = self._take_changed()
        if rows is None:
            return
        weights = self.weights(self._priorities[rows])
        weights[self._keys[rows] < 0] = 0.0
        # A row changed twice appears twice, with the same (current) weight: either write is right.
        self.tree.update(rows, weights, validate=False)
        self.nonzero.update(rows, np.where(weights > 0, weights, np.inf), validate=False)

    def draw(self, n: int, rng: np.random.Generator, present) -> tuple[np.ndarray, np.ndarray, float]:
        """``n`` rows drawn independently: (rows, their weights, the total weight).

        With every weight 0 (all priorities 0), rows are drawn uniformly from ``present()``, each of weight 1.
        """
        self.sync()
        total = self.tree.total
        if total > 0:
            rows = self.tree.sample(rng.random(n) * total)
            return rows, self.tree.get(rows), total
        candidates = present()
        rows = candidates[rng.integers(0, len(candidates), size=n)]
        return rows, np.ones(n), float(len(candidates))

    def total(self) -> float:
        """The sampler's mass: the sum of the weights."""
        self.sync()
        return float(self.tree.total)

    def min_probability(self, size: int) -> float:
        """The smallest nonzero probability of any row now (1 / size when every weight is 0: draws are uniform)."""
        self.sync()
        total = self.tree.total
        if total <= 0:
            return 1.0 / size
        return float(self.nonzero.min()) / total


class UniformIndex(_LazyIndex):
    """Every item alike: a draw is a row uniform in [0, high), drawn again while it is empty, where ``high`` is one
    past the highest row that holds an item.

    A table fills its rows from 0 up and refills the last ones emptied first, so the items are dense below
    ``high`` and a draw is accepted almost always: no tree to update on insert, and a batch costs a few NumPy
    calls. Where fewer than a quarter of the rows below ``high`` hold items (many left from the middle), a draw
    picks from the list of those rows instead. Either way the draws depend only on which rows hold items and on
    the generator, not on the order of the changes, so a restored table draws as the saved one would.
    Reads the table's ``keys`` (-1: empty row); ``size()`` is the table's item count.
    """

    def __init__(self, rows: int, keys: np.ndarray, size):
        super().__init__(rows)
        self._keys, self._size = keys, size
        self._high = 0                       # one past the highest row holding an item, once synced

    @property
    def nbytes(self) -> int:
        return 0

    def sync(self) -> None:
        rows = self._take_changed()
        if rows is None:
            return
        filled = rows[self._keys[rows] >= 0]
        if len(filled):
            self._high = max(self._high, int(filled.max()) + 1)
        if self._high and self._keys[self._high - 1] < 0:        # the highest item left: find the next one down
            below = np.flatnonzero(self._keys[:self._high] >= 0)
            self._high = int(below[-1]) + 1 if len(below) else 0

    def total(self) -> float:
        """The sampler's mass: the number of items, each of weight 1."""
        return float(self._size())

    def draw(self, n: int, rng: np.random.Generator, present) -> tuple[np.ndarray, np.ndarray, float]:
        """``n`` rows drawn independently and uniformly from the filled ones: (rows, ones, their number).
        ``present`` is `WeightedIndex.draw`'s argument, unused here: the filled rows are all below ``high``."""
        self.sync()
        size = self._size()
        if 4 * size < self._high:                                  # sparse: the filled rows, none above high
            candidates = np.flatnonzero(self._keys[:self._high] >= 0)
            return candidates[rng.integers(0, len(candidates), size=n)], np.ones(n), float(size)
        rows = rng.integers(0, self._high, size=n)
        again = np.flatnonzero(self._keys[rows] < 0)
        while len(again):
            rows[again] = rng.integers(0, self._high, size=len(again))
            again = again[self._keys[rows[again]] < 0]
        return rows, np.ones(n), float(size)

    def min_probability(self, size: int) -> float:
        return 1.0 / size


class OrderLog:
    """The table's rows in insertion order: the fifo and lifo selectors, and the order a checkpoint keeps.

    A ring of row numbers; an emptied row leaves a hole (-1) that scans skip, and holes at either end are dropped
    as scans meet them. When the ring would overflow (long-lived items with many holes behind them), the live
    entries are packed to its start: at most once per ``capacity`` appends, so appends stay O(1) on average.
    """

    def __init__(self, rows: int):
        self._ring = np.full(2 * rows, -1, dtype=np.int64)
        self._position = np.zeros(rows, dtype=np.int64)   # each live row's absolute position in the ring
        self._tail = 0                                     # absolute positions; the ring index is position % len
        self._head = 0

    @property
    def nbytes(self) -> int:
        return self._ring.nbytes + self._position.nbytes

    def add(self, rows: np.ndarray) -> None:
        if self._head - self._tail + len(rows) > len(self._ring):
            self._pack()
        positions = self._head + np.arange(len(rows))
        begin = self._head % len(self._ring)
        if begin + len(rows) <= len(self._ring):
            self._ring[begin:begin + len(rows)] = rows
        else:
            self._ring[positions % len(self._ring)] = rows
        self._position[rows] = positions
        self._head += len(rows)

    def update(self, rows: np.ndarray) -> None:
        """Priorities do not move rows in insertion order."""

    def remove(self, rows: np.ndarray) -> None:
        self._ring[self._position[rows] % len(self._ring)] = -1

    def add_one(self, row: int) -> None:
        if self._head - self._tail + 1 > len(self._ring):
            self._pack()
        self._ring[self._head % len(self._ring)] = row
        self._position[row] = self._head
        self._head += 1

    def remove_one(self, row: int) -> None:
        self._ring[self._position[row] % len(self._ring)] = -1

    def oldest_one(self) -> int:
        """The oldest live row (the table is not empty)."""
        ring = self._ring
        while self._tail < self._head and ring[self._tail % len(ring)] < 0:
            self._tail += 1
        if self._tail >= self._head:
            raise RuntimeError("replay table bookkeeping: no live row in the insertion order")
        return int(ring[self._tail % len(ring)])

    def oldest(self, n: int) -> np.ndarray:
        """Up to ``n`` live rows, oldest first."""
        found, position = [], self._tail
        count = 0
        while count < n and position < self._head:
            chunk = self._window(position, min(self._head, position + max(2 * (n - count), 64)))
            live = chunk[chunk >= 0]
            if position == self._tail:      # drop the holes in front of the first live row
                self._tail += int(np.argmax(chunk >= 0)) if len(live) else len(chunk)
            found.append(live[:n - count])
            count += len(found[-1])
            position += len(chunk)
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def pop_oldest(self, n: int) -> np.ndarray:
        """The ``n`` oldest live rows (the table holds at least ``n``), taken out of the log."""
        begin = self._tail % len(self._ring)
        if self._tail + n <= self._head and begin + n <= len(self._ring):
            window = self._ring[begin:begin + n]
            if window.min() >= 0:        # no holes among them, no wrap: the usual case for a fifo remover
                rows = window.copy()
                window[:] = -1
                self._tail += n
                return rows
        rows = self.oldest(n)
        self.remove(rows)
        if len(rows):  # every position up to the last one taken is a hole now: the next pop starts after it
            self._tail = max(self._tail, int(self._position[rows[-1]]) + 1)
        return rows

    def newest(self, n: int) -> np.ndarray:
        """Up to ``n`` live rows, newest first."""
        found, position = [], self._head
        count = 0
        while count < n and position > self._tail:
            start = max(self._tail, position - max(2 * (n - count), 64))
            chunk = self._window(start, position)[::-1]
            live = chunk[chunk >= 0]
            if position == self._head:      # drop the holes behind the newest live row
                self._head -= int(np.argmax(chunk >= 0)) if len(live) else len(chunk)
            found.append(live[:n - count])
            count += len(found[-1])
            position = start
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def in_order(self) -> np.ndarray:
        """Every live row, oldest first."""
        chunk = self._window(self._tail, self._head)
        return chunk[chunk >= 0]

    def _window(self, start: int, stop: int) -> np.ndarray:
        """Ring entries at absolute positions [start, stop) (a view unless they wrap around)."""
        begin, length = start % len(self._ring), stop - start
        if begin + length <= len(self._ring):
            return self._ring[begin:begin + length]
        return self._ring[np.arange(start, stop) % len(self._ring)]

    def _pack(self) -> None:
        live = self.in_order()
        self._ring[:] = -1
        self._ring[:len(live)] = live
        self._position[live] = np.arange(len(live))
        self._tail, self._head = 0, len(live)


class LowestPriorityIndex(_LazyIndex):
    """Rows by (priority, tick): the remover's victim is the lowest priority, ties to the smallest tick.

    The table's tick counts inserts and priority updates, so the least recently inserted or updated item goes
    first among equal priorities (Reverb's MinHeap). Reads the table's ``priorities``, ``ticks`` and ``keys``.
    """

    def __init__(self, rows: int, priorities: np.ndarray, ticks: np.ndarray, keys: np.ndarray):
        super().__init__(rows)
        self._priorities, self._ticks, self._keys = priorities, ticks, keys
        self.tree = MinTree(rows, tie_break=True)

    @property
    def nbytes(self) -> int:
        return self.tree.nbytes

    def sync(self) -> None:
        rows = self._take_changed()
        if rows is None:
            return
        empty = self._keys[rows] < 0
        values = np.where(empty, np.inf, self._priorities[rows])
        ties = np.where(empty, np.iinfo(np.int64).max, self._ticks[rows])
        self.tree.update(rows, values, ties=ties, validate=False)

    def victim(self) -> int:
        self.sync()
        return self.tree.argmin()
