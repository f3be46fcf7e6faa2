"""Emulated actors on Ray: thousands of logical actors from a few Ray actors, against the real Ray transport.

The Ray counterpart of `menger.launch.emulated`. Everything on the learner's side is the Ray launcher's, unchanged:
`RayTransport` (an unroll call per grant, refs in flight, `ray.wait`, the failure of a call as an actor's death
notice), the parameter server and the node caches, the trainer, coordinator and supervisor. Only the actors are
cheap: an emulated host is one async Ray actor (num_cpus=0) running K virtual actors. Each virtual actor is what
the transport expects of a `RemoteActor`: a handle whose `unroll.remote(version, source)` returns (meta, fields,
observations), with its own id, incarnation and sequence numbers; before each unroll it reads its node's cache as a
real actor does (the cache counts the read and fetches the version), and its "env" is a clock (T x B /
`frames_per_s` seconds). Its data is a template of one unroll made once per host (`fill_template`), returned by
every call, so the learner copies real arrays out of Ray's object store.

    learner (Trainer, RayTransport, unchanged)       emulated host h (one async Ray actor, K virtual actors)
    launcher.start_actor(a)  --start(a, inc)-->         a joins (an older incarnation of a is ended)
    grant: a.unroll.remote(v, [ref])
                             --unroll(a, inc, n, v, ..)-->  a's n-th call, after its n - 1 before (an async
                                                        actor starts calls in any order): read the node cache,
                                                        sleep T x B / frames_per_s, reply (meta, fields, obs)
    handle.kill()            --kill(a, inc)-->          a's calls in flight fail, as a killed actor's do
    launcher.kill_host(h)    ray.kill(host h): all its actors' calls fail at once; their next start makes a new host

Actors are spread over hosts in blocks (actors 0..K-1 on host 0, ...), as in `menger.launch.emulated`.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayError

from menger.core import UnrollMeta
from menger.launch.emulated import VirtualFleet, fill_template
from menger.launch.ray import RayLauncher
from menger.params.caches import GET_TIMEOUT_S, NODE_KEY
from menger.transport.shm import UnrollBuffers, is_observation


class VirtualActorGone(RuntimeError):
    """A virtual actor's call was made to an incarnation that was killed, or replaced, before it ran."""


class _QuietKilledCalls(logging.Filter):
    """Ray logs every failed call whose result nobody fetched; a killed virtual actor's calls in flight are such
    calls once the transport forgot the actor, as a killed Ray actor's are (which Ray does not log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "VirtualActorGone" not in record.getMessage()


RAY_WORKER_LOG = logging.getLogger("ray._private.worker")  # where Ray's driver logs unfetched failed calls
QUIET_KILLED_CALLS = _QuietKilledCalls()  # kept on it once added: calls of killed actors still fail after a run


@dataclass
class _Virtual:
    incarnation: int
    sequence: int = 0
    killed: bool = False
    next_call: int = 0  # an async actor starts calls in any order: a virtual actor runs its unrolls as numbered
    turn: asyncio.Condition = field(default_factory=asyncio.Condition)


class EmulatedRayHost:
    """The body of one emulated host (an async Ray actor): its virtual actors' unroll calls, concurrently."""

    def __init__(self, template: dict[str, np.ndarray], frames: int, unroll_s: float, caches: dict):
        self.fields = {name: array for name, array in template.items() if not is_observation(name)}
        self.obs = {name: array for name, array in template.items() if is_observation(name)}
        self.frames, self.unroll_s = frames, unroll_s
        self.node_id = ray.get_runtime_context().get_node_id()
        self.cache = caches.get(self.node_id)
        self.actors: dict[int, _Virtual] = {}
        self.reads = 0

    async def start(self, actor_id: int, incarnation: int) -> str:
        old = self.actors.get(actor_id)
        self.actors[actor_id] = _Virtual(incarnation)
        if old is not None:  # a host keeps one incarnation of an actor, as a machine runs one process of it
            old.killed = True
            async with old.turn:
                old.turn.notify_all()
        return self.node_id

    async def kill(self, actor_id: int, incarnation: int) -> None:
        actor = self.actors.get(actor_id)
        if actor is not None and actor.incarnation == incarnation:
            actor.killed = True
            del self.actors[actor_id]
            async with actor.turn:
                actor.turn.notify_all()  # its waiting calls fail now

    async def unroll(self, actor_id: int, incarnation: int, call: int, version: int, source: list):
        """The actor's `call`-th unroll call, run after its earlier ones, as a Ray actor runs its calls."""
        actor = self._running(actor_id, incarnation)
        async with actor.turn:
            await actor.turn.wait_for(lambda: actor.next_call == call or actor.killed)
        try:
            self._running(actor_id, incarnation)
            if self.cache is not None:  # as `CachedParameters.offer`: the newest version the node's cache has
                version, _ = await asyncio.wrap_future(self.cache.read.remote(NODE_KEY, version, source).future())
                self.reads += 1
            await asyncio.sleep(self.unroll_s)
            self._running(actor_id, incarnation)  # killed meanwhile: its partial unroll is lost with it
            actor.sequence += 1
            return UnrollMeta(actor_id, incarnation, actor.sequence, version, self.frames), self.fields, self.obs
        finally:
            async with actor.turn:
                actor.next_call = call + 1
                actor.turn.notify_all()

    def _running(self, actor_id: int, incarnation: int) -> _Virtual:
        actor = self.actors.get(actor_id)
        if actor is None or actor.incarnation != incarnation or actor.killed:
            raise VirtualActorGone(f"virtual actor {actor_id} incarnation {incarnation} was killed")
        return actor

    async def snapshot(self, actor_id: int, incarnation: int) -> dict:
        self._running(actor_id, incarnation)
        return {}

    async def where(self) -> str:
        return self.node_id

    async def stats(self) -> dict:
        return {"actors": len(self.actors), "reads": self.reads, "pid": os.getpid()}


class _Call:
    """`handle.method`, as `RayTransport` calls it (`.options(...)`, `.remote(...)`), bound to a virtual actor;
    `numbered`: each call also carries its number (`itertools.count`), so the host runs them in the order made."""

    def __init__(self, method, prefix: tuple, numbered=None, options: dict | None = None):
        self.method, self.prefix, self.numbered, self._options = method, prefix, numbered, options or {}

    def options(self, **options) -> "_Call":
        return _Call(self.method, self.prefix, self.numbered, {**self._options, **options})

    def remote(self, *args):
        method = self.method.options(**self._options) if self._options else self.method
        number = () if self.numbered is None else (next(self.numbered),)
        return method.remote(*self.prefix, *number, *args)


class VirtualActorRef:
    """What `RayTransport` holds for a virtual actor: its calls go to its host, with its id and incarnation."""

    def __init__(self, host, actor_id: int, incarnation: int):
        self.host, self.actor_id, self.incarnation = host, actor_id, incarnation
        self.unroll = _Call(host.unroll, (actor_id, incarnation), numbered=itertools.count())
        self.snapshot = _Call(host.snapshot, (actor_id, incarnation))
        self.where = _Call(host.where, ())


class EmulatedRayLauncher(VirtualFleet, RayLauncher):
    """`runtime.actors` virtual actors in `hosts` async Ray actors (num_cpus=0), each making `frames_per_s` env
    frames per second. Local inference only (a virtual actor computes nothing)."""

    name = "emulated-ray"

    def __init__(self, runtime, hosts: int = 1, frames_per_s: float = 10_000.0):
        super().__init__(runtime)
        self._fleet(runtime, hosts, frames_per_s)
        self.host_actors: list = [None] * hosts
        self.host_starts = 0  # host actors started, replacements included
        self.template: dict[str, np.ndarray] = {}
        self.frames = 0

    def make_transport(self, spec, policy, slots_per_actor: int):
        transport = super().make_transport(spec, policy, slots_per_actor)
        RAY_WORKER_LOG.addFilter(QUIET_KILLED_CALLS)  # once: adding it again does nothing
        one = UnrollBuffers(spec, 1, shared=False)
        fill_template(one.tensors, self.runtime.seed)
        self.template = {name: tensor[0].numpy().copy() for name, tensor in one.tensors.items()}
        self.frames = spec.unroll_length * spec.envs_per_actor
        caches = transport.caches.refresh()
        for host in range(self.hosts):  # all at once: Ray starts their processes side by side
            self._start_host(host, caches)
        ray.get([process.where.remote() for process in self.host_actors], timeout=GET_TIMEOUT_S)
        return transport

    def start_actor(self, target, kwargs: dict) -> VirtualActorRef:
        """`target` (the real `RemoteActor`) is not made: the actor's host runs a virtual one."""
        actor_id, incarnation = kwargs["actor_kwargs"]["actor_id"], kwargs["actor_kwargs"]["incarnation"]
        host = self.host_of(actor_id)
        for attempt in range(2):  # a host found dead is replaced once; a second failure is Ray's to report
            if self.host_actors[host] is None:
                self._start_host(host, kwargs["caches"])
            try:
                ray.get(self.host_actors[host].start.remote(actor_id, incarnation), timeout=GET_TIMEOUT_S)
                break
            except (RayError, GetTimeoutError):
                self.host_actors[host] = None
                if attempt:
                    raise
        return VirtualActorRef(self.host_actors[host], actor_id, incarnation)

    def _start_host(self, host: int, caches: dict) -> None:
        remote = ray.remote(EmulatedRayHost).options(num_cpus=0, max_restarts=0, max_concurrency=100_000,
                                                     scheduling_strategy="SPREAD")
        self.host_actors[host] = remote.remote(self.template, self.frames, self.frames / self.frames_per_s, caches)
        self.host_starts += 1

    def kill_actor(self, actor) -> None:
        if isinstance(actor, VirtualActorRef):
            actor.host.kill.remote(actor.actor_id, actor.incarnation)
        else:
            super().kill_actor(actor)

    def kill_host(self, host: int) -> None:
        """Chaos: the whole host dies at once, as a lost machine does."""
        if self.host_actors[host] is not None:
            ray.kill(self.host_actors[host], no_restart=True)

    def host_stats(self) -> list[dict]:
        refs = [process.stats.remote() for process in self.host_actors if process is not None]
        out = []
        for ref in refs:
            try:
                out.append(ray.get(ref, timeout=GET_TIMEOUT_S))
            except (RayError, GetTimeoutError):
                pass
        return out

    def shutdown(self) -> None:
        for process in self.host_actors:
            if process is not None:
                try:
                    ray.kill(process)
                except RayError:
                    pass
        self.host_actors = [None] * self.hosts
        super().shutdown()
