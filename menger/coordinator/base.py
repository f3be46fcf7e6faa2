"""What every slot-granting coordinator shares: which actor owns which slot, and what each slot is doing.

Actor `a` owns slots `a * k .. a * k + k - 1` (k = `slots_per_actor`). A slot is in exactly one state:

    free     held by the learner, waiting to be granted (after a copy, a loss, or a sync round)
    granted  the actor may fill it (a grant was queued or sent)
    pending  an accepted unroll sits in it, waiting for a batch

A tag that arrives twice (a duplicate) names a slot that was already handled the first time, so only a slot
that is still granted goes back to its actor: a slot is never granted while it holds a pending unroll.

Incarnations fence the past: the coordinator's idea of actor `a`'s incarnation changes only in
`actor_started`, so the last unrolls a dead incarnation sent before dying are still judged as its own, and
anything an older incarnation sends after its successor started is dropped as `stale_incarnation`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

from menger.config import ConfigError
from menger.core import Batch, UnrollMeta, Verdict


class FlowControlError(ConfigError):
    """The coordination settings can never fill a batch: the run would wait forever."""


class SlotCoordinator(ABC):
    """Slot bookkeeping and the checks every mode makes (stale incarnations, duplicates); subclasses decide
    when to grant (`_on_started`, `_on_taken`, `published`), what else to drop (`_drop_reason`) and when a
    batch is ready (`batch_ready`, `_batch_size`)."""

    idle_between_batches = False  # True where actors wait between batches, so their state is a clean cut

    def __init__(self, num_actors: int, slots_per_actor: int):
        if num_actors < 1 or slots_per_actor < 1:
            raise FlowControlError(f"a coordinator needs at least one actor and one slot each; got {num_actors} "
                                   f"actor(s) x {slots_per_actor} slot(s)")
        self.num_actors, self.slots_per_actor = num_actors, slots_per_actor
        self.version = 0
        self.incarnation = [-1] * num_actors   # -1: never started
        self.last_sequence = [0] * num_actors
        self.alive = [False] * num_actors
        self.given_up = [False] * num_actors
        self.free: list[list[int]] = [list(self.slots_of(a)) for a in range(num_actors)]
        self.pending: list[tuple[int, UnrollMeta]] = []
        self.granted: set[int] = set()  # granted (or queued to be): the actor may be filling them
        self.granted_to = [0] * num_actors  # per actor, how many of `granted` are its slots
        self._queued: dict[int, int] = {}  # slot -> actor: grants to send, in the order they were queued
        self._pending_slots: set[int] = set()  # the slots of `pending`, to look up without a scan

    def slots_of(self, actor_id: int) -> range:
        k = self.slots_per_actor
        return range(actor_id * k, (actor_id + 1) * k)

    def owner(self, slot: int) -> int:
        return slot // self.slots_per_actor

    # ----- incarnations ---------------------------------------------------------------------------------
    def actor_started(self, actor_id: int, incarnation: int) -> None:
        """A new incarnation runs: every slot of the actor that holds no pending unroll is free for it."""
        first = self.incarnation[actor_id] < 0
        self.incarnation[actor_id], self.last_sequence[actor_id] = incarnation, 0
        self.alive[actor_id] = True
        self._reclaim(actor_id)
        self._on_started(actor_id, first)

    def actor_lost(self, actor_id: int) -> None:
        """The incarnation died or was stopped: grants it held come back; its accepted unrolls stay pending."""
        self.alive[actor_id] = False
        self._reclaim(actor_id)

    def actor_given_up(self, actor_id: int) -> None:
        """No more incarnations will come: the actor no longer counts for batches."""
        self.actor_lost(actor_id)
        self.given_up[actor_id] = True

    def actor_parked(self, actor_id: int) -> None:
        """The actor was stopped by choice (an elastic run): like given up, until `actor_unparked`."""
        self.actor_lost(actor_id)
        self.given_up[actor_id] = True
        self._on_active_changed()

    def actor_unparked(self, actor_id: int) -> None:
        """A parked actor counts again (its next incarnation's `actor_started` grants its slots)."""
        self.given_up[actor_id] = False
        self._on_active_changed()

    def _on_active_changed(self) -> None:
        """The actors that count for batches changed (parked or unparked)."""

    def _reclaim(self, actor_id: int) -> None:
        pending = self._pending_slots
        self.free[actor_id] = [slot for slot in self.slots_of(actor_id) if slot not in pending]
        self.granted.difference_update(self.slots_of(actor_id))
        self.granted_to[actor_id] = 0
        for slot in self.slots_of(actor_id):
            self._queued.pop(slot, None)

    # ----- grants ---------------------------------------------------------------------------------------
    def _grant(self, actor_id: int) -> None:
        """Queue a grant of the actor's next free slot (the trainer sends it with `grants()`)."""
        if self.free[actor_id]:
            slot = self.free[actor_id].pop(0)
            self._mark_granted(slot)
            self._queued[slot] = actor_id

    def _regrant(self, slot: int) -> None:
        """The slot is copied or rejected: hand it straight back to its actor if that one still runs."""
        actor_id = self.owner(slot)
        if self.alive[actor_id]:
            self._mark_granted(slot)
            self._queued[slot] = actor_id
        else:
            self.free[actor_id].append(slot)

    def _mark_granted(self, slot: int) -> None:
        if slot not in self.granted:
            self.granted.add(slot)
            self.granted_to[self.owner(slot)] += 1

    def _unmark_granted(self, slot: int) -> None:
        if slot in self.granted:
            self.granted.discard(slot)
            self.granted_to[self.owner(slot)] -= 1

    def grants(self) -> list[tuple[int, int]]:
        """(actor, slot) pairs to send now; each is then granted until the actor returns the slot or is lost."""
        queued, self._queued = self._queued, {}
        return [(actor_id, slot) for slot, actor_id in queued.items()]

    def grant_failed(self, actor_id: int, slot: int) -> None:
        """The transport could not reach the actor (it is gone); the slot waits for the next incarnation."""
        self._unmark_granted(slot)
        self.free[actor_id].append(slot)

    # ----- unrolls --------------------------------------------------------------------------------------
    def accept(self, slot: int, meta: UnrollMeta) -> Verdict:
        actor_id = meta.actor_id
        if meta.incarnation != self.incarnation[actor_id]:
            return Verdict(False, "stale_incarnation")  # its slots were reclaimed when its successor started
        was_granted = slot in self.granted
        self._unmark_granted(slot)
        if meta.sequence <= self.last_sequence[actor_id]:
            if was_granted:  # a redelivered tag names a slot already handled: only a granted one goes back
                self._regrant(slot)
            return Verdict(False, "duplicate")
        self.last_sequence[actor_id] = meta.sequence
        reason = self._drop_reason(meta)
        if reason is not None:
            self._regrant(slot)
            return Verdict(False, reason, delivered=True)
        self._keep(slot, meta)
        return Verdict(True, None, delivered=True)

    def take_batch(self, gather: Callable[[list[int]], dict]) -> Batch:
        """Gather the next batch's slots (a copy), then free or re-grant them."""
        size = self._batch_size()
        taken, self.pending = self.pending[:size], self.pending[size:]
        self._pending_slots.difference_update(slot for slot, _ in taken)
        data = gather([slot for slot, _ in taken])
        for slot, _ in taken:
            self._on_taken(slot)
        metas = [meta for _, meta in taken]
        return Batch(data, metas, [self.version - meta.policy_version for meta in metas])

    def published(self, version: int) -> None:
        self.version = version

    def take_expired(self) -> list[UnrollMeta]:
        """Pending unrolls dropped as too stale since the last call (only a parameter server expires them)."""
        return []

    # ----- what only some coordinators use (replay) ------------------------------------------------------
    def attach(self, transport) -> None:
        """The transport is built (the replay keeps its items in the transport's slots)."""

    def learned(self, batch: Batch, stats: dict) -> None:
        """The learner stepped on `batch`; `stats` may carry what goes back (the replay's new priorities)."""

    def metrics(self) -> dict:
        return {}

    def state(self) -> dict | None:
        """What a checkpoint must keep of the coordinator beyond the learner and the accounts (None: nothing)."""
        return None

    def load_state(self, state: dict) -> None:
        """Restore `state()` (before any actor starts)."""

    def close(self) -> None:
        """The run ended."""

    # ----- what each mode decides ----------------------------------------------------------------------
    @abstractmethod
    def _on_started(self, actor_id: int, first: bool) -> None:
        """A new incarnation runs (its free slots are in `self.free[actor_id]`): queue its grants."""

    def _keep(self, slot: int, meta: UnrollMeta) -> None:
        """An accepted unroll waits in its slot for a batch (the replay coordinator makes it items instead)."""
        self.pending.append((slot, meta))
        self._pending_slots.add(slot)
        self._on_accepted(meta.actor_id)

    def _on_accepted(self, actor_id: int) -> None:
        """An unroll of the actor became pending."""

    @abstractmethod
    def _on_taken(self, slot: int) -> None:
        """The slot's unroll was batched and copied: free the slot or grant it again."""

    def _drop_reason(self, meta: UnrollMeta) -> str | None:
        """Why a fresh unroll of a live incarnation is dropped anyway (e.g. its policy lag), or None."""
        return None

    @abstractmethod
    def _batch_size(self) -> int:
        """How many pending unrolls the next batch takes."""

    @abstractmethod
    def batch_ready(self) -> bool:
        """Whether `take_batch` may be called now."""
