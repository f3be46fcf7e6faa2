"""Trees over a table's rows, in flat NumPy arrays, updated and searched a whole batch at a time.

`SumTree` holds a weight per leaf (a row's priority ** alpha) and finds, for a batch of uniform numbers in
``[0, total)``, the leaves whose prefix-sum intervals contain them: that is prioritized sampling. `MinTree` holds
a value per leaf and knows the smallest, with its leaf: the lowest-priority remover asks it for its victim, and the
prioritized sampler for the smallest probability (which bounds the largest importance weight).

The loop that drives them (`Table`, under its lock)::

    tree.update(rows, weights)          # inserts, priority updates (weight 0: the row is empty)
    u = rng.random(batch) * tree.total  # a batch of uniform numbers in [0, total)
    rows = tree.sample(u)               # P(row) = weight / total
    victim = min_tree.argmin()          # the lowest priority, ties to the least recently updated

**Why a wide tree with a flat top.** Each level of a descent costs a handful of NumPy calls whatever the batch,
and at a batch of 256 those calls' fixed cost dominates. A node here has ``fanout`` children (16 by default)
instead of two, and the tree stops at the first level of at most ``top_nodes`` (4,096) nodes: that level is read
as a whole (its running sum, searched with one ``searchsorted``; its minimum, one reduction), so there is no
root. A million leaves then sit 2 levels below the top instead of 20 below a binary root; each level gathers the
16 children of each current node as one ``[batch, 16]`` block, takes its running sum and counts how many partial
sums lie at or below ``u``. At 1M leaves and a batch of 256 that is about 0.1 ms (20 binary levels: about 0.3 ms).

**Why inner nodes are recomputed, not adjusted.** An update rewrites the leaves, then sets each affected parent to
the sum (or the minimum) of its children, level by level; no node is ever adjusted by a difference, so rounding
errors never accumulate (Reverb adjusts by differences and has to re-initialise its tree when they drift), and every
inner node is a function of the leaves alone: a tree rebuilt from saved leaves is the same, bit for bit, as the
one that was saved.

**Why updates reach the inner nodes lazily.** `update` writes the leaves at once and remembers which leaves
changed; the inner nodes are brought up to date by the next read (`total`, `sample`, `min`, `argmin`). Between
two samples an actor's single-item inserts then cost one vectorised pass, not one pass each.

**Why a second tree for the minimum.** The smallest weight changes with every insert, update and removal, and a
scan of a million leaves per sample (about a millisecond) would cost more than the sample itself; a heap would
be per-item Python, and a sorted structure would cost more on every update than it saves. `MinTree` has the same
layout as `SumTree` and is refreshed in the same vectorised passes (a minimum instead of a sum), so the minimum is
read at the root. The remover's tree must also break ties among equal priorities by age; it keeps at each inner
node the leaf that wins its subtree (a tournament tree), which costs a few gathers more per level.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

__all__ = ["MinTree", "SumTree"]

DEFAULT_FANOUT = 16
DEFAULT_TOP_NODES = 4096


def _round_up_to_power_of_two(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _check_fanout(fanout: int) -> int:
    if fanout < 2 or fanout & (fanout - 1):
        raise ValueError(f"fanout must be a power of two >= 2, got {fanout}")
    return int(fanout)


_CHUNK_GROUPS = 4096     # groups of children reduced per NumPy call when a whole level is redone


def _reduce_groups(ufunc, groups: np.ndarray) -> np.ndarray:
    """``ufunc`` over each row of ``groups`` [n, fanout], one child after the other.

    The rows are transposed first, so that the reduction runs over the first axis: NumPy then combines child 0
    with child 1, the result with child 2, and so on, whatever ``n`` is (a reduction over the last axis would be
    pairwise, and slow for short rows). A sum is therefore the same bit for bit whether one node or a whole level
    is refreshed, and equals the running sum a descent computes (`SumTree.sample`).
    """
    if len(groups) <= _CHUNK_GROUPS:
        return ufunc.reduce(np.ascontiguousarray(groups.T), axis=0)
    return np.concatenate([ufunc.reduce(np.ascontiguousarray(groups[start:start + _CHUNK_GROUPS].T), axis=0)
                           for start in range(0, len(groups), _CHUNK_GROUPS)])


class _Tree(ABC):
    """What both trees share: the layout, the pending leaves and the level-by-level refresh.

    Level 0 is the leaves; level l + 1 has a node per ``fanout`` nodes of level l; the last level, ``top``, is
    the first with at most ``top_nodes`` nodes. Levels below the top are stored padded to whole groups of
    children, so that each reshapes to ``[nodes above, fanout]``.
    """

    def __init__(self, capacity: int, fanout: int, top_nodes: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.fanout = _check_fanout(fanout)
        self._shift = self.fanout.bit_length() - 1
        self.capacity = max(_round_up_to_power_of_two(capacity), 2)
        self._sizes = [self.capacity]
        while self._sizes[-1] > max(1, top_nodes):
            self._sizes.append(-(-self._sizes[-1] // self.fanout))
        self.top = len(self._sizes) - 1
        self._lengths = [n * self.fanout for n in self._sizes[1:]] + [self._sizes[-1]]
        self._pending: list[np.ndarray] = []
        self._pending_count = 0

    def _mark(self, indices: np.ndarray) -> None:
        self._pending.append(indices)
        self._pending_count += len(indices)
        if self._pending_count > self.capacity:     # a tree only written to still flushes now and then
            self.flush()

    def flush(self) -> None:
        """Bring every level up to date with the leaves (reads call this; so can a caller)."""
        if not self._pending:
            return
        parents = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending.clear()
        self._pending_count = 0
        for level in range(1, self.top + 1):
            parents = parents >> self._shift
            if len(parents) * self.fanout >= self._sizes[level - 1]:
                self._refresh_level(level, None)       # cheaper to redo the whole level
            else:
                self._refresh_level(level, parents)
        self._top_changed()

    def rebuild(self) -> None:
        """Recompute every level from the leaves."""
        self._pending.clear()
        self._pending_count = 0
        for level in range(1, self.top + 1):
            self._refresh_level(level, None)
        self._top_changed()

    @abstractmethod
    def _refresh_level(self, level: int, parents: np.ndarray | None) -> None:
        """Recompute `parents` of `level` (None: the whole level) from the level below."""

    def _top_changed(self) -> None:
        pass

    def _check_indices(self, indices) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"leaf indices must lie in [0, {self.capacity}), got {indices.min()}..{indices.max()}")
        return indices


class SumTree(_Tree):
    """Non-negative weights on ``capacity`` leaves (rounded up to a power of two); sums and prefix-sum search.

    ``update(indices, weights)`` for a batch of distinct leaves; ``sample(u)`` for a batch of numbers in
    ``[0, total)``: leaf ``i`` is returned for ``u`` in ``[prefix(i), prefix(i) + weight(i))``, so a leaf of weight
    0 is never returned. ``get(indices)`` reads leaves; ``total`` is the sum of all of them.

    The top level keeps the running sum of its nodes (recomputed by the first read after a change: a few
    microseconds), which gives ``total`` and is searched with one ``searchsorted`` for a whole batch.
    """

    def __init__(self, capacity: int, fanout: int = DEFAULT_FANOUT, top_nodes: int = DEFAULT_TOP_NODES):
        super().__init__(capacity, fanout, top_nodes)
        self._flat = np.zeros(sum(self._lengths), dtype=np.float64)
        self._levels = []
        offset = 0
        for length in self._lengths:
            self._levels.append(self._flat[offset:offset + length])
            offset += length
        self._running: np.ndarray | None = None     # running sum of the top level; None: stale
        self._last_positive = -1

    @property
    def nbytes(self) -> int:
        return self._flat.nbytes

    @property
    def leaves(self) -> np.ndarray:
        """The leaf weights (a read-only view)."""
        view = self._levels[0][:self.capacity]
        view.flags.writeable = False
        return view

    @property
    def total(self) -> float:
        return float(self._top_running()[-1])

    def get(self, indices) -> np.ndarray:
        return self._levels[0][self._check_indices(indices)]

    def update(self, indices, weights, validate: bool = True) -> None:
        """Set the weights of distinct leaves (duplicates would leave either value: the caller dedupes).

        ``validate=False`` skips the range and value checks, for callers that hold valid int64 indices and
        finite weights >= 0 already (the table's hot paths).
        """
        if validate:
            indices = self._check_indices(indices)
            weights = np.asarray(weights, dtype=np.float64)
            if len(indices) and not (np.isfinite(weights).all() and weights.min() >= 0):
                raise ValueError("sum tree weights must be finite and >= 0")
        self._levels[0][indices] = weights
        self._mark(indices)

    def _refresh_level(self, level: int, parents: np.ndarray | None) -> None:
        children = self._levels[level - 1].reshape(-1, self.fanout)
        if parents is None:
            self._levels[level][:len(children)] = _reduce_groups(np.add, children)
        else:
            self._levels[level][parents] = _reduce_groups(np.add, np.take(children, parents, axis=0))

    def _top_changed(self) -> None:
        self._running = None

    def _top_running(self) -> np.ndarray:
        self.flush()
        if self._running is None:
            values = self._levels[self.top][:self._sizes[self.top]]
            self._running = np.cumsum(values)
            positive = np.flatnonzero(values > 0)
            self._last_positive = int(positive[-1]) if len(positive) else -1
        return self._running

    def prefix_sums(self) -> np.ndarray:
        """Exclusive prefix sums of the leaves (for tests and inspection; O(capacity))."""
        return np.concatenate([[0.0], np.cumsum(self._levels[0][:self.capacity])[:-1]])

    def sample(self, u) -> np.ndarray:
        """The leaves whose intervals contain each ``u`` (a batch in ``[0, total)``), descending level by level.

        A node's running sum over its children ends exactly at the node's own value (both add the children one
        after the other); if rounding still puts ``u`` at or past the end, it goes to the node's last child of
        positive weight, so a weight-0 leaf is never returned.
        """
        running = self._top_running()
        if self._last_positive < 0:
            raise ValueError("cannot sample a sum tree whose total weight is 0")
        u = np.array(u, dtype=np.float64).reshape(-1)
        nodes = np.searchsorted(running, u, side="right")
        np.minimum(nodes, self._last_positive, out=nodes)     # u at or past the end: rounding
        u = np.maximum(u - np.where(nodes > 0, running[nodes - 1], 0.0), 0.0)
        columns = np.arange(len(u))
        for level in range(self.top, 0, -1):
            # The children of each node, one column per u: [fanout, batch], and their running sums down the column.
            children = np.ascontiguousarray(np.take(self._levels[level - 1].reshape(-1, self.fanout), nodes,
                                                    axis=0).T)
            running = children.copy()
            for child in range(1, self.fanout):
                running[child] += running[child - 1]
            chosen = np.count_nonzero(running <= u, axis=0)
            np.minimum(chosen, self.fanout - 1, out=chosen)
            stray = children[chosen, columns] <= 0
            if stray.any():
                positive = children[:, stray] > 0
                chosen[stray] = self.fanout - 1 - np.argmax(positive[::-1], axis=0)
            u = np.maximum(u - np.where(chosen > 0, running[chosen - 1, columns], 0.0), 0.0)
            nodes = nodes * self.fanout + chosen
        return nodes


class MinTree(_Tree):
    """A value per leaf (``empty`` where there is none) and the smallest of them, with its leaf.

    Each node below the top holds the minimum of its children (a reduction, like `SumTree`'s sums); `min` reduces
    the top level and `argmin` descends from there to the leftmost leaf holding the minimum. With
    ``tie_break=True`` each leaf also holds an integer and the smaller integer wins among equal values (the
    remover passes its update counter, so that among equal priorities the least recently inserted or updated item
    goes first, as in Reverb's heap); nodes then hold the winning leaf of their subtree (a tournament tree).
    """

    def __init__(self, capacity: int, fanout: int = DEFAULT_FANOUT, top_nodes: int = DEFAULT_TOP_NODES,
                 dtype=np.float64, tie_break: bool = False):
        super().__init__(capacity, fanout, top_nodes)
        self.dtype = np.dtype(dtype)
        self.empty = np.inf if self.dtype.kind == "f" else np.iinfo(self.dtype).max
        if tie_break:
            self._values = np.full(self._lengths[0], self.empty, dtype=self.dtype)
            self._ties = np.zeros(self._lengths[0], dtype=np.int64)
            # _winners[l][node]: the leaf that wins node's subtree (level 0: the leaves themselves, not stored).
            self._winners = [None] + [np.zeros(n, dtype=np.int64) for n in self._lengths[1:]]
            self._levels = None
        else:
            self._levels = [np.full(n, self.empty, dtype=self.dtype) for n in self._lengths]
            self._values = self._levels[0]
            self._ties = None
        self.rebuild()

    @property
    def nbytes(self) -> int:
        arrays = self._levels if self._ties is None else [self._values, self._ties, *self._winners[1:]]
        return sum(a.nbytes for a in arrays)

    @property
    def values(self) -> np.ndarray:
        """The leaf values (a read-only view)."""
        view = self._values[:self.capacity]
        view.flags.writeable = False
        return view

    def get(self, indices) -> np.ndarray:
        return self._values[self._check_indices(indices)]

    def update(self, indices, values, ties=None, validate: bool = True) -> None:
        """Set the values (and, with tie_break, the tie integers) of distinct leaves; ``empty`` clears a leaf."""
        if validate:
            indices = self._check_indices(indices)
        self._values[indices] = values
        if self._ties is not None:
            if ties is None:
                raise ValueError("this MinTree breaks ties: pass ties= with the values")
            self._ties[indices] = ties
        self._mark(indices)

    def min(self):
        """The smallest value (``empty`` if every leaf is empty)."""
        self.flush()
        if self._ties is None:
            return self._levels[self.top][:self._sizes[self.top]].min()
        leaf = self._top_winner()
        return self._values[leaf]

    def argmin(self) -> int:
        """The leaf with the smallest value (-1 if every leaf is empty)."""
        self.flush()
        if self._ties is not None:
            leaf = self._top_winner()
        else:
            leaf = int(np.argmin(self._levels[self.top][:self._sizes[self.top]]))
            for level in range(self.top, 0, -1):
                start = leaf * self.fanout
                leaf = start + int(np.argmin(self._levels[level - 1][start:start + self.fanout]))
        return -1 if self._values[leaf] == self.empty else leaf

    def _top_winner(self) -> int:
        """The tie-breaking winner among the top level's winners."""
        count = self._sizes[self.top]
        leaves = np.arange(count) if self.top == 0 else self._winners[self.top][:count]
        values = self._values[leaves]
        leaves = leaves[values == values.min()]
        return int(leaves[np.argmin(self._ties[leaves])])

    def _refresh_level(self, level: int, parents: np.ndarray | None) -> None:
        if self._ties is None:
            children = self._levels[level - 1].reshape(-1, self.fanout)
            if parents is None:
                self._levels[level][:len(children)] = _reduce_groups(np.minimum, children)
            else:
                self._levels[level][parents] = _reduce_groups(np.minimum, np.take(children, parents, axis=0))
            return
        if parents is None:
            parents = np.arange(self._sizes[level])
        if level == 1:
            candidates = (parents[:, None] << self._shift) + np.arange(self.fanout)
        else:
            candidates = self._winners[level - 1].reshape(-1, self.fanout)[parents]
        values = self._values[candidates]
        ties = np.where(values == values.min(axis=1, keepdims=True), self._ties[candidates],
                        np.iinfo(np.int64).max)
        self._winners[level][parents] = candidates[np.arange(len(parents)), np.argmin(ties, axis=1)]
