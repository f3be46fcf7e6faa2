"""A sharded parameter server: the parameters split across S shards by size, each with its own optimizer state.

Gradient workers (A3C's actor-learners) compute gradients on their own data against the parameters they last
fetched and push them flat (one float32 vector in the order of the learned parameters). The server applies them:

    sync   average the K gradients of one round (weights w_k), then step once
    async  step on each gradient as it arrives (K = 1)

One step, whatever the shard count::

    g = sum_k w_k g_k                                   # in push order: K = 2 is all-reduce's sum, bit for bit
    norms = [shard.norms(g) for shard in shards]        # each shard's per-parameter L2 norms
    scale = min(1, max_norm / (|norms| + 1e-6))         # one global clip, as `clip_gradients` computes it
    for shard in shards: shard.step(g, scale)           # its slice only, its own Adam moments

so S shards give the same parameters as one (Adam is elementwise), and K gradients of one round the same as
K data-parallel learners' all-reduce (tested). The server does not version or publish: its caller (the trainer)
counts a version per step and publishes through the host's parameter cache, as for every learner. A gradient
computed on parameters more than `max_staleness` versions old never reaches it: the coordinator drops it on
arrival and counts it (`menger.coordinator.asynchronous`).
"""
from __future__ import annotations

import torch


def shard_bounds(sizes: list[int], shards: int) -> list[tuple[int, int]]:
    """[start, stop) of each shard's parameter tensors: contiguous runs of whole tensors whose element counts
    are as even as cutting between tensors allows (each shard holds at least one tensor)."""
    if shards < 1:
        raise ValueError(f"a parameter server needs at least one shard; got {shards}")
    if shards > len(sizes):
        raise ValueError(f"runtime.parameter_server.shards={shards} but the network has only {len(sizes)} parameter "
                         f"tensors, and a shard holds whole tensors; use at most {len(sizes)} shards")
    total, bounds, start, done = sum(sizes), [], 0, 0
    for shard in range(shards):
        if shard == shards - 1:
            bounds.append((start, len(sizes)))
            break
        target = total * (shard + 1) / shards
        stop = start + 1
        done += sizes[start]
        # take the next tensor while it brings this shard closer to its share, leaving one for each later shard
        while stop < len(sizes) - (shards - 1 - shard) and abs(done + sizes[stop] - target) <= abs(done - target):
            done += sizes[stop]
            stop += 1
        bounds.append((start, stop))
        start = stop
    return bounds


class ParameterShard:
    """A run of whole parameter tensors, their slice [offset, offset + size) of a flat gradient, and the Adam
    moments of those tensors alone."""

    def __init__(self, params: list[torch.Tensor], offset: int, optimizer):
        self.params, self.offset, self.optimizer = params, offset, optimizer
        self.size = sum(p.numel() for p in params)

    def grads(self, flat: torch.Tensor) -> list[torch.Tensor]:
        views, offset = [], self.offset
        for p in self.params:
            views.append(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        return views

    def norms(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return list(torch._foreach_norm(self.grads(flat)))

    @torch.no_grad()
    def step(self, flat: torch.Tensor, scale: torch.Tensor | None) -> None:
        grads = self.grads(flat)
        if scale is not None:
            torch._foreach_mul_(grads, scale)
        for p, g in zip(self.params, grads):
            p.grad = g
        self.optimizer.step()
        for p in self.params:
            p.grad = None


class ShardedParameterServer:
    """The optimizer of a learner in `runtime.learner.mode: parameter_server`: S shards, one global clip.

    It has an optimizer's face where the learner needs one (`param_groups` for the LR schedule, `state_dict`),
    and `apply(gradients, weights)` in place of `step`. `make_optimizer(params)` builds one shard's optimizer.
    """

    def __init__(self, params: list[torch.Tensor], shards: int, max_grad_norm: float, make_optimizer):
        bounds = shard_bounds([p.numel() for p in params], shards)
        self.size = sum(p.numel() for p in params)
        self.max_grad_norm = max_grad_norm
        self.shards, offset = [], 0
        for start, stop in bounds:
            group = params[start:stop]
            self.shards.append(ParameterShard(group, offset, make_optimizer(group)))
            offset += sum(p.numel() for p in group)
        self.applied = 0

    @property
    def param_groups(self) -> list[dict]:
        return [group for shard in self.shards for group in shard.optimizer.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: the shards take their gradients from `apply` and drop them after the step."""

    @torch.no_grad()
    def apply(self, gradients: torch.Tensor, weights: list[float]) -> torch.Tensor:
        """One step on the weighted sum of `gradients` [K, size] (K = 1: the gradient as it is); returns the
        global norm before clipping."""
        if gradients.dim() != 2 or gradients.shape[1] != self.size:
            raise ValueError(f"a pushed gradient must be a flat float32 vector of {self.size} entries (the learned "
                             f"parameters in order); got shape {tuple(gradients.shape)}")
        if len(weights) != gradients.shape[0]:
            raise ValueError(f"{gradients.shape[0]} gradients but {len(weights)} weights")
        flat = gradients[0] if gradients.shape[0] == 1 and weights[0] == 1.0 else None
        if flat is None:
            flat = gradients[0].mul(weights[0])
            for k in range(1, gradients.shape[0]):
                flat.add_(gradients[k].mul(weights[k]))
        norms = [n for shard in self.shards for n in shard.norms(flat)]
        norm = torch.linalg.vector_norm(torch.stack(norms))
        scale = (self.max_grad_norm / (norm + 1e-6)).clamp_(max=1.0) if self.max_grad_norm > 0 else None
        for shard in self.shards:
            shard.step(flat, scale)
        self.applied += gradients.shape[0]
        return norm

    def state_dict(self) -> dict:
        return {"shards": [shard.optimizer.state_dict() for shard in self.shards],
                "sizes": [shard.size for shard in self.shards], "applied": self.applied}

    def load_state_dict(self, state: dict) -> None:
        sizes = [shard.size for shard in self.shards]
        if "shards" not in state or list(state["sizes"]) != sizes:
            raise ValueError(f"the checkpoint's parameter server has shards of {list(state.get('sizes', []))} "
                             f"parameters, this run's {sizes}: resume with the runtime.parameter_server.shards and "
                             "model the run was trained with")
        for shard, saved in zip(self.shards, state["shards"]):
            shard.optimizer.load_state_dict(saved)
        self.applied = int(state.get("applied", 0))
