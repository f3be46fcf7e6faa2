"""Coordinators: the rules between actors and learner (grant, accept or drop, batch ready, after publish).

`make_coordinator` picks one from the experiment's resolved coordination mode:

    sync  (PPO)          `SyncCoordinator`: one slot per actor, granted after each publish; policy lag 0
    async (IMPALA, APPO) `AsyncCoordinator`: `slots_per_actor` slots each, granted again once copied; unrolls older
                         than `max_policy_lag` are dropped (an async parameter server, A3C: batches of one
                         gradient, `max_staleness` for the lag)
    replay (Ape-X, SAC)  `ReplayCoordinator`: each actor's ring of slots is the replay's storage; accepted unrolls
                         become n-step items in a rate-limited table, batches are samples of it
    replay (R2D2)        `SequenceReplayCoordinator`: the same, with overlapping sequences and their stored
                         recurrent states for items

Both check their flow-control arithmetic when built (`FlowControlError`), as Reverb's rate limiters refuse a
configuration that would deadlock.
"""
from menger.coordinator.asynchronous import AsyncCoordinator
from menger.coordinator.base import FlowControlError, SlotCoordinator
from menger.coordinator.sync import SyncCoordinator
from menger.core import Coordinator


def batch_unrolls(runtime) -> int:
    """Unrolls per async batch: `batch_unrolls` when set; else the unrolls that hold `batch_envs` env columns (at
    most the slots there are), so a batch is the same size with 1 actor x 16 envs or 64 actors x 4; else 0 (one
    unroll per actor)."""
    coordination = runtime.coordination
    if coordination.batch_unrolls or not coordination.batch_envs:
        return coordination.batch_unrolls
    wanted = -(-coordination.batch_envs // runtime.envs_per_actor)
    return min(wanted, runtime.actors * coordination.slots_per_actor)


def make_coordinator(config) -> Coordinator:
    """The coordinator of an `ExperimentConfig`, from its resolved coordination mode."""
    mode, rt = config.coordination, config.runtime
    num_actors, coordination = rt.actors, rt.coordination
    algorithm = config.algorithm  # its registry entry: what its replay items are, its own settings
    if mode == "replay" and algorithm.replay_items == "sequences":
        from menger.coordinator.sequences import SequenceReplayCoordinator

        return SequenceReplayCoordinator(num_actors, config.replay, algorithm.config(config),
                                         unroll_length=rt.unroll_length,
                                         envs_per_actor=rt.envs_per_actor, in_flight=coordination.slots_per_actor,
                                         seed=rt.seed)
    if mode == "replay":
        from menger.coordinator.replay import ReplayCoordinator

        settings = algorithm.config(config)
        return ReplayCoordinator(num_actors, config.replay, unroll_length=rt.unroll_length,
                                 envs_per_actor=rt.envs_per_actor, in_flight=coordination.slots_per_actor,
                                 gamma=settings.gamma, n_step=settings.n_step, seed=rt.seed)
    if mode == "sync":
        return SyncCoordinator(num_actors)
    if mode == "async" and config.learner_mode == "parameter_server":  # each gradient applied as it arrives
        return AsyncCoordinator(num_actors, coordination.slots_per_actor, 1,
                                rt.parameter_server.max_staleness, expire=True)
    if mode == "async":
        return AsyncCoordinator(num_actors, coordination.slots_per_actor, batch_unrolls(rt),
                                coordination.max_policy_lag)
    raise ValueError(f"unknown coordination mode {mode!r}; use sync, async or replay")


__all__ = ["AsyncCoordinator", "FlowControlError", "SlotCoordinator", "SyncCoordinator", "batch_unrolls",
           "make_coordinator"]
