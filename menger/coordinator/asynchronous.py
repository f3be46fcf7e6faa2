"""Async coordination (IMPALA, APPO): actors never wait for an update; policy lag is bounded by dropping.

Each actor holds `slots_per_actor` slots. A slot is granted again as soon as the learner has copied it, so an
actor keeps working while the learner steps. Unrolls older than `max_policy_lag` versions when they arrive are
dropped and counted. A batch is `batch_unrolls` accepted unrolls (0 = one per actor).

Flow control: a batch of N unrolls must fit in the slots that exist, because a pending unroll keeps its slot
until it is batched. `batch_unrolls` > actors x `slots_per_actor` could never fill and is refused when the
coordinator is built; losing actors for good (given up) below that capacity ends the run with the same error.

With `expire=True` (an async parameter server: batches of one gradient) the bound holds where it matters, when
a gradient is applied: after every publish, pending gradients that have grown more than `max_policy_lag`
versions old while they waited are dropped too (`take_expired` hands them to the trainer's accounts), and
their slots go back to their actors.
"""
from __future__ import annotations

from collections import deque

from menger.coordinator.base import FlowControlError, SlotCoordinator
from menger.core import UnrollMeta


class AsyncCoordinator(SlotCoordinator):
    def __init__(self, num_actors: int, slots_per_actor: int, batch_unrolls: int, max_policy_lag: int,
                 expire: bool = False):
        super().__init__(num_actors, slots_per_actor)
        self.batch_unrolls = batch_unrolls or num_actors
        self.per_actor = not batch_unrolls  # 0: one unroll per actor that counts (parked ones do not)
        self.max_policy_lag = max_policy_lag
        self.expire = expire
        self._expired: list[UnrollMeta] = []
        self._held: deque[int] = deque()  # slots free to grant, held back while the lag budget is spent
        self._check_capacity(num_actors, "")

    def _check_capacity(self, actors: int, why: str) -> None:
        capacity = actors * self.slots_per_actor
        if self.batch_unrolls > capacity:
            raise FlowControlError(
                f"{why}a batch of runtime.coordination.batch_unrolls={self.batch_unrolls} unrolls can never fill: "
                f"{actors} actor(s) x runtime.coordination.slots_per_actor={self.slots_per_actor} hold at most "
                f"{capacity} unrolls, and a pending unroll keeps its slot until it is batched; use batch_unrolls "
                f"<= {capacity}, or more runtime.actors or slots_per_actor")

    def capacity(self) -> int:
        """The largest batch that can fill: the slots of the actors not given up."""
        return self.given_up.count(False) * self.slots_per_actor

    def resize_batch(self, batch_unrolls: int) -> None:
        """Batches of `batch_unrolls` unrolls from the next one on (`menger.runtime.autosize.BatchAdjuster`)."""
        if not 1 <= batch_unrolls <= self.capacity():
            raise FlowControlError(f"a batch of {batch_unrolls} unrolls: give 1 to {self.capacity()} (the slots of "
                                   "the actors not given up)")
        self.batch_unrolls = batch_unrolls

    def actor_given_up(self, actor_id: int) -> None:
        super().actor_given_up(actor_id)
        remaining = self.given_up.count(False)
        if remaining:  # none left: the supervisor's no-actor deadline ends the run with its own error
            self._check_capacity(remaining, f"actor {actor_id} was given up, so ")

    def _on_active_changed(self) -> None:
        """Parking moved the capacity: a batch of one unroll per actor follows the actors that count; a fixed
        size that no longer fits shrinks to the capacity (it would never fill)."""
        counted = self.given_up.count(False)
        if self.per_actor:
            self.batch_unrolls = max(1, counted)
        elif counted:
            self.batch_unrolls = min(self.batch_unrolls, self.capacity())

    @property
    def lag_budget(self) -> int | None:
        """Unrolls granted or pending at once: a batch for each version of lag allowed, and the one being made. An
        unroll granted now is learned after at most the batches ahead of it, so a large fleet's unrolls are not
        learned `slots / batch` versions late; a small one never reaches the budget. None: no budget (a parameter
        server expires stale gradients instead)."""
        return None if self.expire else self.batch_unrolls * (self.max_policy_lag + 1)

    def _release(self) -> None:
        """Grant held slots, oldest first, while the lag budget allows."""
        budget = self.lag_budget
        while self._held and (budget is None or len(self.granted) + len(self.pending) < budget):
            self._regrant(self._held.popleft())

    def grants(self) -> list[tuple[int, int]]:
        self._release()  # room a lost actor's grants or a failed grant left (cheap: nothing held, or no room)
        return super().grants()

    def _reclaim(self, actor_id: int) -> None:
        super()._reclaim(actor_id)  # the actor's held slots are free again: they are not held for it any more
        if any(self.owner(slot) == actor_id for slot in self._held):
            self._held = deque(slot for slot in self._held if self.owner(slot) != actor_id)

    def _on_started(self, actor_id: int, first: bool) -> None:
        self._held.extend(self.free[actor_id])
        self.free[actor_id] = []
        self._release()

    def _drop_reason(self, meta: UnrollMeta) -> str | None:
        return "policy_lag" if self.version - meta.policy_version > self.max_policy_lag else None

    def published(self, version: int) -> None:
        super().published(version)
        if not self.expire:
            return
        kept = []
        for slot, meta in self.pending:
            if self._drop_reason(meta) is None:
                kept.append((slot, meta))
            else:
                self._expired.append(meta)
                self._pending_slots.discard(slot)
                self._regrant(slot)
        self.pending = kept

    def take_expired(self) -> list[UnrollMeta]:
        expired, self._expired = self._expired, []
        return expired

    def batch_ready(self) -> bool:
        return len(self.pending) >= self.batch_unrolls

    def _batch_size(self) -> int:
        return self.batch_unrolls

    def _on_taken(self, slot: int) -> None:
        self._held.append(slot)
        self._release()
