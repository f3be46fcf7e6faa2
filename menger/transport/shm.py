"""Preallocated unroll slots in shared memory (torchbeast's free/full queues, sample-factory's shared buffers).

Each actor owns `slots_per_actor` slots. The learner grants a free slot to an actor; the actor writes a whole
unroll into it in place and sends back only `(slot, UnrollMeta)`; the learner copies the slots it batches and
grants them again. Bulk data is never pickled.

Layout of one slot (T = unroll_length, B = envs_per_actor)::

    obs        [T+1, B, *obs_shape]   (a dict of such tensors for Dict observations; obs[T] is the bootstrap)
    actions    [T, B, *action_shape]  of the space the network acts in (`network.action_space`, see
               menger.models.actions): int64 for Discrete, MultiDiscrete and MultiBinary, float32 for a Box
    logp       [T, B]   behaviour log-probability of the action taken
    rewards    [T, B]
    dones      [T, B]   1.0 where the episode ended at t (terminated, truncated, or an invalid step)
    valid      [T, B]   1.0 for real transitions (0 for autoreset steps and rejected values)
    core_state [2, B, H] recurrent state at the unroll's start (H = 0 without an LSTM core)
    values     [T+1, B] apex only: the acting network's greedy value max_a Q(obs_t, a) (logp holds Q(obs_t, a_t))
    terminated [T, B] replay only: 1.0 where the episode terminated at t (a time limit is not a termination: the
               replay bootstraps from obs[t+1], the last observation, as its envs reset on the next step)
    core_states [S, 2, B, H] r2d2 only: the recurrent state at the first step of each of the unroll's S sequences
    gradient   [P] a3c with a parameter server only: the actor-learner's flat gradient of this unroll's loss
    gradient_stats [S] beside it: its loss statistics (`menger.learners.a3c.GRADIENT_STATS`)
    restarts   [T, B] r2d2 only: 1.0 where the actor restarted its recurrent state after step t (the next
               observation is an episode's first: after an end, or after the reset step of NEXT_STEP autoreset)

With replay (apex, sac) the slots are the replay's storage: each actor owns a ring of them, and a replay item
names a (slot, t, b) in it (see menger.coordinator.replay).
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

_TORCH_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8, np.dtype(np.int32): torch.int32,
                 np.dtype(np.int64): torch.int64, np.dtype(np.float64): torch.float32, np.dtype(np.bool_): torch.uint8}


def _obs_dtype(space: gym.Space) -> torch.dtype:
    return _TORCH_DTYPES.get(np.dtype(space.dtype), torch.float32)


def action_field(space: gym.Space) -> tuple[tuple[int, ...], torch.dtype]:
    """The per-env shape and dtype of an action of the space a network acts in (`network.action_space`):
    int64 indices for Discrete [], MultiDiscrete [K] and MultiBinary [n]; float32 for a Box."""
    if isinstance(space, gym.spaces.Discrete):
        return (), torch.int64
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return (int(np.prod(space.shape)),), torch.int64
    if isinstance(space, gym.spaces.Box):
        return tuple(space.shape), torch.float32
    raise ValueError(f"no unroll slot layout for actions in {space}: give the slots the network's action space "
                     "(network.action_space), not a Tuple or Dict space")


@dataclass(frozen=True)
class UnrollSpec:
    observation_space: gym.Space
    action_space: gym.Space
    unroll_length: int
    envs_per_actor: int
    lstm_size: int = 0
    values: bool = False  # apex: a per-step greedy value, for the actors' initial priorities
    terminated: bool = False  # replay: terminations apart from truncations
    sequence_starts: int = 0  # r2d2: sequences per unroll, each with its first step's recurrent state
    gradient: int = 0  # a3c with a parameter server: entries of the flat gradient an actor-learner pushes
    gradient_stats: int = 5  # ... and of the loss statistics beside it
    search_policy: bool = False  # alphazero: the search's visit distribution over the actions at every step
    search_value: bool = False  # alphazero: the search's value of every step's position, the mover's view

    def field_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        t, b = self.unroll_length, self.envs_per_actor
        fields: dict = {}
        obs = self.observation_space
        if isinstance(obs, gym.spaces.Dict):
            for key, space in obs.spaces.items():
                fields[f"obs.{key}"] = ((t + 1, b, *space.shape), _obs_dtype(space))
        else:
            fields["obs"] = ((t + 1, b, *obs.shape), _obs_dtype(obs))
        shape, dtype = action_field(self.action_space)
        fields["actions"] = ((t, b, *shape), dtype)
        for name in ("logp", "rewards", "dones", "valid"):
            fields[name] = ((t, b), torch.float32)
        fields["core_state"] = ((2, b, self.lstm_size), torch.float32)
        if self.values:
            fields["values"] = ((t + 1, b), torch.float32)
        if self.terminated:
            fields["terminated"] = ((t, b), torch.float32)
        if self.search_policy:
            fields["search_policy"] = ((t, b, int(self.action_space.n)), torch.float32)
        if self.search_value:
            fields["search_value"] = ((t, b), torch.float32)
        if self.gradient:
            fields["gradient"] = ((self.gradient,), torch.float32)
            fields["gradient_stats"] = ((self.gradient_stats,), torch.float32)
        if self.sequence_starts:
            fields["core_states"] = ((self.sequence_starts, 2, b, self.lstm_size), torch.float32)
            fields["restarts"] = ((t, b), torch.float32)
        return fields


PER_SLOT_FIELDS = ("gradient", "gradient_stats")  # an unroll's, not its steps': no time or env axis


def is_observation(name: str) -> bool:
    """Whether a slot field holds observations (`obs`, or `obs.KEY` for Dict observations)."""
    return name == "obs" or name.startswith("obs.")


class UnrollBuffers:
    """`num_slots` unroll slots, shared between processes when `shared` is set; `observations=False` leaves the
    observation fields out (the Ray replay keeps them on the node of the actor that wrote them)."""

    def __init__(self, spec: UnrollSpec, num_slots: int, shared: bool = True, observations: bool = True):
        self.spec, self.num_slots = spec, num_slots
        self.tensors: dict[str, torch.Tensor] = {}
        for name, (shape, dtype) in spec.field_shapes().items():
            if not observations and is_observation(name):
                continue
            tensor = torch.zeros((num_slots, *shape), dtype=dtype)
            self.tensors[name] = tensor.share_memory_() if shared else tensor

    @property
    def bytes_per_slot(self) -> int:
        return sum(t[0].numel() * t.element_size() for t in self.tensors.values())

    @property
    def bytes_per_env_slot(self) -> int:
        """Shared-memory bytes for one env's share of an unroll slot."""
        return self.bytes_per_slot // self.spec.envs_per_actor

    def slot(self, index: int) -> dict[str, torch.Tensor]:
        """Tensor views of one slot (writes go straight to shared memory)."""
        return {name: t[index] for name, t in self.tensors.items()}

    def gather(self, slots: list[int]) -> dict:
        """Copy the given slots into one batch, concatenated along the env axis: [T, len(slots)*B, ...]."""
        index = torch.as_tensor(slots)
        batch: dict = {}
        for name, t in self.tensors.items():
            picked = t.index_select(0, index)  # [S, L, B, ...]: a copy, so the slots can be granted again at once
            if name in PER_SLOT_FIELDS:  # one per unroll, not per step: [S, ...]
                batch[name] = picked
                continue
            merged = picked.movedim(0, 1).flatten(1, 2)  # [L, S*B, ...] with L = T+1, T or 2
            if name.startswith("obs."):
                batch.setdefault("obs", {})[name[4:]] = merged
            else:
                batch[name] = merged
        return batch


def check_saved_chunks(chunks: dict, name: str, shape: tuple) -> "torch.Tensor":
    """A checkpoint's replay chunks of field `name`, refused unless they have this run's `shape`."""
    saved = chunks[name]
    if tuple(saved.shape) != shape:
        raise ValueError(f"the checkpoint's replay chunks {name} have shape {tuple(saved.shape)}, this run's "
                         f"{shape}: resume with the replay and runtime settings it was saved with")
    return saved


class SlotChunks:
    """The replay's chunks in the transport's own slots (`menger.core.ChunkStore`): in shared memory on one host,
    so a batch's observations are indexed in place, at once, and nothing is ever lost apart from the process."""

    prefetch = False   # nothing to hide: `request` already holds the observations
    fixed_shards = True

    def __init__(self, buffers: UnrollBuffers):
        self.tensors = buffers.tensors
        self.nbytes = sum(t.numel() * t.element_size() for t in self.tensors.values())

    def shard_of(self, actor_id: int, shards: int) -> int:
        return actor_id % shards

    def request(self, slot: torch.Tensor, steps: torch.Tensor, b: torch.Tensor):
        slot, b = slot[:, None], b[:, None]
        if "obs" in self.tensors:
            return self.tensors["obs"][slot, steps, b]
        return {name[4:]: v[slot, steps, b] for name, v in self.tensors.items() if name.startswith("obs.")}

    def fetch(self, request) -> tuple:
        return request, None  # None: every item's observations are here

    def take_lost(self) -> list[int]:
        return []

    def state(self, slots: list[int]) -> dict[str, torch.Tensor]:
        """Every field of every slot, as they are (not copied: the caller grants nothing while it saves)."""
        return dict(self.tensors)

    def load(self, chunks: dict, slots: list[int]) -> None:
        for name, tensor in self.tensors.items():
            tensor.copy_(check_saved_chunks(chunks, name, tuple(tensor.shape)))

    def metrics(self) -> dict:
        return {}
