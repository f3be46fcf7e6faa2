"""Unrolls and parameters as Ray object references; the same `Transport` calls as the local transport.

The trainer's loop stays as it is; what a call means on Ray::

    grant(actor, slot)   -> meta_ref, data_ref = actor.unroll.remote(version, [params_ref])   (one call per slot:
                            at most `slots_per_actor` calls are in flight per actor, the back-pressure bound)
    receive(timeout)     -> ray.wait on the in-flight meta refs; a finished unroll is fetched and copied into the
                            learner's own slot, so the batch is gathered locally and a node lost later loses nothing
    publish(version)     -> params_ref = ray.put(flat parameters): once per version, in the learner's object store
    actor reads params   -> through its node's ParameterCache: the first actor on a node to need a version makes the
                            cache fetch it (one copy crosses the network per node); the others read the cache's copy
    central inference    -> an actor built with a `RayInferenceClient` (`menger.inference.ray`) acts through the
                            learner's mailbox instead; `latest_parameters()` is what the driver's service reads

Liveness: Ray reports a dead actor (its process or its node died) as an error on its in-flight refs; the trainer
then starts a new incarnation, which Ray places on a live node. An actor with unroll calls in flight that
returns nothing for `heartbeat_timeout_s` counts as stalled. Every `ray.get` and `ray.wait` has a timeout.
"""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from menger.transport.shm import UnrollBuffers, UnrollSpec

log = logging.getLogger("menger.transport.ray")

GET_TIMEOUT_S = 60.0  # bound of every fetch of an object that is known to be ready (or of a small control call)


class ParameterCache:
    """One per node (pinned there with NodeAffinitySchedulingStrategy): Menger's parameter cache.

    `read(version, source)` fetches `source[0]` (the learner's object for `version`) only when the cache holds an
    older version, stores it in its node's object store with `ray.put`, and returns that local reference, so the
    learner sends each version about once per node instead of once per actor.
    """

    def __init__(self):
        self.version, self.local, self.fetches, self.bytes_fetched, self.reads = -1, None, 0, 0, 0

    def read(self, version: int, source: list) -> tuple[int, list]:
        if version > self.version:
            flat = ray.get(source[0], timeout=GET_TIMEOUT_S)
            self.local = [ray.put(flat)]
            self.version = version
            self.fetches += 1
            self.bytes_fetched += int(flat.nbytes)
        self.reads += 1
        return self.version, self.local

    def stats(self) -> dict:
        return {"fetches": self.fetches, "bytes": self.bytes_fetched, "reads": self.reads, "version": self.version}


class CachedParameters:
    """An actor's ParameterSource on Ray: the version the learner last offered, read through the node's cache."""

    def __init__(self, cache):
        self.cache, self.offered, self.source = cache, -1, None

    def offer(self, version: int, source: list) -> None:
        self.offered, self.source = version, source

    def version(self) -> int:
        return self.offered

    def read_into(self, module) -> int:
        if self.cache is None:  # a node that joined after the caches were made: read the learner's copy
            version, flat = self.offered, ray.get(self.source[0], timeout=GET_TIMEOUT_S)
        else:
            version, local = ray.get(self.cache.read.remote(self.offered, self.source), timeout=GET_TIMEOUT_S)
            flat = ray.get(local[0], timeout=GET_TIMEOUT_S)
        with torch.no_grad():
            vector_to_parameters(torch.from_numpy(np.array(flat)), module.parameters())
        return version


class RayPort:
    """An actor's port on Ray: one local slot (Ray copies it out when the call returns), params via the cache."""

    def __init__(self, spec: UnrollSpec, cache):
        self.buffers = UnrollBuffers(spec, 1, shared=False)
        self.params = CachedParameters(cache)

    def slot(self, index: int) -> dict[str, torch.Tensor]:
        return self.buffers.slot(index)

    def num_slots(self) -> int:
        return 1

    def beat(self, actor_id: int, frames_in_unroll: int) -> None:
        """Liveness on Ray is the learner's view of the unroll calls (see `RayTransport.silent_for`)."""


class RemoteActor:
    """The body of a Ray actor: the shared `Actor`, driven one unroll per remote call."""

    def __init__(self, actor_kwargs: dict, spec: UnrollSpec, caches: dict):
        from menger.actors.actor import make_actor

        torch.set_num_threads(1)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.port = RayPort(spec, caches.get(self.node_id))
        actor_kwargs = dict(actor_kwargs)
        central = actor_kwargs.pop("inference", None)  # runtime.inference=central: a RayInferenceClient
        self.actor = make_actor(port=self.port, **actor_kwargs)
        if central is not None:  # its ActionSource replaces the local one; the actor's loop is the same
            self.actor.actions = central.actions_for(self.port.params)

    def unroll(self, version: int, source: list):
        self.port.params.offer(version, source)
        meta = self.actor.unroll(0)
        return meta, {name: tensor.numpy() for name, tensor in self.port.slot(0).items()}

    def snapshot(self) -> dict:
        return self.actor.snapshot()

    def where(self) -> str:
        return self.node_id


@dataclass
class RayActorHandle:
    """A Ray actor as the trainer sees a thread or a process: alive until Ray says otherwise."""

    actor: object
    started_at: float
    dead: bool = False
    exitcode: int | None = None

    def is_alive(self) -> bool:
        return not self.dead

    def kill(self) -> None:
        self.dead = True
        try:
            ray.kill(self.actor, no_restart=True)
        except RayError:
            pass

    def join(self, timeout: float) -> None:
        """Ray actors end when killed; there is nothing to wait for."""


@dataclass
class InFlight:
    actor_id: int
    slot: int
    data_ref: object
    submitted_at: float


@dataclass
class ActorState:
    handle: RayActorHandle
    last_progress: float
    calls: list = field(default_factory=list)  # meta refs in submission order (Ray runs them in that order)
    lost_an_unroll: bool = False  # a call failed: the unroll it was writing is gone


class ParameterCaches:
    """The per-node caches: made for every live node, remade when nodes come and go."""

    def __init__(self):
        self.by_node: dict[str, object] = {}
        self.asked: list = []       # stats calls in flight: answered by the next `stats()`, so it never blocks
        self.latest: dict = {}      # node id -> the newest stats of its cache

    def refresh(self) -> dict[str, object]:
        alive = {node["NodeID"] for node in ray.nodes() if node.get("Alive")}
        for node_id in set(self.by_node) - alive:
            self.by_node.pop(node_id)
        for node_id in alive - set(self.by_node):
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            self.by_node[node_id] = ray.remote(ParameterCache).options(
                num_cpus=0, scheduling_strategy=strategy, max_concurrency=1).remote()
        return dict(self.by_node)

    def stats(self, wait_s: float = 0.0) -> list[dict]:
        """The caches' counters as of the previous call (or `wait_s` for this one's answers)."""
        if self.asked:
            refs = [ref for _, ref in self.asked]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=wait_s)
            for node_id, ref in self.asked:
                if ref in ready:
                    try:
                        self.latest[node_id] = ray.get(ref, timeout=GET_TIMEOUT_S)
                    except RayError:  # the cache's node is gone; its last counters still count
                        pass
        self.asked = [(node_id, cache.stats.remote()) for node_id, cache in self.by_node.items()]
        return list(self.latest.values())

    def kill_all(self) -> None:
        for cache in self.by_node.values():
            try:
                ray.kill(cache)
            except RayError:
                pass
        self.by_node.clear()


class RayTransport:
    """The learner's side on Ray: unroll calls as grants, object refs in flight, params through per-node caches."""

    def __init__(self, launcher, spec: UnrollSpec, policy, num_actors: int, slots_per_actor: int,
                 startup_grace_s: float):
        self.launcher, self.spec, self.startup_grace_s = launcher, spec, startup_grace_s
        self.frames_per_unroll = spec.unroll_length * spec.envs_per_actor
        self.buffers = UnrollBuffers(spec, num_actors * slots_per_actor, shared=False)
        self.param_bytes = 4 * sum(p.numel() for p in policy.parameters())
        self.version, self.params_ref = -1, None
        self.published: tuple[int, np.ndarray] | None = None
        self.caches = ParameterCaches()
        self.actors: dict[int, ActorState] = {}
        self.in_flight: dict[object, InFlight] = {}
        self.snapshots: dict[object, int] = {}
        self.final_metrics: dict | None = None  # the figures as of shutdown (Ray may be gone after it)

    # ----- actors ---------------------------------------------------------------------------
    def start_actor(self, actor_id: int, actor_kwargs: dict) -> RayActorHandle:
        caches = self.caches.refresh()
        actor = self.launcher.start_actor(RemoteActor, dict(actor_kwargs=actor_kwargs, spec=self.spec, caches=caches))
        now = time.time()
        handle = RayActorHandle(actor, started_at=now)
        self.actors[actor_id] = ActorState(handle, last_progress=now + self.startup_grace_s)
        return handle

    def grant(self, actor_id: int, slot: int) -> bool:
        state = self.actors.get(actor_id)
        if state is None or state.handle.dead:
            return False
        meta_ref, data_ref = state.handle.actor.unroll.options(num_returns=2).remote(self.version, [self.params_ref])
        if not state.calls:
            state.last_progress = max(state.last_progress, time.time())  # idle until now: not silent
        self.in_flight[meta_ref] = InFlight(actor_id, slot, data_ref, time.time())
        state.calls.append(meta_ref)
        return True

    def request_snapshot(self, actor_id: int) -> None:
        state = self.actors.get(actor_id)
        if state is not None and not state.handle.dead:
            self.snapshots[state.handle.actor.snapshot.remote()] = actor_id

    def silent_for(self, actor_id: int) -> float:
        """Seconds the actor has worked on its oldest call without returning it (0 when it has nothing to do)."""
        state = self.actors.get(actor_id)
        if state is None or not state.calls:
            return 0.0
        return time.time() - state.last_progress

    def frames_in_flight(self, actor_id: int) -> int:
        """At most one unroll was being written (Ray keeps no per-step counter): count it as lost."""
        state = self.actors.get(actor_id)
        return self.frames_per_unroll if state is not None and (state.calls or state.lost_an_unroll) else 0

    def release(self, actor_id: int) -> None:
        """Forget a lost incarnation: its refs in flight are dropped and the Ray actor is killed."""
        state = self.actors.pop(actor_id, None)
        if state is None:
            return
        for ref in state.calls:
            self.in_flight.pop(ref, None)
        for ref in [r for r, owner in self.snapshots.items() if owner == actor_id]:
            self.snapshots.pop(ref)
        state.handle.kill()

    # ----- receiving ------------------------------------------------------------------------
    def receive(self, timeout: float) -> list[tuple[int, tuple]]:
        return self._collect(list(self.in_flight) + list(self.snapshots), timeout)

    def drain(self, actor_id: int) -> list[tuple]:
        state = self.actors.get(actor_id)
        mine = list(state.calls) if state is not None else []
        mine += [ref for ref, owner in self.snapshots.items() if owner == actor_id]
        return [message for _, message in self._collect(mine, 0.0)] if mine else []

    def _collect(self, refs: list, timeout: float) -> list[tuple[int, tuple]]:
        if not refs:
            time.sleep(timeout)
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        messages = []
        for ref in ready:
            if ref in self.snapshots:
                messages += self._snapshot_message(ref)
            elif ref in self.in_flight:
                messages += self._unroll_message(ref)
        return messages

    def _unroll_message(self, meta_ref) -> list[tuple[int, tuple]]:
        call = self.in_flight.pop(meta_ref)
        state = self.actors.get(call.actor_id)
        if state is not None and meta_ref in state.calls:
            state.calls.remove(meta_ref)
        try:
            meta, data = ray.get([meta_ref, call.data_ref], timeout=GET_TIMEOUT_S)
        except (RayError, GetTimeoutError) as exc:
            if state is not None:
                state.lost_an_unroll = True
            return self._failed(call.actor_id, exc)
        view = self.buffers.slot(call.slot)
        for name, array in data.items():
            view[name].numpy()[...] = array
        if state is not None:
            state.last_progress = time.time()
        return [(call.actor_id, ("unroll", call.slot, meta))]

    def _snapshot_message(self, ref) -> list[tuple[int, tuple]]:
        actor_id = self.snapshots.pop(ref)
        try:
            return [(actor_id, ("snapshot", ray.get(ref, timeout=GET_TIMEOUT_S)))]
        except (RayError, GetTimeoutError) as exc:
            return self._failed(actor_id, exc)

    def _failed(self, actor_id: int, exc: BaseException) -> list[tuple[int, tuple]]:
        """A call failed: the actor (or its node) died, or its code raised. Either way this incarnation is over."""
        state = self.actors.get(actor_id)
        if state is not None and not state.handle.dead:
            state.handle.dead = True
            if isinstance(exc, RayTaskError) and not isinstance(exc, RayActorError):
                state.handle.kill()  # its code raised: end it, like a local actor that dies of an exception
            state.handle.exitcode = 1
        cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
        text = f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
        return [(actor_id, ("error", text, "".join(traceback.format_exception(exc))))]

    # ----- batches and parameters -----------------------------------------------------------
    def gather(self, slots: list[int]) -> dict:
        return self.buffers.gather(slots)

    def publish(self, policy, version: int) -> None:
        flat = parameters_to_vector([p.detach() for p in policy.parameters()]).to("cpu", torch.float32).numpy()
        self.params_ref = ray.put(flat)
        self.version = version
        self.published = (version, flat)

    def latest_parameters(self) -> tuple[int, np.ndarray]:
        """(version, flat float32 parameters) as last published: what central inference in the driver reads.

        Each version is a new array that is never written again, so a reader in another thread sees a whole one.
        """
        if self.published is None:
            raise RuntimeError("no parameters published yet: the trainer publishes version 0 before starting actors")
        return self.published

    def metrics(self, wait_s: float = 0.0) -> dict:
        """`params/copies_per_version`: node copies of the average version a cache fetched (about one per node)."""
        if self.final_metrics is not None:
            return dict(self.final_metrics)
        stats = self.caches.stats(wait_s)
        fetches = [s["fetches"] for s in stats if s["fetches"]]
        copies = sum(fetches) / max(fetches) if fetches else 0.0
        return {"transport/bytes_per_env_slot": self.buffers.bytes_per_env_slot,
                "params/bytes_per_version": copies * self.param_bytes,
                "params/copies_per_version": copies,
                "params/cache_reads": sum(s["reads"] for s in stats),
                "params/caches": len(stats)}

    def shutdown(self, handles: list) -> None:
        self.caches.stats(wait_s=2.0)
        self.final_metrics = self.metrics(wait_s=2.0)
        for actor_id in list(self.actors):
            self.release(actor_id)
        self.caches.kill_all()
