"""Unrolls and parameters as Ray object references; the same `Transport` calls as the local transport.

The trainer's loop stays as it is; what a call means on Ray::

    grant(actor, slot)   -> meta_ref, data_ref = actor.unroll.remote(version, [params_ref])   (one call per slot:
                            at most `slots_per_actor` calls are in flight per actor, the back-pressure bound)
    receive(timeout)     -> ray.wait on the in-flight meta refs; a finished unroll is fetched and copied into the
                            learner's own slot, so the batch is gathered locally and a node lost later loses nothing
    publish(version)     -> `menger.params.ray.RayParameterServer`: ray.put once per version, in the learner's store
    actor reads params   -> through its node's ParameterCache: the first actor on a node to need a version makes the
                            cache fetch it (one copy crosses the network per node); the others read the cache's copy
    central inference    -> an actor built with a `RayInferenceClient` (`menger.inference.ray`) acts through the
                            learner's mailbox instead; the driver's service reads `params.latest()`

Liveness: Ray reports a dead actor (its process or its node died) as an error on its in-flight refs; the trainer
then starts a new incarnation, which Ray places on a live node. An actor with unroll calls in flight that
returns nothing for `heartbeat_timeout_s` counts as stalled. Every `ray.get` and `ray.wait` has a timeout.
"""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field

import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError

from menger.actors import make_actor
from menger.params.ray import GET_TIMEOUT_S, CachedParameters, ParameterCaches, RayParameterServer
from menger.transport.shm import UnrollBuffers, UnrollSpec

log = logging.getLogger("menger.transport.ray")


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
        torch.set_num_threads(1)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.port = RayPort(spec, caches.get(self.node_id))
        self.actor = make_actor(port=self.port, **actor_kwargs)  # central inference: its RayInferenceClient

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


class RayTransport:
    """The learner's side on Ray: unroll calls as grants, object refs in flight, params through per-node caches."""

    def __init__(self, launcher, spec: UnrollSpec, policy, num_actors: int, slots_per_actor: int,
                 startup_grace_s: float):
        self.launcher, self.spec, self.startup_grace_s = launcher, spec, startup_grace_s
        self.frames_per_unroll = spec.unroll_length * spec.envs_per_actor
        self.buffers = UnrollBuffers(spec, num_actors * slots_per_actor, shared=False)
        self.params = RayParameterServer(policy)
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
        unroll = state.handle.actor.unroll.options(num_returns=2)
        meta_ref, data_ref = unroll.remote(self.params.version, [self.params.ref])
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
        self.params.publish(policy, version)

    def metrics(self, wait_s: float = 0.0) -> dict:
        """`params/copies_per_version`: node copies of the average version a cache fetched (about one per node)."""
        if self.final_metrics is not None:
            return dict(self.final_metrics)
        stats = self.caches.stats(wait_s)
        fetches = [s["fetches"] for s in stats if s["fetches"]]
        copies = sum(fetches) / max(fetches) if fetches else 0.0
        return {"transport/bytes_per_env_slot": self.buffers.bytes_per_env_slot,
                "params/bytes_per_version": copies * self.params.nbytes,
                "params/copies_per_version": copies,
                "params/cache_reads": sum(s["reads"] for s in stats),
                "params/caches": len(stats)}

    def shutdown(self, handles: list) -> None:
        self.caches.stats(wait_s=2.0)
        self.final_metrics = self.metrics(wait_s=2.0)
        for actor_id in list(self.actors):
            self.release(actor_id)
        self.caches.kill_all()
