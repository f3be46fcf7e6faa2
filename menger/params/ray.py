"""The parameter server on Ray: each version put in the object store once, read through Menger's parameter caches.

    learner (driver):  RayParameterServer.publish(policy, version) -> ray.put(flat parameters), once per version
    every node:        one ParameterCache (`menger.params.caches`; in a CacheProcess actor, num_cpus=0, pinned
                       there). One tier
                       (runtime.ray.cache_fanout=0): told of each version as it is published (a reference, not the
                       bytes), it fetches a version the first time an actor of its node needs it, so about one copy
                       per version crosses the network per node, and the learner tells every node
    cells (fan-out F): runtime.ray.cache_fanout=F >= 2 puts tiers of cell caches between them (`cell_groups`):
                       the learner tells at most F, each cell at most F below it, every version pushed down the
                       tree as it is published; a dead cell's caches are told by the tier above it from then on
    actor:             CachedParameters (its ParameterSource): before each unroll, the newest version its node's
                       cache knows of, never older than the one the learner offered with the unroll call. (The
                       offer alone would be as old as the grant: a grant goes out before the update it waits on,
                       and queues behind the unroll in progress, so the actor would act two versions behind.)
    central inference: RayParameterServer.latest() in the driver: no copy leaves the driver for inference
    gradient workers:  RayShards, a parameter server's shards as Ray actors (`menger.params.sharded`)

Only this module, `menger.params.caches`, `menger.transport.ray`, `menger.inference.ray` and `menger.launch.ray`
import Ray.
"""
from __future__ import annotations

import numpy as np
import ray
import torch
from ray.exceptions import RayActorError, RayError
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from menger.params.caches import GET_TIMEOUT_S, NODE_KEY
from menger.params.server import views_of
from menger.params.sharded import ParameterShard, check_layout, clip_scale, shard_bounds, weighted_sum


class RayParameterServer:
    """The learner's side: the newest version as an object reference (for actors) and as an array (for the driver)."""

    def __init__(self, policy):
        self.nbytes = 4 * sum(p.numel() for p in policy.parameters())
        self.version, self.ref = -1, None
        self._published: tuple[int, np.ndarray] | None = None

    def publish(self, policy, version: int) -> None:
        flat = parameters_to_vector([p.detach() for p in policy.parameters()]).to("cpu", torch.float32).numpy()
        self.ref = ray.put(flat)
        self.version = version
        self._published = (version, flat)

    def latest(self) -> tuple[int, np.ndarray]:
        """(version, flat float32 parameters) as last published: what central inference in the driver reads.

        Each version is a new array that is never written again, so a reader in another thread sees a whole one.
        """
        if self._published is None:
            raise RuntimeError("no parameters published yet: the trainer publishes version 0 before starting actors")
        return self._published


class CachedParameters:
    """An actor's ParameterSource on Ray: the newest version its node's cache knows of when an unroll starts.

    `offer(version, source)` (each unroll call) asks the cache once: it answers with its newest version (at least
    the offered one) and a local reference to it; `read_into` fetches that only when the version moved. A cache
    that is gone (killed, or its process died) is not asked again: the learner's offer is read instead.
    """

    def __init__(self, cache, key: str = NODE_KEY):
        self.cache, self.key, self.offered, self.source, self.local = cache, key, -1, None, None

    def offer(self, version: int, source: list) -> None:
        self.source = source
        if self.cache is not None:
            try:
                self.offered, self.local = ray.get(self.cache.read.remote(self.key, version, source),
                                                   timeout=GET_TIMEOUT_S)
                return
            except RayActorError:
                self.cache = None
        # no cache on this node (it joined after the caches were made, or its cache died): the learner's copy
        self.offered, self.local = version, source

    def version(self) -> int:
        return self.offered

    def read_into(self, module) -> int:
        flat = ray.get(self.local[0], timeout=GET_TIMEOUT_S)
        with torch.no_grad():
            vector_to_parameters(torch.from_numpy(np.array(flat)), module.parameters())
        return self.offered


# ----- the parameter server's shards as Ray actors ---------------------------------------------------
class RayShard:
    """One shard of `menger.params.sharded` as a Ray actor: its own copy of its parameter tensors and their Adam
    moments. The driver puts each step's gradient in the object store once; every shard reads it and steps on
    its slice."""

    def __init__(self, params: list[np.ndarray], offset: int, make_optimizer, optimizer_state: dict | None = None):
        tensors = [torch.from_numpy(np.array(p)) for p in params]
        self.shard = ParameterShard(tensors, offset, make_optimizer(tensors))
        if optimizer_state is not None:
            self.shard.optimizer.load_state_dict(optimizer_state)

    def step(self, gradient: np.ndarray, scale: float | None, lr: float) -> np.ndarray:
        for group in self.shard.optimizer.param_groups:
            group["lr"] = lr
        flat = torch.from_numpy(np.array(gradient))  # a copy: the store's array is read-only
        self.shard.step(flat, None if scale is None else torch.tensor(scale, dtype=torch.float32))
        return torch.cat([p.detach().reshape(-1) for p in self.shard.params]).numpy()

    def state(self) -> dict:
        return self.shard.optimizer.state_dict()


class RayShards:
    """The sharded parameter server with each shard a Ray actor (the ray launcher): `ShardedParameterServer`'s face
    (`param_groups`, `zero_grad`, `apply`, `applied`, `state_dict`, `load_state_dict`) and the same steps bit for
    bit (tested). A step::

        g = sum_k w_k g_k; scale from its global norm     # here, as every server computes them
        ref = ray.put(g)                                  # once
        slices = [shard.step(ref, scale, lr) for shard]   # each steps its Adam on its slice; its parameters return

    A shard whose actor died (its node left, or it was killed) is made again, from the parameters of the last
    step (the driver holds them all) and the Adam moments of its last snapshot (taken every `snapshot_every`
    steps and at every checkpoint), and the step is asked of it again: its moments lose at most `snapshot_every`
    steps. The actors are made at the first call, once the launcher has connected to Ray.
    """

    def __init__(self, params: list[torch.Tensor], shards: int, max_grad_norm: float, make_optimizer, *,
                 snapshot_every: int = 100):
        self.params, self.max_grad_norm, self.make_optimizer = params, max_grad_norm, make_optimizer
        self.bounds = shard_bounds([p.numel() for p in params], shards)
        self.size = sum(p.numel() for p in params)
        self.sizes = [sum(p.numel() for p in params[start:stop]) for start, stop in self.bounds]
        self.offsets = [sum(self.sizes[:index]) for index in range(shards)]  # where each shard's slice starts
        self.groups = [{"lr": float(make_optimizer(params[:1]).param_groups[0]["lr"])}]
        self.snapshot_every = snapshot_every
        self.snapshots: list[dict | None] = [None] * shards
        self.actors: list = []
        self.applied, self.steps, self.restarts = 0, 0, 0

    @property
    def param_groups(self) -> list[dict]:
        return self.groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: the shards take their gradients from `apply`."""

    def _start(self) -> None:
        if not self.actors:
            self.actors = [self._make(index) for index in range(len(self.bounds))]

    def _make(self, index: int):
        start, stop = self.bounds[index]
        params = [p.detach().cpu().numpy().copy() for p in self.params[start:stop]]
        return ray.remote(RayShard).options(num_cpus=0, max_concurrency=1, scheduling_strategy="SPREAD").remote(
            params, self.offsets[index], self.make_optimizer, self.snapshots[index])

    def _call(self, method: str, *args) -> list:
        """`method` on every shard at once; a shard whose actor died is made again from its snapshot and asked
        again."""
        refs = [getattr(actor, method).remote(*args) for actor in self.actors]
        out = []
        for index, ref in enumerate(refs):
            try:
                out.append(ray.get(ref, timeout=GET_TIMEOUT_S))
            except RayError:
                self.restarts += 1
                self.actors[index] = self._make(index)
                out.append(ray.get(getattr(self.actors[index], method).remote(*args), timeout=GET_TIMEOUT_S))
        return out

    @torch.no_grad()
    def apply(self, gradients: torch.Tensor, weights: list[float]) -> torch.Tensor:
        self._start()
        flat = weighted_sum(gradients, weights, self.size).detach().cpu()
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(views_of(flat, self.params))))
        scale = clip_scale(norm, self.max_grad_norm)
        slices = self._call("step", ray.put(flat.numpy()), None if scale is None else float(scale),
                            self.groups[0]["lr"])
        for (start, stop), values in zip(self.bounds, slices):
            for p, view in zip(self.params[start:stop], views_of(torch.from_numpy(values.copy()),
                                                                 self.params[start:stop])):
                p.copy_(view)
        self.applied += gradients.shape[0]
        self.steps += 1
        if self.steps % self.snapshot_every == 0:
            self.snapshot()
        return norm

    def snapshot(self) -> None:
        """Every shard's Adam moments, kept here: what a remade shard starts from."""
        self._start()
        self.snapshots = self._call("state")

    def state_dict(self) -> dict:
        self.snapshot()
        return {"shards": list(self.snapshots), "sizes": list(self.sizes), "applied": self.applied}

    def load_state_dict(self, state: dict) -> None:
        """The shards' moments; the parameters are the learner's as they are now (`Learner.load_state_dict` loads
        the model first). The actors are made again from both at the next call."""
        check_layout(state, self.sizes)
        self.snapshots = list(state["shards"])
        self.applied = int(state.get("applied", 0))
        self.close()

    def metrics(self) -> dict:
        return {"ps/shard_restarts": self.restarts}

    def close(self) -> None:
        for actor in self.actors:
            try:
                ray.kill(actor)
            except RayError:
                pass
        self.actors = []
