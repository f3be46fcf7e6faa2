"""Several replay tables behind one sampling interface, as Ape-X shards its replay: actors insert into their own
shard, the learner samples across all of them in proportion to their priority mass.

The loop::

    from menger.replay import ShardedTables, Table, SampleToInsertRatio, fifo, prioritized, importance_weights

    shards = [Table(f"replay{i}", max_size=250_000, sampler=prioritized(0.6), remover=fifo(),
                    rate_limiter=SampleToInsertRatio(8, min_size_to_sample=2_500, error_buffer=2_000),
                    item_spec=spec, seed=run_seed + i) for i in range(4)]
    replay = ShardedTables(shards, seed=run_seed)

    # actor a: its own shard, directly (no lock shared with the other actors)
    replay.shard(a % replay.num_shards).insert_batch(transitions, priorities=initial_priorities, timeout_s=30.0)

    # the learner: one batch over the union, weights over the union, priorities routed back by key
    sample = replay.sample(256, timeout_s=30.0)
    weights = importance_weights(sample, beta=0.4)
    replay.update_priorities(sample.keys, np.abs(td_errors) + 1e-6)

What a sample means:

* **the split**: shard ``s`` holds mass ``m_s`` (`Table.priority_mass`: ``sum p_i ** alpha`` for a prioritized
  sampler, the number of items for a uniform one). How many items each shard gives is one multinomial draw of
  ``batch_size`` over ``m_s / sum m``, from this object's own seeded generator; then each shard samples its part
  with its own generator. If every shard's mass is 0 (all priorities 0) the split is by size, and the union is
  sampled uniformly, as one table would.
* **the limiters**: every shard's own limiter must admit its part. If one does not, nothing is sampled and the
  call waits (polling every few milliseconds; the shards have one condition each) and tries again, with the
  generator as it was, so a batch depends only on the generator and the shards' contents when it passes, never
  on how long it waited. Past the deadline `ReplayTimeout` names the shard(s) and their limiters, and nothing
  was sampled. A batch is never partial. Any batch size up to ``batch_size`` can fall on one shard, so a batch
  size that could deadlock any shard's limiter at any part size is refused at once.
* **keys** are ``shard_key * num_shards + shard``: unique over the union; `update_priorities` and `delete` decode
  them and route each to its shard. The batch is grouped by shard (shard 0's items first), ``data`` in the order of
  ``keys``.
* **probabilities** are over the union: ``m_s / sum m`` times the item's chance within its shard, which for a
  prioritized sampler is ``p_i ** alpha / sum over every shard's items``; ``table_size`` is the union's size, and
  ``min_probability`` the union's smallest nonzero chance, so `importance_weights` gives Schaul et al.'s weights
  over the union. With ``max_times_sampled``, the split is fixed when the batch begins; an item used up leaves its
  shard at once (later draws there see the shard without it), and each draw's probability is still the chance this
  process gave it: its shard's share times its chance within the shard then.

The shards are sampled, updated and deleted from only through this object (actors only insert into them): a
check that a shard admits its part and the draw from it are two calls, and nothing else may sample or delete in
between. Close it with `close`, which closes every shard.

**Checkpoints**: `state` holds each shard's `Table.state` and the generator's; `load_state` into shards built the
same way goes on bit for bit.
"""
from __future__ import annotations

import copy
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from menger.replay.table import ReplayClosed, ReplayTimeout, Sample, Table, _check_priorities, _deadline

__all__ = ["ShardedTables"]

STATE_FORMAT = "menger.replay.sharded/1"
_SPLIT_TRIES = 16               # splits drawn before one is taken while inserts keep landing
_FIRST_PAUSE_S = 0.0005        # a blocked sample tries again after this, doubling up to _LONGEST_PAUSE_S
_LONGEST_PAUSE_S = 0.01


@dataclass(frozen=True)
class _Split:
    """One attempt at a batch: the shards' shares and sizes, the counts drawn, the shards that refuse theirs."""

    shares: np.ndarray             # float64 [shards]: each shard's mass over the union's
    sizes: np.ndarray              # int64 [shards]
    counts: np.ndarray             # int64 [shards]: how many items each shard gives
    min_probability: float         # the union's smallest nonzero probability
    blocked: list[int]             # shards whose limiter does not admit their count now


class ShardedTables:
    """``N`` replay tables (shards) sampled as one; see the module's docstring for the loop and the semantics.

    Every shard must hold the same items (``item_spec``) and be sampled the same way (``uniform()``, or
    ``prioritized(alpha)`` with one ``alpha``). ``seed`` seeds the generator that splits batches across shards
    (None: fresh entropy); each shard's own seed drives its draws.
    """

    def __init__(self, tables: Sequence[Table], seed: int | None = None):
        tables = list(tables) if isinstance(tables, Sequence) else None
        if not tables:
            raise ValueError(f"ShardedTables needs a non-empty list of Tables, got {tables!r}")
        for index, table in enumerate(tables):
            if not isinstance(table, Table):
                raise TypeError(f"shard {index} must be a menger.replay.Table, got {type(table).__name__}")
            if any(table is other for other in tables[:index]):
                raise ValueError(f"shard {index} (table {table.name!r}) is also an earlier shard; each shard must "
                                 f"be its own Table")
        _check_alike(tables)
        self._shards = tuple(tables)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()          # the generator, and check-then-draw against update and delete
        self._wake = threading.Event()         # set by close, to end a wait at once
        self._closed = False
        self._sample_blocked_s = 0.0
        self._checked_batches: set[int] = set()

    # ----- what it holds ----------------------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        return len(self._shards)

    @property
    def shards(self) -> tuple[Table, ...]:
        return self._shards

    def shard(self, index: int) -> Table:
        """Shard ``index`` (an actor inserts into ``shard(actor_id % num_shards)``)."""
        if isinstance(index, bool) or int(index) != index or not 0 <= index < len(self._shards):
            raise IndexError(f"there are {len(self._shards)} shards (0 to {len(self._shards) - 1}), got {index!r}; "
                             f"pick an actor's shard as actor_id % num_shards")
        return self._shards[int(index)]

    @property
    def item_spec(self) -> dict:
        return self._shards[0].item_spec

    @property
    def size(self) -> int:
        return sum(shard.size for shard in self._shards)

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return sum(shard.nbytes for shard in self._shards)

    def can_sample(self, batch_size: int = 1) -> bool:
        """Would a sample of ``batch_size`` pass now, without waiting? (The generator is left as it was.)"""
        if len(self._shards) == 1:  # one shard: its own answer (a key is its shard key, x 1 + 0)
            return not self._closed and self._shards[0].can_sample(batch_size)
        with self._lock:
            if self._closed:
                return False
            state = self._rng.bit_generator.state
            try:
                return not self._steady_split(batch_size).blocked
            finally:
                self._rng.bit_generator.state = state

    # ----- samples ----------------------------------------------------------------------------------------------
    def sample(self, batch_size: int, timeout_s: float) -> Sample:
        """A batch of ``batch_size`` items over the union, once every shard's limiter admits its part.

        Past the deadline, `ReplayTimeout` (its ``shard``: the first shard that refused its part, None when every
        shard is empty); nothing was sampled and the generator did not move.
        """
        self._check_batch(batch_size)
        if len(self._shards) == 1:  # the whole batch is the one shard's: the same sample, without the split
            if self._closed:
                raise ReplayClosed(f"these sharded tables were closed; their sample of {batch_size} cannot go on")
            return self._shards[0].sample(batch_size, timeout_s)
        deadline = _deadline(timeout_s)
        pause = _FIRST_PAUSE_S
        while True:
            with self._lock:
                if self._closed:
                    raise ReplayClosed(f"these {len(self._shards)} sharded tables were closed; their sample of "
                                       f"{batch_size} cannot go on")
                state = self._rng.bit_generator.state
                split = self._steady_split(batch_size)
                if not split.blocked:
                    return self._draw(split)
                self._rng.bit_generator.state = state      # a refused split leaves no trace
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(split, batch_size, timeout_s)
            started = time.monotonic()
            self._wake.wait(min(remaining, pause))
            self._sample_blocked_s += time.monotonic() - started
            pause = min(2 * pause, _LONGEST_PAUSE_S)

    def _check_batch(self, batch_size: int) -> None:
        """Refuse a batch size whose part on some shard could deadlock that shard's limiter (any part size)."""
        if batch_size in self._checked_batches:
            return
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        for index, shard in enumerate(self._shards):
            for part in range(1, int(batch_size) + 1):
                try:
                    shard.check_sample_batch(part)
                except ValueError as error:
                    raise ValueError(f"a sharded batch of {batch_size} can ask any shard for 1 to {batch_size} items, "
                                     f"and shard {index} (table {shard.name!r}) refuses {part}, so sharded batches "
                                     f"of at most {part - 1} are safe on it: {error}") from None
        self._checked_batches.add(batch_size)

    def _steady_split(self, batch_size: int) -> _Split:
        """`_split` over one state of each shard: an actor's insert that lands while the split reads a shard's size,
        mass and limiter would mix two states (a share from before it, a limiter's answer from after), so the split
        is drawn again, from the same generator state, until no shard changed while it was read."""
        state = self._rng.bit_generator.state
        for _ in range(_SPLIT_TRIES - 1):
            before = [shard.changes for shard in self._shards]
            split = self._split(batch_size)
            if [shard.changes for shard in self._shards] == before:
                return split
            self._rng.bit_generator.state = state
        return self._split(batch_size)     # the shards never held still: the last reads, as good as any

    def _split(self, batch_size: int) -> _Split:
        """Draw how many items each shard gives (advances the generator), and find the shards that refuse theirs."""
        sizes = np.array([shard.size for shard in self._shards], dtype=np.int64)
        if sizes.sum() == 0:
            return _Split(np.zeros(len(sizes)), sizes, np.zeros(len(sizes), dtype=np.int64), 0.0,
                          list(range(len(sizes))))
        masses = np.array([shard.priority_mass() for shard in self._shards], dtype=np.float64)
        if masses.sum() <= 0:                  # every priority is 0: uniform over the union, as one table does
            masses = sizes.astype(np.float64)
        shares = masses / masses.sum()
        counts = self._rng.multinomial(batch_size, shares)
        blocked = [index for index, count in enumerate(counts)
                   if count and not self._shards[index].can_sample(int(count))]
        smallest = [share * self._shards[index].min_probability() for index, share in enumerate(shares) if share > 0]
        return _Split(shares, sizes, counts, float(min(smallest)), blocked)

    def _draw(self, split: _Split) -> Sample:
        """Each shard's part, encoded and weighted for the union (the limiters admitted every part just now)."""
        total_size = int(split.sizes.sum())
        parts, keys, probabilities, table_size = [], [], [], []
        for index, count in enumerate(split.counts):
            if not count:
                continue
            shard = self._shards[index]
            try:
                part = shard.sample(int(count), timeout_s=0)
            except ReplayTimeout as error:
                raise RuntimeError(
                    f"shard {index} (table {shard.name!r}) admitted its {count} items a moment ago and refused them "
                    f"now: something sampled or deleted from it outside ShardedTables, and the shards before it have "
                    f"handed out their parts of this batch, which are lost. Sample, update and delete shards only "
                    f"through ShardedTables") from error
            parts.append(part)
            keys.append(part.keys * len(self._shards) + index)
            probabilities.append(split.shares[index] * part.probabilities)
            table_size.append(total_size - split.sizes[index] + part.table_size)
        data = {name: np.concatenate([part.data[name] for part in parts]) for name in parts[0].data}
        return Sample(np.concatenate(keys), data, np.concatenate(probabilities),
                      np.concatenate(table_size).astype(np.int64), split.min_probability)

    def _timeout(self, split: _Split, batch_size: int, timeout_s: float) -> ReplayTimeout:
        if split.sizes.sum() == 0:
            first = self._shards[0]
            error = ReplayTimeout(f"sample of {batch_size} item(s) across {len(self._shards)} shards timed out after "
                                  f"{timeout_s:g} s: every shard is empty. Are the actors inserting?",
                                  table=first.name, operation="sample", timeout_s=timeout_s,
                                  counters=first.rate_limiter.counters())
            error.shard = None
            return error
        reasons = []
        for index in split.blocked:
            shard, count = self._shards[index], int(split.counts[index])
            limiter = shard.rate_limiter
            if limiter.can_sample(count):
                reason = (f"its items can be sampled fewer than {count} more times "
                          f"(max_times_sampled={shard.max_times_sampled})")
            else:
                reason = limiter.sample_blocked_reason(count)
            reasons.append(f"shard {index} (table {shard.name!r}) was asked for {count} and {reason}; limiter: "
                           f"{limiter.describe()}")
        first = self._shards[split.blocked[0]]
        message = (f"sample of {batch_size} item(s) across {len(self._shards)} shards timed out after {timeout_s:g} s "
                   f"(nothing was sampled): " + "; ".join(reasons) + ". Are the actors of those shards inserting?")
        error = ReplayTimeout(message, table=first.name, operation="sample", timeout_s=timeout_s,
                              counters=first.rate_limiter.counters())
        error.shard = split.blocked[0]     # the first shard that refused its part
        return error

    # ----- priorities -------------------------------------------------------------------------------------------
    def update_priorities(self, keys, priorities) -> int:
        """Set priorities by (sharded) key, each routed to its shard; returns how many were set (see Table's)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        priorities = _check_priorities(priorities, len(keys), f"sharded({len(self._shards)})")
        with self._lock:
            return sum(shard.update_priorities(local[mask], priorities[mask])
                       for shard, local, mask in self._route(keys))

    def delete(self, keys) -> int:
        """Remove items by (sharded) key, each from its shard; returns how many were there (see Table's)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        with self._lock:
            return sum(shard.delete(local[mask]) for shard, local, mask in self._route(keys))

    def _route(self, keys: np.ndarray):
        """(shard, its keys, which of ``keys`` are its) for each shard that has some, in shard order."""
        count = len(self._shards)
        owners, local = keys % count, keys // count
        for index, shard in enumerate(self._shards):
            mask = owners == index
            if mask.any():
                yield shard, local, mask

    # ----- waiting ----------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every shard (their waiting calls raise ReplayClosed) and wake a waiting sample, which raises it too."""
        with self._lock:
            self._closed = True
        self._wake.set()
        for shard in self._shards:
            shard.close()

    # ----- metrics ----------------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The shards' ``replay/...`` figures over the union, plus ``replay/shards`` and each shard's size and bytes.

        Counters and seconds are summed (``replay/sample_blocked_s`` includes the waits of sharded samples);
        ``replay/samples_per_insert`` is the union's; ``replay/rate_limiter_error`` is the sum of the shards'
        errors; the priority figures are over the union's items.
        """
        each = [shard.metrics() for shard in self._shards]
        summed = ["replay/size", "replay/bytes", "replay/inserts", "replay/samples", "replay/deletes",
                  "replay/evicted", "replay/rate_limiter_error", "replay/insert_blocked_s",
                  "replay/sample_blocked_s", "replay/updates_ignored"]
        merged = {key: sum(figures[key] for figures in each) for key in summed}
        merged["replay/sample_blocked_s"] += self._sample_blocked_s
        inserts = merged["replay/inserts"]
        merged["replay/samples_per_insert"] = merged["replay/samples"] / inserts if inserts else 0.0
        held = [figures for figures in each if figures["replay/size"]]
        size = sum(figures["replay/size"] for figures in held)
        merged["replay/priority_min"] = min((f["replay/priority_min"] for f in held), default=0.0)
        merged["replay/priority_mean"] = (sum(f["replay/priority_mean"] * f["replay/size"] for f in held) / size
                                          if size else 0.0)
        merged["replay/priority_max"] = max((f["replay/priority_max"] for f in held), default=0.0)
        merged["replay/shards"] = len(self._shards)
        for index, figures in enumerate(each):
            merged[f"replay/shard{index}/size"] = figures["replay/size"]
            merged[f"replay/shard{index}/bytes"] = figures["replay/bytes"]
        return merged

    # ----- checkpoints ------------------------------------------------------------------------------------------
    def state(self) -> dict:
        """Each shard's `Table.state` and the splitting generator's state (plain data, as `Table.state`).

        The shards are read one after another: for a checkpoint that resumes exactly, take it while the actors are
        not inserting (as for one table while its actors insert).
        """
        with self._lock:
            return {"format": STATE_FORMAT, "shards": [shard.state() for shard in self._shards],
                    "rng": copy.deepcopy(self._rng.bit_generator.state)}

    def load_state(self, state: dict) -> None:
        """Restore every shard and the generator from `state` of sharded tables built the same way."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"not a sharded replay state (format {found!r}, expected {STATE_FORMAT!r}); pass what "
                             f"ShardedTables.state() returned")
        saved = state["shards"]
        if len(saved) != len(self._shards):
            raise ValueError(f"the state has {len(saved)} shards, these sharded tables {len(self._shards)}: build "
                             f"as many shards as were saved to restore them")
        names = [shard_state.get("name") if isinstance(shard_state, dict) else None for shard_state in saved]
        if names != [shard.name for shard in self._shards]:
            raise ValueError(f"the state's shards are tables {names}, these are {[s.name for s in self._shards]}: "
                             f"build the shards in the order they were saved")
        with self._lock:
            for index, (shard, shard_state) in enumerate(zip(self._shards, saved)):
                try:
                    shard.load_state(shard_state)
                except ValueError as error:
                    restored = f"shards 0 to {index - 1} were restored already; " if index else ""
                    raise ValueError(f"shard {index} cannot be restored ({restored}the generator was not): "
                                     f"{error}") from error
            self._rng.bit_generator.state = copy.deepcopy(state["rng"])


def _check_alike(tables: list[Table]) -> None:
    """Shards must hold the same items and weigh them the same way, or the union's probabilities mean nothing."""
    first = tables[0]
    if first.sampler.kind not in ("uniform", "prioritized"):
        raise ValueError(f"shard 0 (table {first.name!r}) samples {first.sampler!r}, which takes items in insertion "
                         f"order and has no priority mass to split a batch by; shard tables that sample uniform() "
                         f"or prioritized(alpha)")
    for index, table in enumerate(tables[1:], start=1):
        if table.item_spec != first.item_spec:
            raise ValueError(f"shard {index} (table {table.name!r}) holds items {table.item_spec}, shard 0 (table "
                             f"{first.name!r}) {first.item_spec}: build every shard with the same item_spec")
        if table.sampler != first.sampler:
            raise ValueError(f"shard {index} (table {table.name!r}) samples {table.sampler!r}, shard 0 (table "
                             f"{first.name!r}) {first.sampler!r}: build every shard with the same sampler, so that "
                             f"probabilities compare across shards")

