"""The replay coordinator with a fake transport (plain tensors, no processes): unrolls become n-step items in
place, chunks are never sampled while rewritten, back-pressure follows the rate limiter, lockstep is strict, and
the replay's state survives a save and a load bit for bit."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.coordinator import FlowControlError
from menger.coordinator.replay import ReplayCoordinator
from menger.core import UnrollMeta
from menger.experiment import ReplayConfig
from menger.transport import SlotChunks, UnrollBuffers, UnrollSpec

T, B = 4, 2
GAMMA = 0.9


class FakeTransport:
    def chunk_store(self):
        return SlotChunks(self.buffers)

    def __init__(self, coordinator, values=True):
        spec = UnrollSpec(gym.spaces.Box(-1e9, 1e9, (1,)), gym.spaces.Discrete(3), T, B, 0, values=values)
        self.buffers = UnrollBuffers(spec, coordinator.num_actors * coordinator.slots_per_actor, shared=False)
        self.writes = 0

    def write(self, slot: int, *, done_at=None, invalid_at=None, seed=0):
        """An unroll whose observations are unique ids (slot, t, b), so items can be traced back to their rows."""
        t = self.buffers.tensors
        g = torch.Generator().manual_seed(seed * 1000 + slot)
        obs_id = slot * 1000 + torch.arange(T + 1)[:, None] * 10 + torch.arange(B)[None, :]
        t["obs"][slot] = obs_id.float().unsqueeze(-1)
        t["actions"][slot] = torch.randint(0, 3, (T, B), generator=g)
        t["rewards"][slot] = torch.rand(T, B, generator=g)
        t["dones"][slot] = 0.0
        t["valid"][slot] = 1.0
        if done_at is not None:
            t["dones"][slot][done_at] = 1.0
        if invalid_at is not None:
            t["valid"][slot][invalid_at] = 0.0
            t["dones"][slot][invalid_at] = 1.0
        t["logp"][slot] = torch.rand(T, B, generator=g)      # Q(s, a) of the acting network
        if "values" in t:
            t["values"][slot] = torch.rand(T + 1, B, generator=g)  # max_a Q(s, a)
        self.writes += 1


def make(actors=1, lockstep=False, **replay):
    settings = dict(max_size=64, batch_size=4, samples_per_insert=2.0, min_size=8, sampler="prioritized")
    settings.update(replay)
    cfg = ReplayConfig(lockstep=lockstep, **settings)
    coordinator = ReplayCoordinator(actors, cfg, unroll_length=T, envs_per_actor=B, in_flight=2, gamma=GAMMA,
                                    n_step=3, seed=7)
    transport = FakeTransport(coordinator)
    coordinator.attach(transport)
    for actor in range(actors):
        coordinator.actor_started(actor, 0)
    return coordinator, transport


def deliver(coordinator, transport, sequences, **write):
    """Fill every outstanding grant and hand the tags back; returns the slots delivered."""
    delivered = []
    for actor, slot in coordinator.grants():
        transport.write(slot, **write)
        sequences[actor] = sequences.get(actor, 0) + 1
        verdict = coordinator.accept(slot, UnrollMeta(actor, 0, sequences[actor], coordinator.version, T * B))
        assert verdict.accepted
        delivered.append(slot)
    return delivered


def reference_items(transport, slot, n=3):
    """Slow n-step windows of one chunk: {(t, b): (reward sum, discount product, bootstrap step)}."""
    t = transport.buffers.tensors
    rewards, dones, valid = (t[k][slot].double().numpy() for k in ("rewards", "dones", "valid"))
    out = {}
    for b in range(B):
        for start in range(T):
            if not valid[start, b]:
                continue
            total, discount, step = 0.0, 1.0, start
            while step < T and step - start < n and valid[step, b]:
                total += discount * rewards[step, b]
                discount *= GAMMA * (1.0 - dones[step, b])
                step += 1
                if discount == 0:
                    break
            out[(start, b)] = (total, discount, step)
    return out


def test_an_unroll_becomes_one_item_per_valid_step_with_ape_x_initial_priorities():
    coordinator, transport = make()
    slot = deliver(coordinator, transport, {}, done_at=(1, 0), invalid_at=(3, 1))[0]
    state = coordinator.tables.shard(0).state()
    items = state["data"]
    expected = reference_items(transport, slot)
    mine = np.flatnonzero(items["slot"] == slot)
    assert len(mine) == len(expected) == T * B - 1
    t = transport.buffers.tensors
    for row in mine:
        start, b = int(items["t"][row]), int(items["b"][row])
        reward, discount, boot = expected[(start, b)]
        assert items["slot"][row] == slot and items["boot"][row] == boot
        assert items["reward"][row] == pytest.approx(reward, rel=1e-5)
        assert items["discount"][row] == pytest.approx(discount, rel=1e-5, abs=1e-7)
        td = reward + discount * float(t["values"][slot][boot, b]) - float(t["logp"][slot][start, b])
        assert state["priorities"][row] == pytest.approx(abs(td) + 1e-6, rel=1e-5)


def test_a_batch_gathers_each_items_observation_and_the_one_it_bootstraps_from():
    coordinator, transport = make(samples_per_insert=0.0)
    sequences = {}
    delivered = sum(len(deliver(coordinator, transport, sequences)) for _ in range(3))
    assert coordinator.batch_ready()
    batch = coordinator.take_batch(None)
    obs_id = batch.data["obs"].squeeze(-1).long()
    next_id = batch.data["next_obs"].squeeze(-1).long()
    slot, start, b = obs_id // 1000, (obs_id % 1000) // 10, obs_id % 10
    boot = (next_id % 1000) // 10
    assert torch.equal(next_id // 1000, slot) and torch.equal(next_id % 10, b)
    assert torch.all((boot - start == 3) | ((boot - start < 3) & (boot == T)))  # 3 steps, or cut at the end
    actions = transport.buffers.tensors["actions"]
    assert torch.equal(batch.data["actions"], actions[slot, start, b])
    assert batch.data["weights"].dtype == torch.float32 and float(batch.data["weights"].max()) <= 1.0
    assert sum(m.frames for m in batch.metas) == delivered * T * B  # the frames committed since the last batch


def test_a_rewritten_chunk_is_never_sampleable_and_the_ring_keeps_the_newest_items():
    coordinator, transport = make(samples_per_insert=0.0, max_size=16, min_size=1)
    sequences, sampled_slots = {}, set()
    for _ in range(20):
        deliver(coordinator, transport, sequences)
        granted = set(coordinator.granted)  # being written now: none of their items may come out
        keys = coordinator.tables.shard(0).state()
        assert granted.isdisjoint(set(keys["data"]["slot"].tolist()))
        batch = coordinator.take_batch(None)
        ids = batch.data["obs"].squeeze(-1).long() // 1000
        assert granted.isdisjoint(set(ids.tolist()))
        sampled_slots |= set(ids.tolist())
        coordinator.published(coordinator.version + 1)
    assert coordinator.tables.size <= 16  # max_size: in-flight chunks made room before they were granted
    assert len(sampled_slots) > 1


def test_a_lost_actors_half_written_chunk_holds_no_items_and_goes_back_to_it():
    coordinator, transport = make(samples_per_insert=0.0, max_size=16, min_size=1)
    sequences = {}
    for _ in range(6):
        deliver(coordinator, transport, sequences)
    in_flight = dict(coordinator.grants())  # granted, being written...
    assert in_flight
    size = coordinator.tables.size
    coordinator.actor_lost(0)                 # ...when the actor is SIGKILLed
    slots = set(coordinator.tables.shard(0).state()["data"]["slot"].tolist())
    assert slots.isdisjoint(in_flight.values()) and coordinator.tables.size == size
    coordinator.actor_started(0, 1)
    regranted = [slot for _, slot in coordinator.grants()]
    assert set(in_flight.values()) <= set(regranted) | set(coordinator.free[0])


def test_actors_are_held_back_when_the_limiter_refuses_inserts():
    coordinator, transport = make(samples_per_insert=1.0, min_size=8, batch_size=4, error_buffer=10.0)
    sequences = {}
    for _ in range(10):
        deliver(coordinator, transport, sequences)
    assert coordinator.grants() == [] and not coordinator.granted  # inserts far ahead of samples: nobody writes
    limiter = coordinator.tables.shard(0).rate_limiter
    inserts_before = limiter.inserts
    while coordinator.batch_ready():
        coordinator.take_batch(None)
        coordinator.published(coordinator.version + 1)
    assert limiter.inserts >= inserts_before and coordinator.grants()  # samples opened the limiter again
    assert abs(limiter.error) <= 10.0 + T * B


def test_lockstep_grants_one_unroll_at_a_time_and_only_once_its_updates_are_published():
    coordinator, transport = make(actors=2, lockstep=True, samples_per_insert=1.0, min_size=8, batch_size=4,
                                  error_buffer=16.0)
    sequences, order = {}, []
    for _ in range(12):
        grants = coordinator.grants()
        assert len(grants) <= 1
        if not grants:
            assert coordinator.batch_ready()
            coordinator.take_batch(None)
            assert coordinator.grants() == []  # the update is not published yet
            coordinator.published(coordinator.version + 1)
            continue
        actor, slot = grants[0]
        order.append(actor)
        transport.write(slot)
        sequences[actor] = sequences.get(actor, 0) + 1
        coordinator.accept(slot, UnrollMeta(actor, 0, sequences[actor], coordinator.version, T * B))
    assert order[:4] == [0, 1, 0, 1]
    assert coordinator.idle_between_batches


def test_lockstep_without_a_ratio_is_refused():
    with pytest.raises(FlowControlError, match="samples_per_insert"):
        make(lockstep=True, samples_per_insert=0.0)


def test_the_replay_state_survives_a_save_and_a_load_bit_for_bit():
    coordinator, transport = make(actors=2, samples_per_insert=0.0, min_size=1)
    sequences = {}
    for _ in range(5):
        deliver(coordinator, transport, sequences)
    state = coordinator.state()
    twin, twin_transport = make(actors=2, samples_per_insert=0.0, min_size=1)
    twin.load_state(state)
    for _ in range(3):
        a, b = coordinator.take_batch(None), twin.take_batch(None)
        for key in ("obs", "next_obs", "actions", "rewards", "discounts", "weights"):
            assert torch.equal(a.data[key], b.data[key]), key
        priorities = np.random.default_rng(0).random(4) + 0.1
        coordinator.learned(a, {"priorities": priorities})
        twin.learned(b, {"priorities": priorities.copy()})
    assert [list(r) for r in coordinator.ring] == [list(r) for r in twin.ring]


def test_shards_split_the_actors_and_their_memory():
    coordinator, transport = make(actors=4, shards=2, samples_per_insert=0.0, min_size=1)
    sequences = {}
    deliver(coordinator, transport, sequences)
    metrics = coordinator.metrics()
    assert metrics["replay/shards"] == 2
    assert metrics["replay/shard0/size"] == metrics["replay/shard1/size"] == 2 * 2 * T * B
    assert metrics["replay/bytes"] > metrics["replay/index_bytes"] > 0


def test_a_shard_whose_limiter_is_shut_does_not_hold_up_another_shards_inserts():
    """Waiting chunks are committed oldest first within each shard: one shard's shut limiter must not keep
    another shard below its min_size (where sampling, which needs every shard's part, would wait forever)."""
    coordinator, transport = make(actors=2, shards=2, samples_per_insert=2.0, min_size=8)
    for sequence, slot in enumerate(coordinator.slots_of(0), start=1):  # actor 0 writes; nothing samples
        transport.write(slot)
        coordinator.accept(slot, UnrollMeta(0, 0, sequence, coordinator.version, T * B))
        if coordinator.waiting:
            break
    assert coordinator.waiting and {w.shard for w in coordinator.waiting} == {0}
    slot = coordinator.slots_of(1)[0]
    transport.write(slot)
    coordinator.accept(slot, UnrollMeta(1, 0, 1, coordinator.version, T * B))
    assert list(coordinator.ring[1]) == [slot]       # shard 1's chunk went in behind shard 0's waiting one
    assert coordinator.tables.shard(1).size > 0
    assert {w.shard for w in coordinator.waiting} == {0}


def test_a_turn_with_many_writers_looks_only_at_the_actors_that_want_a_chunk(monkeypatch):
    coordinator, transport = make(actors=2048, max_size=2048 * T * B * 2, min_size=1, samples_per_insert=0,
                                  shards=4)
    first = coordinator.grants()
    assert len(first) == 2048 * 2  # every writer gets its in-flight chunks
    looked = []
    shard_of = ReplayCoordinator.shard_of
    monkeypatch.setattr(ReplayCoordinator, "shard_of", lambda self, a: looked.append(a) or shard_of(self, a))
    assert coordinator.grants() == [] and looked == []  # nobody wants one: no actor is looked at
    sequences = {}
    for actor, slot in first[:3]:  # three unrolls come back: only their actors are looked at, and regranted
        transport.write(slot)
        sequences[actor] = sequences.get(actor, 0) + 1
        assert coordinator.accept(slot, UnrollMeta(actor, 0, sequences[actor], 0, T * B)).accepted
    regranted = coordinator.grants()
    assert sorted(a for a, _ in regranted) == sorted(a for a, _ in first[:3]) and len(set(looked)) <= 3
