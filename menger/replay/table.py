"""A replay table with Reverb's semantics: items in preallocated rows, a sampler, a remover, a rate limiter, one lock.

Ape-X on one host (actor threads insert, the learner samples under the limiter and writes priorities back)::

    table = Table("replay", max_size=1_000_000, sampler=prioritized(0.6), remover=fifo(),
                  rate_limiter=SampleToInsertRatio(8, min_size_to_sample=10_000, error_buffer=2_000),
                  item_spec={"obs": ((4,), np.float32), "action": ((), np.int64), ...}, seed=run_seed)
    # each actor
    table.insert_batch(transitions, priorities=np.abs(initial_td_errors), timeout_s=30.0)
    # the learner
    while training:
        sample = table.sample(256, timeout_s=30.0)       # waits while the learner is ahead of the actors
        weights = importance_weights(sample, beta=0.4)   # (N * P(i)) ** -beta / max
        td_errors = learner.update(sample.data, weights)
        table.update_priorities(sample.keys, np.abs(td_errors) + 1e-6)   # keys gone meanwhile are ignored

What the operations mean (Reverb's reverb/cc/table.cc, except where said):

* **insert**: the limiter admits items one at a time (`RateLimiter.admissible_inserts`); a batch goes in as far
  as it is admitted, then waits for the rest. Past ``max_size`` the remover evicts one item per insert, choosing
  among all items *including the new one*, as Reverb does: ``lifo`` then drops the new item, ``lowest_priority``
  drops it when its priority is the lowest. Every insert gets a key (a dropped item's key is simply gone). A
  batch is exactly its items inserted one after another: same keys, rows, evictions (the fifo and lifo cases are
  vectorised; ``lowest_priority`` evicts item by item once the table is full).
* **sample**: unlike Reverb (which hands out as much of a batch as the limiter admits), a batch passes the limiter
  whole: `can_sample(batch_size)`, then all ``batch_size`` items, or, past the deadline, nothing (the table is
  untouched). A batch size the window can never admit is refused at once (`RateLimiter.check_sample_batch`).
  Within a batch, items are drawn one after another: ``uniform`` and ``prioritized`` with replacement, ``fifo``
  the oldest item, ``lifo`` the newest. An item drawn for the ``max_times_sampled``-th time leaves the table at
  once, so later draws of the batch cannot return it and see the table without it; each draw reports its
  probability and the table's size at that moment, for importance weights.
* **update_priorities**: by key; keys that were removed meanwhile are ignored and counted.
* **keys** are ints, unique over the table's life and increasing with insertion (``key % rows`` is the item's row;
  treat them as opaque).

Every blocking call takes a deadline (``timeout_s``; 0 = do not wait, ``math.inf`` = wait forever): past it,
`ReplayTimeout` says which table waited for what, and the limiter's counters. `close` wakes every waiter with
`ReplayClosed`.

**Checkpoints**: `state` is plain NumPy arrays, ints and strings (`menger.checkpoint.flatten_state` stores it);
`load_state` into a table built the same way goes on bit for bit: the same inserts and samples give the same keys,
rows, evictions and samples (on the same machine and NumPy). The rate limiter is never taken from the checkpoint:
see `menger.replay.limiters` for the restore rule (Reverb #103).

Storage is one `ItemStorage` (see there for how a shared-memory version replaces it); bookkeeping is per row
(key, priority, times sampled, tick), in ``max_size + 1`` rows: the extra row holds an item inserted into a full
table until the remover has chosen (Reverb inserts, then removes).
"""
from __future__ import annotations

import copy
import logging
import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from menger.replay.limiters import Queue, RateLimiter
from menger.replay.selectors import (LowestPriorityIndex, OrderLog, Selector, UniformIndex, WeightedIndex,
                                     check_selector, fifo)
from menger.replay.storage import ItemStorage

__all__ = ["ReplayClosed", "ReplayTimeout", "Sample", "Table", "importance_weights"]

logger = logging.getLogger(__name__)

STATE_FORMAT = "menger.replay.table/1"
_LONGEST_WAIT_S = 60.0     # a wait for longer wakes up this often (math.inf is allowed as a timeout)


class ReplayTimeout(TimeoutError):
    """A blocking insert or sample waited past its deadline for the rate limiter (or the table's items).

    ``completed`` counts the items of a batch insert that went in before the deadline, ``keys`` their keys.
    """

    def __init__(self, message: str, *, table: str, operation: str, timeout_s: float, counters: dict,
                 completed: int = 0, keys: np.ndarray | None = None):
        super().__init__(message)
        self.table, self.operation, self.timeout_s, self.counters = table, operation, timeout_s, counters
        self.completed = completed
        self.keys = keys if keys is not None else np.zeros(0, dtype=np.int64)


class ReplayClosed(RuntimeError):
    """The table was closed (`Table.close`) while a call waited on it, or before the call."""


@dataclass(frozen=True)
class Sample:
    """A batch drawn from a table.

    ``probabilities[i]`` is the chance the i-th draw had of returning its item, and ``table_size[i]`` the number of
    items when it was drawn; ``min_probability`` is the smallest nonzero probability of any item when the batch
    began (it bounds the largest importance weight). See `importance_weights`.
    """

    keys: np.ndarray                 # int64 [batch]
    data: dict                       # field -> array [batch, *shape]
    probabilities: np.ndarray        # float64 [batch]
    table_size: np.ndarray           # int64 [batch]
    min_probability: float

    def __len__(self) -> int:
        return len(self.keys)


def importance_weights(sample: Sample, beta: float) -> np.ndarray:
    """Prioritized replay's correction, ``w_i = (N * P(i)) ** -beta / max_j w_j`` (Schaul et al., 2016).

    The maximum is over the whole table (its least likely item, ``N * min_probability``), so weights are comparable
    across batches; a batch's own weights are included in it, so every weight is at most 1. Float64 [batch].
    """
    beta = float(beta)
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    weights = (sample.table_size * sample.probabilities) ** -beta
    largest = float(sample.table_size[0] * sample.min_probability) ** -beta if len(weights) else 1.0
    return weights / max(largest, float(weights.max()) if len(weights) else 1.0)


class _FreeRows:
    """Empty rows, last freed first filled: ``pop`` takes from the front, ``push`` puts back in front.

    At the start the rows fill 0, 1, 2, ...; a batch pops and pushes exactly as its items would one by one.
    """

    def __init__(self, rows: int):
        self._rows = np.arange(rows, dtype=np.int64)
        self._start = 0

    def __len__(self) -> int:
        return len(self._rows) - self._start

    @property
    def nbytes(self) -> int:
        return self._rows.nbytes

    def pop(self, count: int) -> np.ndarray:
        if count > len(self):
            raise RuntimeError(f"replay table bookkeeping: {count} rows wanted, {len(self)} free")
        self._start += count
        return self._rows[self._start - count:self._start].copy()

    def peek(self) -> int:
        return int(self._rows[self._start])

    def pop_one(self) -> int:
        if self._start >= len(self._rows):
            raise RuntimeError("replay table bookkeeping: no free row")
        self._start += 1
        return int(self._rows[self._start - 1])

    def push_one(self, row: int) -> None:
        self._start -= 1
        self._rows[self._start] = row

    def push(self, rows: np.ndarray) -> None:
        self._start -= len(rows)
        self._rows[self._start:self._start + len(rows)] = rows

    def state(self) -> np.ndarray:
        return self._rows[self._start:].copy()

    def load(self, free: np.ndarray) -> None:
        self._start = len(self._rows) - len(free)
        self._rows[self._start:] = free


class Table:
    """A replay table; see the module's docstring for the loop and the semantics.

    ``max_times_sampled < 1``: items are sampled without limit; otherwise an item leaves the table after its
    ``max_times_sampled``-th sample. ``seed`` seeds the sampler's `numpy.random.Generator` (None: fresh entropy);
    a table's samples are reproducible for a given seed and order of calls.
    """

    def __init__(self, name: str, max_size: int, sampler: Selector, remover: Selector, rate_limiter: RateLimiter,
                 max_times_sampled: int = 0, *, item_spec: dict, seed: int | None = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a table needs a non-empty name, got {name!r}")
        if isinstance(max_size, bool) or int(max_size) != max_size or max_size < 1:
            raise ValueError(f"table {name!r}: max_size must be an integer >= 1, got {max_size!r}")
        self.name = name
        self.max_size = int(max_size)
        self.sampler = check_selector(sampler, "sampler")
        self.remover = check_selector(remover, "remover")
        if not isinstance(rate_limiter, RateLimiter):
            raise TypeError(f"table {name!r}: rate_limiter must be a RateLimiter (MinSize, SampleToInsertRatio, "
                            f"Queue), got {type(rate_limiter).__name__}")
        if isinstance(max_times_sampled, bool) or int(max_times_sampled) != max_times_sampled:
            raise ValueError(f"table {name!r}: max_times_sampled must be an integer (< 1: no limit), "
                             f"got {max_times_sampled!r}")
        self.max_times_sampled = int(max_times_sampled)
        _check_config(name, self.max_size, rate_limiter, self.max_times_sampled)
        self._rows = self.max_size + 1
        self._storage = ItemStorage(item_spec, self._rows)
        rate_limiter.claim(name)
        self._limiter = rate_limiter

        self._keys = np.full(self._rows, -1, dtype=np.int64)       # -1: the row is empty
        self._priority = np.zeros(self._rows, dtype=np.float64)
        self._times = np.zeros(self._rows, dtype=np.int64)        # times sampled
        self._ticks = np.zeros(self._rows, dtype=np.int64)        # when inserted or last updated (for ties)
        self._build_indexes()
        self._rng = np.random.default_rng(seed)

        self._lock = threading.Lock()
        self._insertable = threading.Condition(self._lock)
        self._sampleable = threading.Condition(self._lock)
        self._closed = False
        self._next_seq = 0                 # inserts so far, dropped ones included: the next key's sequence
        self._tick = 0
        self._size = 0
        self._times_total = 0              # times sampled, summed over the items in the table
        self._stats = {"updates_ignored": 0, "evicted": 0, "insert_blocked_s": 0.0, "sample_blocked_s": 0.0}
        self._checked_batches: set[int] = set()

    @classmethod
    def queue(cls, name: str, max_size: int, *, item_spec: dict) -> "Table":
        """A FIFO queue of ``max_size`` items (Reverb's Table.queue): each item is sampled once, oldest first."""
        return cls(name, max_size, sampler=fifo(), remover=fifo(), rate_limiter=Queue(max_size),
                   max_times_sampled=1, item_spec=item_spec)

    def _build_indexes(self) -> None:
        self._free = _FreeRows(self._rows)
        self._order = OrderLog(self._rows)
        self._weighted = (WeightedIndex(self._rows, self.sampler.alpha, self._priority, self._keys)
                          if self.sampler.kind == "prioritized" else
                          UniformIndex(self._rows, self._keys, lambda: self._size)
                          if self.sampler.kind == "uniform" else None)
        self._lowest = (LowestPriorityIndex(self._rows, self._priority, self._ticks, self._keys)
                        if self.remover.kind == "lowest_priority" else None)
        self._indexes = [index for index in (self._order, self._weighted, self._lowest) if index is not None]

    # ----- what it holds ----------------------------------------------------------------------------------------
    @property
    def item_spec(self) -> dict:
        return dict(self._storage.spec)

    @property
    def rate_limiter(self) -> RateLimiter:
        """The table's limiter (read it; only the table records on it)."""
        return self._limiter

    @property
    def size(self) -> int:
        with self._lock:
            return self._size

    def __len__(self) -> int:
        return self.size

    @property
    def changes(self) -> tuple[int, int, int, int]:
        """A fingerprint that moves with every insert, priority update, delete and sample: two equal reads mean
        nothing changed the table in between (`ShardedTables` checks that its split read one state per shard)."""
        with self._lock:
            return self._next_seq, self._tick, self._size, self._times_total

    @property
    def nbytes(self) -> int:
        """Bytes held: item rows, bookkeeping, trees and order."""
        bookkeeping = self._keys.nbytes + self._priority.nbytes + self._times.nbytes + self._ticks.nbytes
        return (self._storage.nbytes + bookkeeping + self._free.nbytes
                + sum(index.nbytes for index in self._indexes))

    def can_insert(self, count: int = 1) -> bool:
        """Would ``count`` inserts pass now, without waiting?"""
        with self._lock:
            return not self._closed and self._limiter.can_insert(count)

    def can_sample(self, batch_size: int = 1) -> bool:
        """Would a sample of ``batch_size`` pass now, without waiting?"""
        with self._lock:
            return not self._closed and self._sample_ready(batch_size)

    def check_sample_batch(self, batch_size: int) -> None:
        """Refuse (ValueError) a batch size this table could never serve; `sample` calls it (once per size)."""
        if batch_size in self._checked_batches:
            return
        self._limiter.check_sample_batch(batch_size)
        if self.max_times_sampled >= 1 and self.max_size * self.max_times_sampled < batch_size:
            raise ValueError(f"table {self.name!r}: a batch of {batch_size} needs more samples than a full table "
                             f"can give ({self.max_size} items x max_times_sampled={self.max_times_sampled})")
        self._checked_batches.add(batch_size)

    # ----- inserts ----------------------------------------------------------------------------------------------
    def insert(self, item: dict, priority: float, timeout_s: float) -> int:
        """Insert one item (field -> array of the spec's shape); returns its key.

        The same as `insert_batch` of one item, on a path of scalar operations (an actor's per-step insert).
        """
        arrays = self._storage.check(item)
        priority = float(priority)
        if not (math.isfinite(priority) and priority >= 0):
            raise ValueError(f"table {self.name!r}: priorities must be finite and >= 0, got {priority}")
        deadline = _deadline(timeout_s)
        with self._lock:
            self._wait(self._insertable, lambda: self._limiter.can_insert(1), "insert", 1, deadline, timeout_s)
            if self._size >= self.max_size and self.remover.kind == "lowest_priority":
                key = int(self._insert_locked({k: a[None] for k, a in arrays.items()}, np.array([priority]))[0])
            else:
                key = self._insert_one_locked(arrays, priority)
            self._sampleable.notify_all()
        return key

    def _insert_one_locked(self, arrays: dict, priority: float) -> int:
        """`_insert_locked` for one item and a fifo or lifo remover (or room left), in scalars."""
        base = self._next_seq * self._rows
        self._next_seq += 1
        self._limiter.record_inserts(1)
        if self._size < self.max_size:
            row = self._free.pop_one()
        elif self.remover.kind == "fifo":
            victim = self._order.oldest_one()
            row = self._free.pop_one()
            self._remove_one(victim)
            self._stats["evicted"] += 1
        else:                                 # lifo: the new item is the newest, so it is the one evicted
            self._tick += 1
            self._limiter.record_deletes(1)
            self._stats["evicted"] += 1
            return base + self._free.peek()
        key = base + row
        self._storage.write_one(row, arrays)
        self._keys[row] = key
        self._priority[row] = priority
        self._times[row] = 0
        self._ticks[row] = self._tick
        self._tick += 1
        for index in self._indexes:
            index.add_one(row)
        self._size += 1
        return key

    def _remove_one(self, row: int) -> None:
        self._keys[row] = -1
        self._times_total -= int(self._times[row])
        for index in self._indexes:
            index.remove_one(row)
        self._free.push_one(row)
        self._size -= 1
        self._limiter.record_deletes(1)

    def insert_batch(self, items: dict, priorities, timeout_s: float) -> np.ndarray:
        """Insert ``count`` items (field -> array [count, *shape]) in order; returns their keys (int64 [count])."""
        arrays, count = self._storage.check_batch(items)
        return self._insert(arrays, count, priorities, timeout_s)

    def _insert(self, arrays: dict, count: int, priorities, timeout_s: float) -> np.ndarray:
        priorities = _check_priorities(priorities, count, self.name)
        deadline = _deadline(timeout_s)
        keys = np.zeros(count, dtype=np.int64)
        done = 0
        with self._lock:
            while done < count:
                admitted = self._wait(self._insertable, lambda: self._limiter.admissible_inserts(count - done),
                                      "insert", count, deadline, timeout_s, done, keys)
                end = done + admitted
                chunk = arrays if (done, end) == (0, count) else {k: a[done:end] for k, a in arrays.items()}
                keys[done:end] = self._insert_locked(chunk, priorities[done:end])
                done = end
                self._sampleable.notify_all()
        return keys

    def _insert_locked(self, arrays: dict, priorities: np.ndarray) -> np.ndarray:
        """Store admitted items exactly as if inserted one at a time: each fills a free row, then (past
        max_size) the remover evicts one item, which may be the new one; the evicted row is the next free one."""
        count = len(priorities)
        keys = (self._next_seq + np.arange(count, dtype=np.int64)) * self._rows
        self._next_seq += count
        self._limiter.record_inserts(count)
        room = self.max_size - self._size
        overflow = count - room
        if overflow <= 0:
            rows = self._free.pop(count)
        elif self.remover.kind == "fifo" and overflow <= self._size:
            # Item room + j evicts the j-th oldest old item, whose row the next item fills; the first
            # overflowing item fills the one row left free, and the last victim's row stays free.
            free = self._free.pop(room + 1)
            rows = np.concatenate([free, self._evict_oldest(overflow)])
        elif self.remover.kind == "lifo":
            # Each item past max_size is the newest when the remover looks: it passes through the free row.
            rows = self._free.pop(room)
            keys[:room] += rows
            keys[room:] += self._free.peek()
            self._store(rows, {k: a[:room] for k, a in arrays.items()}, priorities[:room], keys[:room])
            self._tick += overflow
            self._limiter.record_deletes(overflow)
            self._stats["evicted"] += overflow
            return keys
        else:
            return self._insert_one_by_one(arrays, priorities, keys, room)
        keys += rows
        self._store(rows, arrays, priorities, keys)
        return keys

    def _evict_oldest(self, count: int) -> np.ndarray:
        """Evict the ``count`` oldest items; all but the last one's rows are returned, to be filled at once."""
        victims = self._order.pop_oldest(count)
        refilled, last = victims[:-1], int(victims[-1])
        self._times_total -= int(self._times[victims].sum())
        self._keys[last] = -1
        for index in (self._weighted, self._lowest):
            if index is not None:
                index.remove_one(last)
        self._free.push_one(last)
        self._size -= count
        self._limiter.record_deletes(count)
        self._stats["evicted"] += count
        return refilled

    def _insert_one_by_one(self, arrays: dict, priorities: np.ndarray, keys: np.ndarray, room: int) -> np.ndarray:
        """Fill the room at once, then store each item and evict one (lowest_priority; fifo past max_size)."""
        if room > 0:
            rows = self._free.pop(room)
            keys[:room] += rows
            self._store(rows, {k: a[:room] for k, a in arrays.items()}, priorities[:room], keys[:room])
        for i in range(max(room, 0), len(priorities)):
            row = self._free.pop(1)
            keys[i] += row[0]
            self._store(row, {k: a[i:i + 1] for k, a in arrays.items()}, priorities[i:i + 1], keys[i:i + 1])
            victim = self._lowest.victim() if self._lowest is not None else int(self._order.oldest(1)[0])
            self._remove(np.array([victim], dtype=np.int64))
            self._stats["evicted"] += 1
        return keys

    def _store(self, rows: np.ndarray, arrays: dict, priorities: np.ndarray, keys: np.ndarray) -> None:
        where = _as_slice(rows)
        self._storage.write(where, arrays)
        ticks = self._tick + np.arange(len(rows), dtype=np.int64)
        self._tick += len(rows)
        self._keys[where] = keys
        self._priority[where] = priorities
        self._times[where] = 0
        self._ticks[where] = ticks
        for index in self._indexes:
            index.add(rows)
        self._size += len(rows)

    def _remove(self, rows: np.ndarray) -> None:
        """Empty distinct rows (evicted, or sampled max_times_sampled times)."""
        if not len(rows):
            return
        self._keys[rows] = -1
        self._times_total -= int(self._times[rows].sum())
        for index in self._indexes:
            index.remove(rows)
        self._free.push(rows)
        self._size -= len(rows)
        self._limiter.record_deletes(len(rows))

    # ----- samples ----------------------------------------------------------------------------------------------
    def sample(self, batch_size: int, timeout_s: float) -> Sample:
        """A batch of ``batch_size`` items, once the limiter admits it (see the module's docstring)."""
        self.check_sample_batch(batch_size)
        deadline = _deadline(timeout_s)
        with self._lock:
            self._wait(self._sampleable, lambda: self._sample_ready(batch_size), "sample", batch_size, deadline,
                       timeout_s)
            sample = self._sample_locked(batch_size)
            self._insertable.notify_all()
        return sample

    def _sample_ready(self, batch_size: int) -> bool:
        if not self._limiter.can_sample(batch_size):
            return False
        return self.max_times_sampled < 1 or self._sample_budget() >= batch_size

    def _sample_budget(self) -> int:
        """How many more samples the items in the table can give (max_times_sampled >= 1)."""
        return self.max_times_sampled * self._size - self._times_total

    def priority_mass(self) -> float:
        """The sampler's total weight now: ``sum p_i ** alpha`` over the items (prioritized), their number (uniform).

        A draw returns an item with its weight over this mass (a mass of 0 with items in the table means every
        priority is 0, and the table samples uniformly). `ShardedTables` splits a batch across tables by it.
        """
        with self._lock:
            if self._weighted is None:
                raise ValueError(f"table {self.name!r} samples {self.sampler!r}, which has no priority mass; only "
                                 f"uniform() and prioritized(alpha) samplers weigh their items")
            return self._weighted.total()

    def min_probability(self) -> float:
        """The smallest nonzero chance any item has in a draw now, as a `Sample` reports it; 0.0 when empty."""
        with self._lock:
            if self._size == 0:
                return 0.0
            return self._weighted.min_probability(self._size) if self._weighted is not None else 1.0

    def _sample_locked(self, batch_size: int) -> Sample:
        min_probability = self._weighted.min_probability(self._size) if self._weighted is not None else 1.0
        draw = self._draw_weighted if self._weighted is not None else self._draw_in_order
        rows, keys, probabilities, sizes = draw(batch_size)
        # Rows used up by this batch are empty now, but nothing refills them before the lock is released.
        data = self._storage.read(rows)
        self._limiter.record_samples(batch_size)
        return Sample(keys, data, probabilities, sizes, min_probability)

    def _draw_weighted(self, batch_size: int):
        """Uniform or prioritized draws, with replacement; items used up leave at once (in rounds).

        A round draws what is still needed from the current table. A draw of an item that an earlier draw of
        the same round used up is rejected: conditioned on missing that item, a draw from the round's
        distribution is a draw from the table without it, so the accepted draws are exactly draws made one
        after another. Used-up items are removed before the next round; each draw's probability and table size
        are those of the table it was (in effect) drawn from.
        """
        parts = []
        need = batch_size
        while need:
            size = self._size
            rows, weights, total = self._weighted.draw(need, self._rng, self._present_rows)
            if self.max_times_sampled < 1:
                np.add.at(self._times, rows, 1)
                parts.append((rows, self._keys[rows], weights / total, np.full(need, size, dtype=np.int64)))
                break
            before = self._times[rows] + _occurrence_rank(rows)     # times sampled before each draw
            accepted = before < self.max_times_sampled
            rows, weights, before = rows[accepted], weights[accepted], before[accepted]
            last = before == self.max_times_sampled - 1             # this draw uses its item up
            gone_weight = _exclusive_cumsum(np.where(last, weights, 0.0))
            gone_count = _exclusive_cumsum(last.astype(np.int64))
            probabilities = np.minimum(weights / (total - gone_weight), 1.0)
            parts.append((rows, self._keys[rows], probabilities, size - gone_count))
            np.add.at(self._times, rows, 1)
            self._times_total += len(rows)
            self._remove(rows[last])
            need -= len(rows)
        return tuple(np.concatenate(column) for column in zip(*parts))

    def _draw_in_order(self, batch_size: int):
        """fifo: the oldest item, lifo: the newest; with max_times_sampled, each until used up, then the next."""
        pick = self._order.oldest if self.sampler.kind == "fifo" else self._order.newest
        size = self._size
        if self.max_times_sampled < 1:
            rows = np.repeat(pick(1), batch_size)
            self._times[rows[0]] += batch_size
            sizes = np.full(batch_size, size, dtype=np.int64)
            return rows, self._keys[rows], np.ones(batch_size), sizes
        candidates = pick(batch_size)
        left = self.max_times_sampled - self._times[candidates]
        ends = np.cumsum(left)
        served = int(np.searchsorted(ends, batch_size)) + 1      # the items that serve the batch, in order
        candidates, left = candidates[:served], left[:served]
        counts = left.copy()
        counts[-1] -= int(ends[served - 1]) - batch_size
        rows = np.repeat(candidates, counts)
        keys = self._keys[rows]
        sizes = np.repeat(size - np.arange(served, dtype=np.int64), counts)
        self._times[candidates] += counts
        self._times_total += batch_size
        self._remove(candidates[counts == left])
        return rows, keys, np.ones(batch_size), sizes

    def _present_rows(self) -> np.ndarray:
        return np.flatnonzero(self._keys >= 0)

    # ----- priorities -------------------------------------------------------------------------------------------
    def update_priorities(self, keys, priorities) -> int:
        """Set the priorities of items by key (the last one wins for a repeated key); returns how many were set.

        Keys of items no longer in the table (evicted, used up) are ignored and counted
        (``replay/updates_ignored``).
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        priorities = _check_priorities(priorities, len(keys), self.name)
        with self._lock:
            rows = keys % self._rows
            live = self._keys[rows] == keys
            self._stats["updates_ignored"] += int(len(keys) - np.count_nonzero(live))
            rows, priorities = rows[live], priorities[live]
            if len(rows) > 1:
                _, last_reversed = np.unique(rows[::-1], return_index=True)
                keep = np.sort(len(rows) - 1 - last_reversed)
                rows, priorities = rows[keep], priorities[keep]
            ticks = self._tick + np.arange(len(rows), dtype=np.int64)
            self._tick += len(rows)
            self._priority[rows] = priorities
            self._ticks[rows] = ticks
            for index in self._indexes:
                index.update(rows)
            return len(rows)

    def delete(self, keys) -> int:
        """Remove items by key (Reverb's MutatePriorities deletes); returns how many were in the table.

        Keys no longer in the table are ignored. The limiter counts the removals as deletes, so its size stays the
        table's; a waiting insert may pass afterwards. The runtime's replay coordinator frees a chunk this way
        before an actor writes into it again.
        """
        keys = np.unique(np.asarray(keys, dtype=np.int64).reshape(-1))
        with self._lock:
            rows = keys % self._rows
            rows = rows[self._keys[rows] == keys]
            self._remove(rows)
            if len(rows):
                self._insertable.notify_all()
            return len(rows)

    # ----- waiting ----------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Wake every waiting call with ReplayClosed; later blocking calls raise it too."""
        with self._lock:
            self._closed = True
            self._insertable.notify_all()
            self._sampleable.notify_all()

    def _wait(self, condition: threading.Condition, ready, operation: str, count: int, deadline: float,
              timeout_s: float, completed: int = 0, keys: np.ndarray | None = None):
        """Wait (the lock held) until ``ready()`` is truthy, and return it; past the deadline raise ReplayTimeout."""
        while True:
            if self._closed:
                raise ReplayClosed(f"table {self.name!r} was closed; its {operation} of {count} cannot go on")
            value = ready()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(operation, count, timeout_s, completed, keys)
            started = time.monotonic()
            condition.wait(min(remaining, _LONGEST_WAIT_S))
            self._stats[f"{operation}_blocked_s"] += time.monotonic() - started

    def _timeout(self, operation: str, count: int, timeout_s: float, completed: int, keys) -> ReplayTimeout:
        limiter = self._limiter
        if operation == "insert":
            reason = limiter.insert_blocked_reason()
            hint = (f"is anything sampling table {self.name!r}? Inserts wait for samples while the actors are ahead "
                    f"of the learner (MinSize never blocks inserts)")
            done = f" ({completed} of the {count} went in)" if completed else ""
        else:
            if limiter.can_sample(count):
                reason = (f"the items in the table can be sampled {self._sample_budget()} more times "
                          f"(max_times_sampled={self.max_times_sampled}), fewer than the batch")
            else:
                reason = limiter.sample_blocked_reason(count)
            hint = "are the actors inserting?"
            done = ""
        message = (f"table {self.name!r}: {operation} of {count} item(s) timed out after {timeout_s:g} s{done}: "
                   f"{reason}. Limiter: {limiter.describe()}. {hint[0].upper()}{hint[1:]}")
        return ReplayTimeout(message, table=self.name, operation=operation, timeout_s=timeout_s,
                             counters=limiter.counters(), completed=completed,
                             keys=None if keys is None else keys[:completed].copy())

    # ----- metrics ----------------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """``replay/...`` figures (the priority statistics scan the table: call it at logging intervals)."""
        with self._lock:
            priorities = self._priority[self._keys >= 0]
            limiter = self._limiter
            return {
                "replay/size": self._size,
                "replay/bytes": self.nbytes,
                "replay/inserts": limiter.inserts,
                "replay/samples": limiter.samples,
                "replay/deletes": limiter.deletes,
                "replay/evicted": self._stats["evicted"],
                "replay/samples_per_insert": limiter.samples / limiter.inserts if limiter.inserts else 0.0,
                "replay/rate_limiter_error": limiter.error,
                "replay/insert_blocked_s": self._stats["insert_blocked_s"],
                "replay/sample_blocked_s": self._stats["sample_blocked_s"],
                "replay/updates_ignored": self._stats["updates_ignored"],
                "replay/priority_min": float(priorities.min()) if len(priorities) else 0.0,
                "replay/priority_mean": float(priorities.mean()) if len(priorities) else 0.0,
                "replay/priority_max": float(priorities.max()) if len(priorities) else 0.0,
            }

    # ----- checkpoints ------------------------------------------------------------------------------------------
    def config(self) -> dict:
        """What the table was built with, as JSON data (a checkpoint must come from the same)."""
        return {"max_size": self.max_size, "sampler": self.sampler.state(), "remover": self.remover.state(),
                "max_times_sampled": self.max_times_sampled, "item_spec": self._storage.spec_state()}

    def state(self) -> dict:
        """Everything a restore needs to go on bit for bit: plain NumPy arrays, ints, floats, strings, dicts."""
        with self._lock:
            rows = self._order.in_order()
            return {
                "format": STATE_FORMAT,
                "name": self.name,
                "config": self.config(),
                "rate_limiter": self._limiter.state(),
                "next_seq": self._next_seq,
                "tick": self._tick,
                "rows": rows,
                "keys": self._keys[rows],
                "priorities": self._priority[rows],
                "times_sampled": self._times[rows],
                "ticks": self._ticks[rows],
                "data": self._storage.read(rows),
                "free_rows": self._free.state(),
                "rng": copy.deepcopy(self._rng.bit_generator.state),
                "stats": dict(self._stats),
            }

    def load_state(self, state: dict) -> None:
        """Replace the table's contents with a saved state from a table built the same way.

        The rate limiter stays the one this table was built with (Reverb #103 took the checkpoint's): its
        counters are restored if they were counted under the same parameters, rebased otherwise (see
        menger.replay.limiters). Either way the limiter's size is the number of items restored.
        """
        self._check_state(state)
        rows = np.asarray(state["rows"], dtype=np.int64)
        with self._lock:
            self._keys.fill(-1)
            self._priority.fill(0.0)
            self._times.fill(0)
            self._ticks.fill(0)
            self._build_indexes()
            self._free.load(np.asarray(state["free_rows"], dtype=np.int64))
            priorities = np.asarray(state["priorities"], dtype=np.float64)
            ticks = np.asarray(state["ticks"], dtype=np.int64)
            self._storage.write(rows, state["data"])
            self._keys[rows] = state["keys"]
            self._priority[rows] = priorities
            self._times[rows] = state["times_sampled"]
            self._ticks[rows] = ticks
            for index in self._indexes:
                index.add(rows)
            self._size = len(rows)
            self._times_total = int(self._times[rows].sum())
            self._next_seq = int(state["next_seq"])
            self._tick = int(state["tick"])
            self._rng.bit_generator.state = copy.deepcopy(state["rng"])
            self._stats.update(state.get("stats", {}))
            if not self._limiter.restore(state["rate_limiter"], self._size):
                saved = RateLimiter.from_state(state["rate_limiter"])
                logger.warning("table %r: the checkpoint was counted by %r, this table is limited by %r; kept "
                               "this table's limiter and rebased its counters on the %d items restored: %s",
                               self.name, saved, self._limiter, self._size, self._limiter.describe())
            self._insertable.notify_all()
            self._sampleable.notify_all()

    def _check_state(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"table {self.name!r}: not a replay table state (format {found!r}, expected "
                             f"{STATE_FORMAT!r}); pass what Table.state() returned")
        if state["name"] != self.name:
            raise ValueError(f"table {self.name!r}: the state is of table {state['name']!r}")
        saved, mine = _plain(state["config"]), _plain(self.config())
        differences = [f"{key}: saved {saved.get(key)!r}, here {mine[key]!r}" for key in mine
                       if saved.get(key) != mine[key]]
        if differences:
            raise ValueError(f"table {self.name!r} is built differently from the one that was saved ("
                             + "; ".join(differences) + "): build it as it was saved to restore it")
        rows = np.asarray(state["rows"], dtype=np.int64)
        free = np.asarray(state["free_rows"], dtype=np.int64)
        if len(rows) > self.max_size or len(rows) + len(free) != self._rows or \
                not np.array_equal(np.sort(np.concatenate([rows, free])), np.arange(self._rows)):
            raise ValueError(f"table {self.name!r}: the state's rows and free rows do not cover the table's "
                             f"{self._rows} rows exactly once; the state is damaged")
        if len(rows) and not np.array_equal(np.asarray(state["keys"]) % self._rows, rows):
            raise ValueError(f"table {self.name!r}: the state's keys do not match its rows; the state is damaged")


def _check_config(name: str, max_size: int, limiter: RateLimiter, max_times_sampled: int) -> None:
    """Configurations that can only hang, refused with the numbers."""
    if max_size < limiter.min_size_to_sample:
        raise ValueError(f"table {name!r}: max_size={max_size} is below the limiter's min_size_to_sample="
                         f"{limiter.min_size_to_sample}, so sampling would wait forever; raise max_size or lower "
                         f"min_size_to_sample")
    if max_times_sampled >= 1 and limiter.samples_per_insert > max_times_sampled:
        raise ValueError(f"table {name!r}: samples_per_insert={limiter.samples_per_insert:g} asks for more samples "
                         f"of each item than max_times_sampled={max_times_sampled} allows, so the learner would "
                         f"run out of items while the limiter holds the actors back; lower samples_per_insert or "
                         f"raise max_times_sampled")


def _check_priorities(priorities, count: int, table: str) -> np.ndarray:
    priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
    if len(priorities) == 1 and count != 1:
        priorities = np.full(count, priorities[0])
    if len(priorities) != count:
        raise ValueError(f"table {table!r}: {len(priorities)} priorities for {count} items")
    if count and not (priorities.min() >= 0 and priorities.max() < np.inf):     # NaN fails the first test
        bad = int(np.flatnonzero(~(np.isfinite(priorities) & (priorities >= 0)))[0])
        raise ValueError(f"table {table!r}: priorities must be finite and >= 0, got {priorities[bad]} at index {bad}")
    return priorities


def _deadline(timeout_s: float) -> float:
    timeout_s = float(timeout_s)
    if math.isnan(timeout_s) or timeout_s < 0:
        raise ValueError(f"timeout_s must be >= 0 (0: do not wait; math.inf: wait forever), got {timeout_s}")
    return time.monotonic() + timeout_s


def _occurrence_rank(rows: np.ndarray) -> np.ndarray:
    """For each entry, how many earlier entries hold the same row."""
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    positions = np.arange(len(rows))
    starts = np.empty(len(rows), dtype=bool)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = positions - np.maximum.accumulate(np.where(starts, positions, 0))
    return rank


def _as_slice(rows: np.ndarray):
    """``rows`` as a slice when they are consecutive and ascending (writes through a slice are faster)."""
    if len(rows) > 16 and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    total = np.cumsum(values)
    return total - values


def _plain(value):
    """Lists for tuples, so that a config read back from JSON compares equal."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
