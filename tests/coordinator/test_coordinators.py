"""The coordinators on their own: a fake transport (a dict of slots), tags made by hand, no processes.

Each test plays the trainer's loop by hand: start actors, send the coordinator's grants, deliver tags, take
batches, publish; and checks what is granted, accepted, dropped (with its reason) and batched.
"""
import pytest

from menger.coordinator import AsyncCoordinator, FlowControlError, SyncCoordinator, make_coordinator
from menger.core import UnrollMeta
from menger.experiment import load_experiment

FRAMES = 8


class FakeTransport:
    """Granted slots per actor, and a gather that records which slots it copied."""

    def __init__(self, reachable=lambda actor_id: True):
        self.granted: dict[int, list[int]] = {}
        self.gathered: list[list[int]] = []
        self.reachable = reachable

    def send(self, coordinator) -> list[tuple[int, int]]:
        sent = []
        for actor_id, slot in coordinator.grants():
            if self.reachable(actor_id):
                self.granted.setdefault(actor_id, []).append(slot)
                sent.append((actor_id, slot))
            else:
                coordinator.grant_failed(actor_id, slot)
        return sent

    def fill(self, actor_id: int) -> int:
        """The actor fills its oldest granted slot."""
        return self.granted[actor_id].pop(0)

    def gather(self, slots: list[int]) -> dict:
        self.gathered.append(list(slots))
        return {"slots": list(slots)}


class Actor:
    """Tags as an actor incarnation makes them: sequence numbers from 1, the version it acted with."""

    def __init__(self, actor_id: int, incarnation: int = 0):
        self.actor_id, self.incarnation, self.sequence = actor_id, incarnation, 0

    def tag(self, version: int, sequence: int | None = None) -> UnrollMeta:
        if sequence is None:
            self.sequence += 1
            sequence = self.sequence
        return UnrollMeta(self.actor_id, self.incarnation, sequence, version, FRAMES)


def start(coordinator, transport, actors: int) -> list[Actor]:
    for actor_id in range(actors):
        coordinator.actor_started(actor_id, 0)
    transport.send(coordinator)
    return [Actor(i) for i in range(actors)]


# ----- sync --------------------------------------------------------------------------------------------------
def test_sync_grants_one_slot_each_and_a_batch_waits_for_every_actor():
    coordinator, transport = SyncCoordinator(3), FakeTransport()
    actors = start(coordinator, transport, 3)
    assert transport.granted == {0: [0], 1: [1], 2: [2]}
    for actor in actors[:2]:
        assert coordinator.accept(transport.fill(actor.actor_id), actor.tag(0)).accepted
        assert not coordinator.batch_ready()  # actor 2 still owes this version's unroll
    assert coordinator.accept(transport.fill(2), actors[2].tag(0)).accepted
    assert coordinator.batch_ready()
    batch = coordinator.take_batch(transport.gather)
    assert sorted(transport.gathered[-1]) == [0, 1, 2] and batch.lags == [0, 0, 0] and batch.frames == 3 * FRAMES
    assert transport.send(coordinator) == []  # nothing is granted before the publish
    coordinator.published(1)
    assert sorted(transport.send(coordinator)) == [(0, 0), (1, 1), (2, 2)]


def test_sync_policy_lag_is_zero_over_many_rounds():
    coordinator, transport = SyncCoordinator(2), FakeTransport()
    actors = start(coordinator, transport, 2)
    lags = []
    for version in range(5):
        for actor in actors:
            coordinator.accept(transport.fill(actor.actor_id), actor.tag(version))
        lags += coordinator.take_batch(transport.gather).lags
        coordinator.published(version + 1)
        transport.send(coordinator)
    assert lags == [0] * 10


def test_sync_round_waits_for_a_lost_actor_and_grants_its_next_incarnation():
    coordinator, transport = SyncCoordinator(2), FakeTransport()
    actors = start(coordinator, transport, 2)
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    coordinator.actor_lost(1)  # died mid-unroll: its grant comes back, the round still waits for it
    transport.granted[1].clear()
    assert not coordinator.batch_ready()
    coordinator.actor_started(1, 1)
    assert transport.send(coordinator) == [(1, 1)]
    reborn = Actor(1, incarnation=1)
    assert coordinator.accept(transport.fill(1), reborn.tag(0)).accepted
    assert coordinator.batch_ready()


def test_sync_restart_of_an_actor_that_already_delivered_waits_for_the_next_round():
    coordinator, transport = SyncCoordinator(2), FakeTransport()
    actors = start(coordinator, transport, 2)
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    coordinator.actor_lost(0)
    coordinator.actor_started(0, 1)
    assert transport.send(coordinator) == []  # its slot holds this round's pending unroll
    coordinator.accept(transport.fill(1), actors[1].tag(0))
    coordinator.take_batch(transport.gather)
    coordinator.published(1)
    assert sorted(transport.send(coordinator)) == [(0, 0), (1, 1)]


def test_sync_given_up_actor_no_longer_holds_back_the_batch():
    coordinator, transport = SyncCoordinator(2), FakeTransport()
    actors = start(coordinator, transport, 2)
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    coordinator.actor_given_up(1)
    assert coordinator.batch_ready()
    coordinator.take_batch(transport.gather)
    coordinator.published(1)
    assert transport.send(coordinator) == [(0, 0)]


# ----- drops common to both modes ----------------------------------------------------------------------------
@pytest.mark.parametrize("coordinator", [SyncCoordinator(1), AsyncCoordinator(1, 2, 0, 8)], ids=["sync", "async"])
def test_a_tag_delivered_twice_is_dropped_and_its_pending_slot_is_not_granted(coordinator):
    transport = FakeTransport()
    (actor,) = start(coordinator, transport, 1)
    slot = transport.fill(0)
    tag = actor.tag(0)
    assert coordinator.accept(slot, tag).accepted
    verdict = coordinator.accept(slot, tag)
    assert (verdict.accepted, verdict.reason, verdict.delivered) == (False, "duplicate", False)
    assert transport.send(coordinator) == []  # the slot holds the pending original
    assert [s for s, _ in coordinator.pending] == [slot]


def test_an_old_sequence_number_on_a_granted_slot_is_dropped_and_the_slot_granted_again():
    coordinator, transport = AsyncCoordinator(1, 2, 0, 8), FakeTransport()
    (actor,) = start(coordinator, transport, 1)
    assert coordinator.accept(transport.fill(0), actor.tag(0, sequence=2)).accepted
    slot = transport.fill(0)
    verdict = coordinator.accept(slot, actor.tag(0, sequence=1))
    assert (verdict.accepted, verdict.reason) == (False, "duplicate")
    assert transport.send(coordinator) == [(0, slot)]


@pytest.mark.parametrize("coordinator", [SyncCoordinator(1), AsyncCoordinator(1, 2, 0, 8)], ids=["sync", "async"])
def test_unrolls_of_a_replaced_incarnation_are_dropped_as_stale(coordinator):
    transport = FakeTransport()
    (old,) = start(coordinator, transport, 1)
    stale_slot = transport.fill(0)
    coordinator.actor_lost(0)
    coordinator.actor_started(0, 1)
    granted = transport.send(coordinator)
    verdict = coordinator.accept(stale_slot, old.tag(0))
    assert (verdict.accepted, verdict.reason, verdict.delivered) == (False, "stale_incarnation", False)
    assert not coordinator.pending
    assert sorted(slot for _, slot in granted) == list(coordinator.slots_of(0))  # every slot is the new one's
    assert transport.send(coordinator) == []  # and the stale slot is not granted twice


def test_last_words_of_a_dead_incarnation_count_until_its_successor_starts():
    coordinator, transport = AsyncCoordinator(1, 2, 1, 8), FakeTransport()
    (actor,) = start(coordinator, transport, 1)
    slot = transport.fill(0)
    coordinator.actor_lost(0)  # its last message was still in the pipe: drained after the loss
    assert coordinator.accept(slot, actor.tag(0)).accepted


# ----- async -------------------------------------------------------------------------------------------------
def test_async_grants_every_slot_and_regrants_them_once_copied():
    coordinator, transport = AsyncCoordinator(2, 2, batch_unrolls=2, max_policy_lag=8), FakeTransport()
    actors = start(coordinator, transport, 2)
    assert transport.granted == {0: [0, 1], 1: [2, 3]}
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    assert not coordinator.batch_ready()
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    assert coordinator.batch_ready()
    coordinator.take_batch(transport.gather)
    assert transport.gathered == [[0, 1]]
    assert sorted(transport.send(coordinator)) == [(0, 0), (0, 1)]  # granted again before the learner steps


def test_async_drops_unrolls_past_the_policy_lag_and_regrants_their_slot():
    coordinator, transport = AsyncCoordinator(1, 2, batch_unrolls=1, max_policy_lag=2), FakeTransport()
    (actor,) = start(coordinator, transport, 1)
    coordinator.published(5)
    ok = coordinator.accept(transport.fill(0), actor.tag(3))
    assert ok.accepted
    slot = transport.fill(0)
    late = coordinator.accept(slot, actor.tag(2))
    assert (late.accepted, late.reason, late.delivered) == (False, "policy_lag", True)
    assert transport.send(coordinator) == [(0, slot)]
    assert coordinator.take_batch(transport.gather).lags == [2]


def test_async_slots_of_a_dead_actor_wait_for_its_next_incarnation():
    coordinator, transport = AsyncCoordinator(2, 2, batch_unrolls=2, max_policy_lag=8), FakeTransport()
    actors = start(coordinator, transport, 2)
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    coordinator.accept(transport.fill(0), actors[0].tag(0))
    coordinator.actor_lost(0)
    coordinator.take_batch(transport.gather)
    assert transport.send(coordinator) == []  # nobody to grant them to
    coordinator.actor_started(0, 1)
    assert sorted(transport.send(coordinator)) == [(0, 0), (0, 1)]


def test_a_grant_the_transport_could_not_deliver_is_kept_for_the_next_incarnation():
    coordinator = AsyncCoordinator(1, 2, batch_unrolls=1, max_policy_lag=8)
    start(coordinator, FakeTransport(reachable=lambda actor_id: False), 1)
    coordinator.actor_lost(0)
    coordinator.actor_started(0, 1)
    transport = FakeTransport()
    assert sorted(transport.send(coordinator)) == [(0, 0), (0, 1)]


# ----- flow control ------------------------------------------------------------------------------------------
def test_a_batch_that_can_never_fill_is_refused_naming_the_keys_and_numbers():
    with pytest.raises(FlowControlError) as refused:
        AsyncCoordinator(1, 2, batch_unrolls=3, max_policy_lag=8)
    message = str(refused.value)
    for part in ("runtime.coordination.batch_unrolls=3", "1 actor(s)", "slots_per_actor=2", "at most 2",
                 "batch_unrolls <= 2"):
        assert part in message


def test_the_largest_batch_that_fits_is_accepted():
    AsyncCoordinator(2, 3, batch_unrolls=6, max_policy_lag=0)


def test_giving_up_actors_below_the_batch_capacity_is_an_error_not_a_hang():
    coordinator = AsyncCoordinator(2, 2, batch_unrolls=4, max_policy_lag=8)
    start(coordinator, FakeTransport(), 2)
    with pytest.raises(FlowControlError, match="actor 1 was given up"):
        coordinator.actor_given_up(1)


def test_the_trainer_refuses_an_unfillable_config_before_it_creates_anything(tmp_path):
    from menger.launch import make_launcher
    from menger.runtime import Trainer

    config = load_experiment("cartpole-impala", ["runtime.actors=1", "runtime.coordination.batch_unrolls=3"])
    with pytest.raises(FlowControlError, match="can never fill"):
        Trainer(config, tmp_path / "run", launcher=make_launcher(config.runtime))
    assert not (tmp_path / "run").exists()


def test_make_coordinator_follows_the_resolved_mode():
    from menger.coordinator.replay import ReplayCoordinator

    assert isinstance(make_coordinator(load_experiment("cartpole-ppo", ["runtime.actors=2"])), SyncCoordinator)
    made = make_coordinator(load_experiment("cartpole-impala", [
        "runtime.actors=2", "runtime.coordination.slots_per_actor=3", "runtime.coordination.batch_unrolls=4",
        "runtime.coordination.max_policy_lag=1"]))
    assert isinstance(made, AsyncCoordinator) and (made.slots_per_actor, made.batch_unrolls) == (3, 4)
    assert made.max_policy_lag == 1
    assert isinstance(make_coordinator(load_experiment("cartpole-apex")), ReplayCoordinator)


# ----- parked actors (an elastic run) --------------------------------------------------------------------------
def test_sync_round_goes_on_without_a_parked_actor_which_joins_the_next_round():
    coordinator, transport = SyncCoordinator(3), FakeTransport()
    actors = start(coordinator, transport, 3)
    for actor in actors[:2]:
        coordinator.accept(transport.fill(actor.actor_id), actor.tag(0))
    assert not coordinator.batch_ready()
    coordinator.actor_parked(2)  # it owed this round's unroll: the round no longer waits for it
    assert coordinator.batch_ready() and coordinator.take_batch(transport.gather).data["slots"] == [0, 1]
    coordinator.published(1)
    assert [a for a, _ in transport.send(coordinator)] == [0, 1]  # a parked actor gets no grant
    coordinator.actor_unparked(2)
    coordinator.actor_started(2, 1)
    assert [a for a, _ in transport.send(coordinator)] == []  # it joins at the next round
    for actor in actors[:2]:
        coordinator.accept(transport.fill(actor.actor_id), actor.tag(1))
    coordinator.take_batch(transport.gather)
    coordinator.published(2)
    assert sorted(a for a, _ in transport.send(coordinator)) == [0, 1, 2]


def test_async_batch_of_one_unroll_per_actor_follows_the_actors_that_are_not_parked():
    coordinator = AsyncCoordinator(4, slots_per_actor=2, batch_unrolls=0, max_policy_lag=8)
    assert coordinator.batch_unrolls == 4
    coordinator.actor_parked(3)
    coordinator.actor_parked(2)
    assert coordinator.batch_unrolls == 2 and coordinator.capacity() == 4
    coordinator.actor_unparked(2)
    assert coordinator.batch_unrolls == 3


def test_async_fixed_batch_shrinks_to_what_the_active_actors_can_fill_when_actors_are_parked():
    coordinator = AsyncCoordinator(4, slots_per_actor=2, batch_unrolls=6, max_policy_lag=8)
    coordinator.actor_parked(3)
    coordinator.actor_parked(2)  # 2 actors x 2 slots cannot fill 6: no error, a batch of 4
    assert coordinator.batch_unrolls == 4


def test_async_a_large_fleet_holds_at_most_its_lag_budget_in_flight_so_unrolls_are_not_learned_late():
    coordinator, transport = AsyncCoordinator(64, 2, batch_unrolls=4, max_policy_lag=2), FakeTransport()
    actors = start(coordinator, transport, 64)
    assert coordinator.lag_budget == 12 and sum(map(len, transport.granted.values())) == 12  # not 128
    version, lags = 0, []
    for _ in range(200):  # every granted actor delivers, the learner takes a batch, the held slots go out
        for actor_id in [a for a, slots in transport.granted.items() if slots]:
            while transport.granted[actor_id]:
                coordinator.accept(transport.fill(actor_id), actors[actor_id].tag(version))
        while coordinator.batch_ready():
            lags += coordinator.take_batch(transport.gather).lags
            version += 1
            coordinator.published(version)
        transport.send(coordinator)
        assert len(coordinator.granted) + len(coordinator.pending) <= 12
    assert max(lags) <= coordinator.max_policy_lag + 1 and len(lags) >= 600
    assert len({a for batch in transport.gathered for a in (slot // 2 for slot in batch)}) == 64  # all took turns


def test_async_held_slots_of_a_lost_actor_go_to_its_next_incarnation_once():
    coordinator, transport = AsyncCoordinator(8, 2, batch_unrolls=1, max_policy_lag=1), FakeTransport()
    start(coordinator, transport, 8)
    assert sum(map(len, transport.granted.values())) == 2  # the budget: 1 x (1 + 1)
    coordinator.actor_lost(7)  # its slots were held back, never granted
    coordinator.actor_started(7, 1)
    held = list(coordinator._held)
    assert sorted(held) == list(range(2, 16)) and len(set(held)) == len(held)  # each slot once


def test_batch_envs_keeps_a_batch_the_same_size_whatever_the_fleet():
    from menger.coordinator import batch_unrolls

    def unrolls(*overrides):
        return batch_unrolls(load_experiment("cartpole-impala", list(overrides)).runtime)

    assert unrolls() == 1  # 1 actor x 16 envs: 16 columns
    assert unrolls("runtime.actors=64", "runtime.envs_per_actor=4") == 4  # 64 x 4: still 16 columns
    assert unrolls("runtime.envs_per_actor=4") == 2  # wants 4 unrolls, but 1 actor holds 2 slots
    assert unrolls("runtime.actors=64", "runtime.coordination.batch_unrolls=3") == 3  # batch_unrolls wins
    assert unrolls("runtime.coordination.batch_envs=0") == 0  # one unroll per actor


def test_async_room_a_lost_actor_leaves_in_the_lag_budget_goes_to_the_held_slots_of_the_others():
    coordinator, transport = AsyncCoordinator(8, 2, batch_unrolls=2, max_policy_lag=0), FakeTransport()
    start(coordinator, transport, 8)
    assert transport.granted == {0: [0, 1]}  # the budget: 2 x (0 + 1)
    coordinator.actor_given_up(0)  # never comes back, and nothing pending: only the budget's room can unblock
    assert sorted(transport.send(coordinator)) == [(1, 2), (1, 3)]
