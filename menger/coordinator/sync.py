"""Sync coordination (PPO): every unroll of an update acted with the newest parameters (policy lag 0).

Each actor holds one slot. After each publish the coordinator grants every running actor its slot (a round);
a batch is ready when every actor that is not given up has delivered the round's unroll. An actor that is
lost mid-round still owes it: its next incarnation gets the grant, so the round waits for it (the supervisor's
deadlines bound the wait). In between rounds the actors are idle, which makes their state a clean cut for
checkpoints (the trainer collects snapshots before it sends the next round's grants).
"""
from __future__ import annotations

from menger.coordinator.base import SlotCoordinator


class SyncCoordinator(SlotCoordinator):
    idle_between_batches = True

    def __init__(self, num_actors: int):
        super().__init__(num_actors, slots_per_actor=1)
        self.owes = [False] * num_actors  # the actor has not yet delivered the current round's unroll
        self.owing = 0  # how many owe: never an actor given up or parked (they owe nothing)

    def _owe(self, actor_id: int, owes: bool) -> None:
        self.owing += owes - self.owes[actor_id]
        self.owes[actor_id] = owes

    def _on_started(self, actor_id: int, first: bool) -> None:
        if first or self.owes[actor_id]:
            self._owe(actor_id, True)
            self._grant(actor_id)

    def _on_accepted(self, actor_id: int) -> None:
        self._owe(actor_id, False)

    def actor_given_up(self, actor_id: int) -> None:
        super().actor_given_up(actor_id)
        self._owe(actor_id, False)

    def actor_parked(self, actor_id: int) -> None:
        super().actor_parked(actor_id)
        self._owe(actor_id, False)  # the round goes on without it; unparked, it joins the next one

    def batch_ready(self) -> bool:
        return bool(self.pending) and not self.owing

    def _batch_size(self) -> int:
        return len(self.pending)

    def _on_taken(self, slot: int) -> None:
        self.free[self.owner(slot)].append(slot)  # granted again in the next round, after the publish

    def published(self, version: int) -> None:
        """A new round: every actor that is not given up owes an unroll of `version`; running ones get a grant."""
        super().published(version)
        for actor_id in range(self.num_actors):
            if self.given_up[actor_id]:
                continue
            self._owe(actor_id, True)
            if self.alive[actor_id]:
                self._grant(actor_id)
