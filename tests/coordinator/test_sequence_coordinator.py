"""R2D2's sequence replay with a fake transport (plain tensors, no processes): every unroll is cut into
overlapping sequences in place, a batch holds each sequence's steps, observations and the state the actor stored
at its start, its first sequence has no burn-in, and the initial priorities are R2D2's mix over the steps after
the burn-in, checked against a slow loop."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.coordinator.sequences import SequenceReplayCoordinator
from menger.core import UnrollMeta
from menger.algorithms.r2d2.spec import R2D2Config
from menger.experiment import ReplayConfig
from menger.transport import SlotChunks, UnrollBuffers, UnrollSpec

T, B, H = 12, 2, 3
W, PERIOD, BURN_IN, N_STEP, GAMMA = 6, 3, 2, 2, 0.9
EPS = 1e-3


class FakeTransport:
    def __init__(self, coordinator):
        spec = UnrollSpec(gym.spaces.Box(-1e9, 1e9, (1,)), gym.spaces.Discrete(3), T, B, H, values=True,
                          terminated=True, sequence_starts=len(coordinator.starts))
        self.buffers = UnrollBuffers(spec, coordinator.num_actors * coordinator.slots_per_actor, shared=False)

    def chunk_store(self):
        return SlotChunks(self.buffers)

    def write(self, slot: int, seed: int = 0):
        """An unroll whose observations and stored states are unique ids, with an episode end and a reset step."""
        t = self.buffers.tensors
        g = torch.Generator().manual_seed(seed * 1000 + slot)
        t["obs"][slot] = (slot * 1000 + torch.arange(T + 1)[:, None] * 10 + torch.arange(B)).float().unsqueeze(-1)
        t["actions"][slot] = torch.randint(0, 3, (T, B), generator=g)
        t["rewards"][slot] = torch.rand(T, B, generator=g) * 4
        t["logp"][slot] = torch.rand(T, B, generator=g)
        t["values"][slot] = torch.rand(T + 1, B, generator=g)
        t["valid"][slot], t["terminated"][slot], t["restarts"][slot] = 1.0, 0.0, 0.0
        t["terminated"][slot][4, 0] = 1.0      # env 0's episode ends at step 4 ...
        t["valid"][slot][5, 0] = 0.0           # ... and step 5 is its reset step (NEXT_STEP autoreset)
        t["restarts"][slot][5, 0] = 1.0
        t["dones"][slot] = torch.maximum(t["terminated"][slot], 1.0 - t["valid"][slot])
        starts = torch.arange(len(range(0, T - W + 1, PERIOD)))[:, None, None, None]
        t["core_states"][slot] = -(slot * 100 + starts + torch.arange(B)[None, None, :, None] * 0.1
                                   + torch.arange(H) * 0.01).expand(-1, 2, B, H)


def make():
    replay = ReplayConfig(max_size=200, batch_size=8, samples_per_insert=0.0, min_size=1, sampler="prioritized")
    r2d2 = R2D2Config(sequence_length=W, period=PERIOD, burn_in=BURN_IN, n_step=N_STEP, gamma=GAMMA)
    coordinator = SequenceReplayCoordinator(1, replay, r2d2, unroll_length=T, envs_per_actor=B, in_flight=1, seed=3)
    transport = FakeTransport(coordinator)
    coordinator.attach(transport)
    coordinator.actor_started(0, 0)
    return coordinator, transport


def deliver(coordinator, transport, count=1):
    for sequence in range(count):
        ((actor, slot),) = coordinator.grants()
        transport.write(slot)
        assert coordinator.accept(slot, UnrollMeta(actor, 0, sequence + 1, coordinator.version, T * B)).accepted
    return slot


def test_an_unroll_becomes_overlapping_sequences_every_period_steps():
    coordinator, transport = make()
    assert list(coordinator.starts) == [0, 3, 6] and coordinator.chunk_items == 3 * B
    deliver(coordinator, transport)
    assert coordinator.tables.size == 3 * B


def test_a_batch_holds_each_sequences_steps_observations_and_stored_state():
    coordinator, transport = make()
    slot = deliver(coordinator, transport)
    batch = coordinator.take_batch(None)
    tensors = transport.buffers.tensors
    ids = batch.data["obs"][..., 0]                               # [W+1, N]
    assert ids.shape == (W + 1, 8) and batch.data["actions"].shape == (W, 8)
    for n in range(8):
        t, b = divmod(int(ids[0, n]) - slot * 1000, 10)
        assert t in (0, 3, 6)
        assert ids[:, n].tolist() == [slot * 1000 + (t + k) * 10 + b for k in range(W + 1)]
        for name in ("actions", "rewards", "valid", "restarts"):
            assert torch.equal(batch.data[name][:, n], tensors[name][slot, t:t + W, b].to(batch.data[name].dtype))
        assert torch.allclose(batch.data["discounts"][:, n], GAMMA * (1 - tensors["terminated"][slot, t:t + W, b]))
        assert torch.equal(batch.data["state"][:, n], tensors["core_states"][slot, t // PERIOD, :, b])
        assert int(batch.data["burn_in"][n]) == (0 if t == 0 else BURN_IN)


def h(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1) - 1) + EPS * x


def h_inverse(x):
    return np.sign(x) * (((np.sqrt(1 + 4 * EPS * (np.abs(x) + 1 + EPS)) - 1) / (2 * EPS)) ** 2 - 1)


def reference_priority(tensors, slot, t, b):
    """Slow: each trained step's rescaled n-step target from the actor's own values, then the max/mean mix."""
    r, term, valid = (tensors[k][slot, :, b].double().numpy() for k in ("rewards", "terminated", "valid"))
    q_taken, values = tensors["logp"][slot, :, b].double().numpy(), tensors["values"][slot, :, b].double().numpy()
    burn = 0 if t == 0 else BURN_IN
    errors = []
    for step in range(t + burn, t + W):
        if not valid[step]:
            continue
        total, discount, m = 0.0, 1.0, 0
        while m < N_STEP and step + m < t + W and valid[step + m] and (m == 0 or discount != 0):
            total += discount * r[step + m]
            discount *= GAMMA * (1 - term[step + m])
            m += 1
        target = h(total + (discount * h_inverse(values[step + m]) if discount else 0.0))
        errors.append(abs(target - q_taken[step]))
    if not errors:
        return 1e-6
    return 0.9 * max(errors) + 0.1 * np.mean(errors) + 1e-6


def test_initial_priorities_mix_max_and_mean_td_after_the_burn_in():
    coordinator, transport = make()
    slot = deliver(coordinator, transport)
    items, priorities = coordinator._items(slot)
    tensors = transport.buffers.tensors
    for i, (t, b) in enumerate(zip(items["t"], items["b"])):
        assert priorities[i] == pytest.approx(reference_priority(tensors, slot, int(t), int(b)), rel=1e-5), (t, b)


def test_the_sequence_replay_saves_and_loads_with_its_stored_states():
    coordinator, transport = make()
    deliver(coordinator, transport, count=2)
    state = coordinator.state()
    restored, restored_transport = make()
    restored.load_state({**state, "chunks": {k: v.clone() for k, v in state["chunks"].items()}})
    assert restored.tables.size == coordinator.tables.size == 2 * 3 * B
    for name, tensor in transport.buffers.tensors.items():
        assert torch.equal(restored_transport.buffers.tensors[name], tensor), name
    a, b = coordinator.take_batch(None), restored.take_batch(None)
    for name in ("obs", "state", "burn_in", "actions"):
        assert torch.equal(a.data[name], b.data[name]), name
