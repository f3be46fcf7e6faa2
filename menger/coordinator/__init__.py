"""Coordinators: the rules between actors and learner (grant, accept or drop, batch ready, after publish).

`make_coordinator` picks one from the experiment's resolved coordination mode:

    sync  (PPO)          `SyncCoordinator`: one slot per actor, granted after each publish; policy lag 0
    async (IMPALA, APPO) `AsyncCoordinator`: `slots_per_actor` slots each, granted again once copied; unrolls older
                         than `max_policy_lag` are dropped

Both check their flow-control arithmetic when built (`FlowControlError`), as Reverb's rate limiters refuse a
configuration that would deadlock. A replay coordinator (insert accepted unrolls into a table, a batch when the
rate limiter lets a sample through) implements the same `menger.core.Coordinator` contract.
"""
from menger.coordinator.asynchronous import AsyncCoordinator
from menger.coordinator.base import FlowControlError, SlotCoordinator
from menger.coordinator.sync import SyncCoordinator
from menger.core import Coordinator


def make_coordinator(mode: str, num_actors: int, coordination) -> Coordinator:
    """`mode`: the experiment's resolved 'sync' or 'async'; `coordination`: its `CoordinationConfig`."""
    if mode == "sync":
        return SyncCoordinator(num_actors)
    if mode == "async":
        return AsyncCoordinator(num_actors, coordination.slots_per_actor, coordination.batch_unrolls,
                                coordination.max_policy_lag)
    raise ValueError(f"unknown coordination mode {mode!r}; use sync or async")


__all__ = ["AsyncCoordinator", "FlowControlError", "SlotCoordinator", "SyncCoordinator", "make_coordinator"]
