"""Sequence replay (R2D2, Kapturowski et al. 2019): the replay coordinator, with overlapping sequences for items.

Everything about chunks, grants, rate limiting, sharding, Ray and checkpoints is `ReplayCoordinator`'s; only what
an item is and what a batch holds differ. Of each env's column of an unroll of T steps, a sequence of
W = `r2d2.sequence_length` steps starts at every t in 0, period, 2 period, ..., T - W. An item names one
(slot, t, b), and the actor stored its recurrent state at t (`core_states` [S, 2, B, H] in the slot), so a
sequence is written once, in place, like every other item::

    steps     t ... t+W-1 of env b       actions, rewards, discounts = gamma (1 - terminated), valid,
                                         restarts (where the actor restarted its state)                [W, N]
    obs       t ... t+W of env b         (the last one is only bootstrapped from)                      [W+1, N, ...]
    state     the actor's (h, c) entering step t                                                       [2, N, H]
    burn_in   steps of each sequence that only refresh the state: r2d2.burn_in, or 0 for an unroll's first
              sequence (nothing before it is stored, and its state is the actor's own, not a stale copy)  [N]

A sequence's priority is R2D2's mix eta * max |TD| + (1 - eta) * mean |TD| over the steps after its burn-in; the
initial one is the actor's, from the Q values it acted with, as Ape-X's are.
"""
from __future__ import annotations

import numpy as np
import torch

from menger.coordinator.replay import ReplayCoordinator
from menger.losses import sequence_priorities, sequence_targets
from menger.losses.value_rescaling import DEFAULT_EPS

SEQUENCE_SPEC = {"slot": ((), np.int32), "t": ((), np.int32), "b": ((), np.int32)}


class SequenceReplayCoordinator(ReplayCoordinator):
    item_spec = SEQUENCE_SPEC

    def __init__(self, num_actors: int, replay, r2d2, *, unroll_length: int, envs_per_actor: int, in_flight: int,
                 seed: int):
        """`r2d2`: the experiment's `R2D2Config` (its unroll_length fits the sequences: the config checks it)."""
        self.r2d2, self.length = r2d2, r2d2.sequence_length
        self.starts = np.asarray(r2d2.starts(unroll_length), np.int64)
        self.envs = envs_per_actor
        self.eps = DEFAULT_EPS if r2d2.value_rescaling else None
        super().__init__(num_actors, replay, unroll_length=unroll_length, envs_per_actor=envs_per_actor,
                         in_flight=in_flight, gamma=r2d2.gamma, n_step=r2d2.n_step, seed=seed)

    def _items_per_env(self, unroll_length: int) -> int:
        return len(self.starts)

    # ----- items ----------------------------------------------------------------------------------------
    def _items(self, slot: int) -> tuple[dict, np.ndarray]:
        """The chunk's sequences, start by start and env by env, and their initial priorities."""
        t = np.repeat(self.starts, self.envs)
        b = np.tile(np.arange(self.envs), len(self.starts))
        items = {"slot": np.full(len(t), slot, np.int32), "t": t.astype(np.int32), "b": b.astype(np.int32)}
        if not (self.prioritized and "values" in self.tensors):
            return items, np.ones(len(t))
        slots, t, b = torch.full((len(t),), slot), torch.from_numpy(t), torch.from_numpy(b)
        seq = self._windows(slots, t, b, ("logp", "rewards", "terminated", "valid"), self.length)
        values = self._windows(slots, t, b, ("values",), self.length + 1)["values"]
        targets, mask = sequence_targets(values, seq["rewards"], self.gamma * (1.0 - seq["terminated"]),
                                         seq["valid"], self.n_step, self.eps)  # the actor's max_a Q: online = target
        mask = mask * self._trained(self._burn_in(t))
        return items, sequence_priorities(targets - seq["logp"], mask, self.r2d2.priority_eta).double().numpy()

    def _windows(self, slot: torch.Tensor, t: torch.Tensor, b: torch.Tensor, names, length: int) -> dict:
        """{name: field[slot, t .. t+length-1, b]} time-major [length, N, ...] for each sequence."""
        steps = t[:, None] + torch.arange(length)
        return {name: self.tensors[name][slot[:, None], steps, b[:, None]].movedim(1, 0) for name in names}

    def _burn_in(self, t: torch.Tensor) -> torch.Tensor:
        return torch.where(t == 0, 0, self.r2d2.burn_in)

    def _trained(self, burn_in: torch.Tensor) -> torch.Tensor:
        """[W, N]: 1 at the steps after each sequence's burn-in."""
        return (torch.arange(self.length)[:, None] >= burn_in[None, :]).float()

    # ----- batches --------------------------------------------------------------------------------------
    def _steps(self, d: dict) -> torch.Tensor:
        return torch.from_numpy(d["t"].astype(np.int64))[:, None] + torch.arange(self.length + 1)

    def _batch_data(self, d: dict, obs) -> dict:
        slot, t, b = (torch.from_numpy(d[k].astype(np.int64)) for k in ("slot", "t", "b"))
        seq = self._windows(slot, t, b, ("actions", "rewards", "terminated", "valid", "restarts"), self.length)
        index = torch.from_numpy(np.searchsorted(self.starts, d["t"]))
        state = self.tensors["core_states"][slot, index, :, b]  # [N, 2, H]
        obs = {k: v.movedim(1, 0) for k, v in obs.items()} if isinstance(obs, dict) else obs.movedim(1, 0)
        return {"obs": obs, "actions": seq["actions"], "rewards": seq["rewards"],
                "discounts": self.gamma * (1.0 - seq["terminated"]), "valid": seq["valid"], "restarts": seq["restarts"],
                "state": state.movedim(0, 1).contiguous(), "burn_in": self._burn_in(t)}
