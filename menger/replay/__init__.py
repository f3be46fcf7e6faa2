"""Replay tables with Reverb's semantics, on one host: a sampler, a remover, a rate limiter, items in NumPy rows.

The loop (Ape-X; DQN, R2D2 and SAC differ only in the item spec, the sampler and the limiter)::

    from menger.replay import Table, SampleToInsertRatio, fifo, prioritized, importance_weights

    table = Table("replay", max_size=1_000_000, sampler=prioritized(alpha=0.6), remover=fifo(),
                  rate_limiter=SampleToInsertRatio(samples_per_insert=8, min_size_to_sample=10_000,
                                                   error_buffer=2_000),
                  item_spec={"obs": ((4,), np.float32), "action": ((), np.int64), "reward": ((), np.float32),
                             "next_obs": ((4,), np.float32), "done": ((), np.bool_)},
                  seed=run_seed)

    # actors: insert transitions (or n-step transitions, or fixed-length sequences: it is only a spec)
    table.insert_batch(transitions, priorities=initial_priorities, timeout_s=30.0)

    # the learner: sample under the limiter, learn, write priorities back
    while training:
        sample = table.sample(256, timeout_s=30.0)            # blocks while the learner is ahead
        weights = importance_weights(sample, beta=0.4)        # (N * P(i)) ** -beta / max
        td_errors = learner.update(sample.data, weights)
        table.update_priorities(sample.keys, np.abs(td_errors) + 1e-6)

    checkpoint["replay"] = table.state()                      # NumPy arrays and ints: flatten_state stores it
    table.load_state(checkpoint["replay"])                    # into a table built the same way

`Table.queue(name, n, item_spec=...)` is a FIFO queue of n items. Rate limiters (`RateLimiter` and its
constructors `MinSize`, `SampleToInsertRatio`, `Queue`) are in `menger.replay.limiters`, with the deadlock
rule and the restore rule; the trees behind prioritized sampling in `menger.replay.sumtree`; the storage, and
how a shared-memory version replaces it, in `menger.replay.storage`.
`ShardedTables` samples several tables as one, by priority mass, as Ape-X shards its replay; Ray comes later.
"""
from menger.replay.limiters import MinSize, Queue, RateLimiter, SampleToInsertRatio
from menger.replay.selectors import Selector, fifo, lifo, lowest_priority, prioritized, uniform
from menger.replay.sharded import ShardedTables
from menger.replay.storage import ItemStorage
from menger.replay.sumtree import MinTree, SumTree
from menger.replay.table import ReplayClosed, ReplayTimeout, Sample, Table, importance_weights

__all__ = [
    "ItemStorage",
    "MinSize",
    "MinTree",
    "Queue",
    "RateLimiter",
    "ReplayClosed",
    "ReplayTimeout",
    "Sample",
    "SampleToInsertRatio",
    "Selector",
    "ShardedTables",
    "SumTree",
    "Table",
    "fifo",
    "importance_weights",
    "lifo",
    "lowest_priority",
    "prioritized",
    "uniform",
]
