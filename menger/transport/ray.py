"""Unrolls and parameters as Ray object references; the same `Transport` calls as the local transport.

The trainer's loop stays as it is; what a call means on Ray::

    grant(actor, slot)   -> meta_ref, data_ref = actor.unroll.remote(version, [params_ref])   (one call per slot:
                            at most `slots_per_actor` calls are in flight per actor, the back-pressure bound)
    receive(timeout)     -> ray.wait on the in-flight meta refs; a finished unroll is fetched and copied into the
                            learner's own slot, so the batch is gathered locally and a node lost later loses nothing
    publish(version)     -> `menger.params.ray.RayParameterServer`: ray.put once per version, in the learner's store
    actor reads params   -> at the start of each unroll, the newest version its node's ParameterCache was told of
                            (each publish tells every cache); the first actor on a node to need a version makes the
                            cache fetch it (one copy crosses the network per node); the others read the cache's copy
    replay (apex, sac)   -> the unroll's observations stay on the actor's node, in that node's `ReplayShard`;
                            only its per-step fields are copied into the learner's slot (`RayChunks`)
    central inference    -> an actor built with a `RayInferenceClient` (`menger.inference.ray`) asks the driver's
                            request server on a socket instead; the driver's service reads `params.latest()`,
                            so nothing tells or asks the caches, and each reply names the version it acted with

Liveness: Ray reports a dead actor (its process or its node died) as an error on its in-flight refs; the trainer
then starts a new incarnation, which Ray places on a live node. An actor with unroll calls in flight that
returns nothing for `heartbeat_timeout_s` counts as stalled. Every `ray.get` and `ray.wait` has a timeout.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from menger.params.caches import ParameterCaches
from menger.params.ray import GET_TIMEOUT_S, CachedParameters, RayParameterServer
from menger.transport.shm import UnrollBuffers, UnrollSpec, check_saved_chunks, is_observation

log = logging.getLogger("menger.transport.ray")

NODE_LOOK_S = 2.0  # how often the learner asks Ray which nodes live (`NodeWatch`, read by `RayTransport.closed`)


class NodeWatch:
    """The ids of the nodes Ray reports dead, asked of Ray every `every_s` in a thread of its own (one call takes
    milliseconds: too long for the supervisor's tick, which reads `dead` and `looks`, the count of answers). Only a
    node Ray names dead counts: one that joined since the last look is not in its answer, and is not dead."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self.dead: set[str] = set()
        self.looks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="menger-ray-nodes", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and ray.is_initialized():
            try:
                self.dead = {node["NodeID"] for node in ray.nodes() if not node.get("Alive")}
                self.looks += 1
            except Exception as exc:  # noqa: BLE001 - the state service is briefly away (or Ray shut down): next look
                log.debug("no look at the cluster's nodes: %s", exc)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)


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
        build = actor_kwargs.pop("build")  # the runtime's factory (`menger.runtime.actors.make_actor`)
        self.actor = build(port=self.port, **actor_kwargs)  # central inference: its RayInferenceClient
        self.central = actor_kwargs.get("inference") is not None  # it never reads the parameters itself

    def unroll(self, version: int, source: list):
        """(tag, per-step fields, observations): three objects, so the learner can leave the observations where
        they are (the replay's shard on this node) and fetch only the small fields. An actor of central
        inference asks no cache: the driver acts with the newest parameters, and each reply says which."""
        if self.central:
            self.port.params.offered = max(self.port.params.offered, version)
        else:
            self.port.params.offer(version, source)
        meta = self.actor.unroll(0)
        fields = {name: tensor.numpy() for name, tensor in self.port.slot(0).items()}
        obs = {name: fields.pop(name) for name in list(fields) if is_observation(name)}
        return meta, fields, obs

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
    stop: Callable[[object], None] | None = None  # how to end it (the launcher's `kill_actor`); None: ray.kill

    def is_alive(self) -> bool:
        return not self.dead

    def kill(self) -> None:
        self.dead = True
        if self.stop is not None:
            self.stop(self.actor)
            return
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
    fields_ref: object
    obs_ref: object
    submitted_at: float


@dataclass
class ActorState:
    handle: RayActorHandle
    last_progress: float
    node_ref: object = None  # where(): answered before its first unroll (Ray runs an actor's calls in order)
    node: str | None = None
    calls: list = field(default_factory=list)  # meta refs in submission order (Ray runs them in that order)
    lost_an_unroll: bool = False  # a call failed: the unroll it was writing is gone


class RayTransport:
    """The learner's side on Ray: unroll calls as grants, object refs in flight, params through per-node caches."""

    def __init__(self, launcher, spec: UnrollSpec, policy, num_actors: int, slots_per_actor: int,
                 startup_grace_s: float, cache_fanout: int = 0):
        self.launcher, self.spec, self.startup_grace_s = launcher, spec, startup_grace_s
        self.frames_per_unroll = spec.unroll_length * spec.envs_per_actor
        self.buffers = UnrollBuffers(spec, num_actors * slots_per_actor, shared=False)
        self.params = RayParameterServer(policy)
        self.caches = ParameterCaches(cache_fanout)
        self.central = False  # set when an actor of central inference starts: no cache needs the parameters
        self.actors: dict[int, ActorState] = {}
        self.ended: set[int] = set()  # actors a failed call, or their node's death, showed dead (`closed`)
        self.busy_since = np.full(num_actors, np.inf)  # since when each has worked on calls without returning one
        self.nodes = NodeWatch(NODE_LOOK_S)
        self.nodes_seen = 0  # the NodeWatch look last compared with the actors' nodes
        self.in_flight: dict[object, InFlight] = {}
        self.snapshots: dict[object, int] = {}
        self.chunks: RayChunks | None = None  # the replay's chunks, once a replay coordinator asks for them
        self.final_metrics: dict | None = None  # the figures as of shutdown (Ray may be gone after it)

    # ----- actors ---------------------------------------------------------------------------
    def start_actor(self, actor_id: int, actor_kwargs: dict) -> RayActorHandle:
        self.central = actor_kwargs.get("inference") is not None
        caches = self.caches.refresh()
        if self.chunks is not None:
            self.chunks.forget_nodes_except(set(caches))
        actor = self.launcher.start_actor(RemoteActor, dict(actor_kwargs=actor_kwargs, spec=self.spec, caches=caches))
        now = time.time()
        handle = RayActorHandle(actor, started_at=now, stop=getattr(self.launcher, "kill_actor", None))
        self.actors[actor_id] = ActorState(handle, last_progress=now + self.startup_grace_s,
                                           node_ref=actor.where.remote())
        self._watch(actor_id)
        return handle

    def grant(self, actor_id: int, slot: int) -> bool:
        state = self.actors.get(actor_id)
        if state is None or state.handle.dead:
            return False
        unroll = state.handle.actor.unroll.options(num_returns=3)
        meta_ref, fields_ref, obs_ref = unroll.remote(self.params.version, [self.params.ref])
        if not state.calls:
            state.last_progress = max(state.last_progress, time.time())  # idle until now: not silent
        self.in_flight[meta_ref] = InFlight(actor_id, slot, fields_ref, obs_ref, time.time())
        state.calls.append(meta_ref)
        self._watch(actor_id)
        return True

    def _watch(self, actor_id: int) -> None:
        """`busy_since` of the actor after its calls or progress changed (inf: idle, or gone)."""
        state = self.actors.get(actor_id)
        self.busy_since[actor_id] = state.last_progress if state is not None and state.calls else np.inf

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

    def silent(self, seconds: float) -> list[int]:
        """The actors silent for more than `seconds` (`silent_for`), in one vectorised look."""
        return np.flatnonzero(self.busy_since < time.time() - seconds).tolist()

    def closed(self) -> list[int]:
        """The actors a failed call showed dead (their process or node died, or their code raised), and those on a
        node Ray reports dead (`NodeWatch`, every `NODE_LOOK_S`), until they are released: the supervisor asks
        them at its next tick. An actor with no call in flight (its slots all wait to be learned) shows no
        failure, so its node's death is what tells of it."""
        self.nodes.start()
        if self.nodes.looks != self.nodes_seen:
            self.nodes_seen = self.nodes.looks
            self._look_at_nodes(self.nodes.dead)
        return list(self.ended)

    def _look_at_nodes(self, dead: set[str]) -> None:
        unplaced = {actor_id: state for actor_id, state in self.actors.items() if state.node is None}
        if unplaced:  # where() answered since the last look: each actor's node, learned once
            refs = [state.node_ref for state in unplaced.values()]
            ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
            answered = [(actor_id, state) for actor_id, state in unplaced.items() if state.node_ref in ready]
            try:
                nodes = ray.get([state.node_ref for _, state in answered], timeout=GET_TIMEOUT_S)
            except (RayError, GetTimeoutError):  # one of them died before it could answer: each on its own
                nodes = [self._node_of(state) for _, state in answered]
            for (actor_id, state), node in zip(answered, nodes):
                state.node = node
                if node is None:
                    self._dead(actor_id, state)
        for actor_id, state in self.actors.items():
            if state.node in dead and not state.handle.dead:
                log.warning("actor %d: its node %s is gone", actor_id, state.node[:12])
                self._dead(actor_id, state)

    @staticmethod
    def _node_of(state: ActorState) -> str | None:
        try:
            return ray.get(state.node_ref, timeout=GET_TIMEOUT_S)
        except (RayError, GetTimeoutError):
            return None

    def _dead(self, actor_id: int, state: ActorState) -> None:
        if not state.handle.dead:
            state.handle.dead, state.handle.exitcode = True, 1
            self.ended.add(actor_id)

    def frames_in_flight(self, actor_id: int) -> int:
        """At most one unroll was being written (Ray keeps no per-step counter): count it as lost."""
        state = self.actors.get(actor_id)
        return self.frames_per_unroll if state is not None and (state.calls or state.lost_an_unroll) else 0

    def release(self, actor_id: int) -> None:
        """Forget a lost incarnation: its refs in flight are dropped and the Ray actor is killed."""
        self.ended.discard(actor_id)
        state = self.actors.pop(actor_id, None)
        self.busy_since[actor_id] = np.inf
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
            self._watch(call.actor_id)
        try:
            meta, fields = ray.get([meta_ref, call.fields_ref], timeout=GET_TIMEOUT_S)
            if self.chunks is None:
                fields.update(ray.get(call.obs_ref, timeout=GET_TIMEOUT_S))
            elif state is not None and state.node is None:
                state.node = ray.get(state.node_ref, timeout=GET_TIMEOUT_S)
        except (RayError, GetTimeoutError) as exc:
            if state is not None:
                state.lost_an_unroll = True
            return self._failed(call.actor_id, exc)
        view = self.buffers.slot(call.slot)
        for name, array in fields.items():
            view[name].numpy()[...] = array
        if self.chunks is not None and state is not None:  # the observations stay on the actor's node
            self.chunks.write(call.slot, call.actor_id, state.node, call.obs_ref)
        if state is not None:
            state.last_progress = time.time()
            self._watch(call.actor_id)
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
            self.ended.add(actor_id)
            if isinstance(exc, RayTaskError) and not isinstance(exc, RayActorError):
                state.handle.kill()  # its code raised: end it, like a local actor that dies of an exception
            state.handle.exitcode = 1
        cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
        text = f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
        return [(actor_id, ("error", text, "".join(traceback.format_exception(exc))))]

    # ----- batches and parameters -----------------------------------------------------------
    def gather(self, slots: list[int]) -> dict:
        return self.buffers.gather(slots)

    def chunk_store(self) -> "RayChunks":
        """The replay's chunks: the per-step fields in the learner's slots (no observations), and the observations
        in a `ReplayShard` on the node of the actor that wrote them."""
        self.buffers = UnrollBuffers(self.spec, self.buffers.num_slots, shared=False, observations=False)
        self.chunks = RayChunks(self.spec, self.buffers)
        return self.chunks

    def publish(self, policy, version: int) -> None:
        self.params.publish(policy, version)
        if not self.central:  # central inference: the driver acts, and the caches are never read
            self.caches.announce(version, [self.params.ref])  # an unroll already granted starts on this one

    def metrics(self, wait_s: float = 0.0) -> dict:
        """`params/copies_per_version`: copies of the average version the caches fetched (about one per node, and
        one per cell of a tree); `params/learner_copies_per_version`: those the learner sent (at most the fan-out)."""
        if self.final_metrics is not None:
            return dict(self.final_metrics)
        stats = self.caches.stats(wait_s)
        fetches = [s["fetches"] for s in stats if s["fetches"]]
        versions = max(fetches) if fetches else 0
        copies = sum(fetches) / versions if versions else 0.0
        from_learner = sum(s["fetches_from_learner"] for s in stats) / versions if versions else 0.0
        return {"transport/bytes_per_env_slot": self.buffers.bytes_per_env_slot,
                "params/bytes_per_version": copies * self.params.nbytes,
                "params/copies_per_version": copies,
                "params/learner_copies_per_version": from_learner,
                "params/cache_reads": sum(s["reads"] for s in stats),
                "params/cache_late": sum(s["late"] for s in stats),
                "params/cache_fallbacks": sum(s["fallbacks"] for s in stats),
                "params/caches": len(stats)}

    def shutdown(self, handles: list) -> None:
        self.nodes.stop()
        self.caches.stats(wait_s=2.0)
        self.final_metrics = self.metrics(wait_s=2.0)
        for actor_id in list(self.actors):
            self.release(actor_id)
        self.caches.kill_all()
        if self.chunks is not None:
            self.chunks.kill_all()


class ReplayShard:
    """One node's share of the replay on Ray (pinned there, num_cpus=0): the observations of the chunks its actors
    wrote, by slot. The learner keeps each item's index entry (slot, t, b, ..., priority, the limiter's counts)
    and asks a shard only for a batch's observations, so the bulk of the replay never leaves its node until it
    is sampled."""

    def __init__(self):
        self.chunks: dict[int, dict[str, np.ndarray]] = {}

    def write(self, slot: int, obs: dict) -> None:
        self.chunks[slot] = {name: np.array(array) for name, array in obs.items()}  # its own copy, not the store's

    def load(self, chunks: dict) -> None:
        """Chunks restored from a checkpoint: {slot: {field: array}}."""
        for slot, obs in chunks.items():
            self.write(slot, obs)

    def drop(self, slots: list[int]) -> None:
        for slot in slots:
            self.chunks.pop(slot, None)

    def gather(self, slot: np.ndarray, steps: np.ndarray, b: np.ndarray) -> dict:
        """{field: obs[slot, steps[i, k], b] [N, K, ...]} for each item i, in the order given."""
        missing = sorted(set(slot.tolist()) - set(self.chunks))
        if missing:
            raise KeyError(f"this replay shard holds no chunk for slot(s) {missing}: they were written elsewhere")
        out = {}
        for name, first in self.chunks[int(slot[0])].items():
            obs = np.empty((*steps.shape, *first.shape[2:]), first.dtype)
            for s in np.unique(slot):
                rows = np.flatnonzero(slot == s)
                obs[rows] = self.chunks[int(s)][name][steps[rows], b[rows, None]]
            out[name] = obs
        return out

    def dump(self, slots: list[int]) -> dict:
        return {slot: self.chunks[slot] for slot in slots if slot in self.chunks}

    def stats(self) -> dict:
        return {"bytes": sum(a.nbytes for obs in self.chunks.values() for a in obs.values()),
                "chunks": len(self.chunks)}


class RayChunks:
    """The replay's chunks on Ray (`menger.core.ChunkStore`): per-step fields in the learner, observations in one
    `ReplayShard` per node, beside the actors that wrote them.

        write(slot, actor, node, obs_ref)   after an unroll's fields are copied: the node's shard takes the
                                            observations from its own object store (the learner never fetches them)
        request(slot, steps, b)             one `gather` call per node the batch touches, as object references: the
                                            coordinator asks for the next batch while the learner steps on this one
        fetch(request)                      the observations; a shard whose node died is forgotten, with its chunks
                                            (`take_lost`), and the batch goes on with the items still stored

    Replay shard k of the tables is the chunks of the k-th node seen, modulo `replay.shards`, so with as many shards
    as nodes each node's actors fill their own shard. Every call the learner makes to a shard runs in the order it
    was made, so a gather always sees the chunk as it was when its items were sampled.
    """

    prefetch = True
    fixed_shards = False

    def __init__(self, spec: UnrollSpec, buffers: UnrollBuffers):
        self.tensors = buffers.tensors
        self.num_slots = buffers.num_slots
        self.nbytes = sum(t.numel() * t.element_size() for t in self.tensors.values())
        self.obs_fields = {name: shape_dtype for name, shape_dtype in spec.field_shapes().items()
                           if is_observation(name)}
        self.shards: dict[str, object] = {}
        self.nodes: list[str] = []           # node ids in the order their shard was made: shard k is nodes[k]
        self.location: dict[int, str] = {}   # slot -> the node whose shard holds its observations
        self.actor_node: dict[int, str] = {}
        self.lost: list[int] = []
        self._asked: list = []
        self._latest: dict[str, dict] = {}
        self._final: dict | None = None

    # ----- where chunks live ------------------------------------------------------------------------------------
    def _shard(self, node_id: str):
        if node_id not in self.shards:
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            self.shards[node_id] = ray.remote(ReplayShard).options(
                num_cpus=0, scheduling_strategy=strategy, max_concurrency=1).remote()
            if node_id not in self.nodes:
                self.nodes.append(node_id)
        return self.shards[node_id]

    def write(self, slot: int, actor_id: int, node_id: str, obs) -> None:
        old = self.location.get(slot)
        if old is not None and old != node_id and old in self.shards:
            self.shards[old].drop.remote([slot])  # the actor moved: its old copy of the slot is stale
        self._shard(node_id).write.remote(slot, obs)
        self.location[slot], self.actor_node[actor_id] = node_id, node_id

    def shard_of(self, actor_id: int, shards: int) -> int:
        node = self.actor_node.get(actor_id)
        return (self.nodes.index(node) if node in self.nodes else actor_id) % shards

    def forget_nodes_except(self, alive: set[str]) -> None:
        for node_id in [n for n in self.shards if n not in alive]:
            self._node_lost(node_id)

    def _node_lost(self, node_id: str) -> None:
        shard = self.shards.pop(node_id, None)
        if shard is not None:
            try:
                ray.kill(shard)
            except RayError:
                pass
        slots = [slot for slot, node in self.location.items() if node == node_id]
        for slot in slots:
            del self.location[slot]
        self.lost += slots
        log.warning("the replay shard on node %s is gone with %d chunk(s); training goes on with the others",
                    node_id[:12], len(slots))

    def take_lost(self) -> list[int]:
        lost, self.lost = self.lost, []
        return lost

    # ----- batches ----------------------------------------------------------------------------------------------
    def request(self, slot: torch.Tensor, steps: torch.Tensor, b: torch.Tensor):
        slots, steps, b = slot.numpy(), steps.numpy(), b.numpy()
        where = np.array([self.location.get(int(s), "") for s in slots], dtype=object)
        groups = []
        for node_id in set(where.tolist()) - {""}:
            rows = np.flatnonzero(where == node_id)
            ref = self.shards[node_id].gather.remote(slots[rows], steps[rows], b[rows])
            groups.append((node_id, rows, ref))
        missing = np.flatnonzero(where == "")
        return steps.shape, groups, missing, sorted(set(slots[missing].tolist()))

    def fetch(self, request) -> tuple:
        shape, groups, missing, missing_slots = request
        kept = np.ones(shape[0], bool)
        kept[missing] = False
        self.lost += missing_slots  # items naming a chunk no shard holds (its node died): forget them too
        obs = {name: np.zeros((*shape, *field_shape[2:]), _numpy_dtype(dtype))
               for name, (field_shape, dtype) in self.obs_fields.items()}
        for node_id, rows, ref in groups:
            try:
                part = ray.get(ref, timeout=GET_TIMEOUT_S)
            except (RayError, GetTimeoutError):
                self._node_lost(node_id)
                kept[rows] = False
                continue
            for name, array in part.items():
                obs[name][rows] = array
        return _as_obs(obs, kept), None if kept.all() else kept

    # ----- checkpoints and metrics --------------------------------------------------------------------------
    def state(self, slots: list[int]) -> dict[str, torch.Tensor]:
        """Every field of every slot, in the layout of one host's slots: the observations of `slots` are fetched
        from their shards (a shard that does not answer is forgotten, with its chunks)."""
        out = dict(self.tensors)
        for name, (shape, dtype) in self.obs_fields.items():
            out[name] = torch.zeros((self.num_slots, *shape), dtype=dtype)
        by_node: dict[str, list[int]] = {}
        for slot in slots:
            if slot in self.location:
                by_node.setdefault(self.location[slot], []).append(slot)
        refs = {node_id: self.shards[node_id].dump.remote(held) for node_id, held in by_node.items()}
        for node_id, ref in refs.items():
            try:
                chunks = ray.get(ref, timeout=GET_TIMEOUT_S)
            except (RayError, GetTimeoutError):
                self._node_lost(node_id)
                continue
            for slot, obs in chunks.items():
                for name, array in obs.items():
                    out[name][slot].numpy()[...] = array
        return out

    def load(self, chunks: dict, slots: list[int]) -> None:
        """A checkpoint's chunks: the per-step fields here, the observations of `slots` into this node's shard."""
        for name, tensor in self.tensors.items():
            tensor.copy_(check_saved_chunks(chunks, name, tuple(tensor.shape)))
        for name, (shape, _) in self.obs_fields.items():
            check_saved_chunks(chunks, name, (self.num_slots, *shape))
        home = ray.get_runtime_context().get_node_id()
        restored = {slot: {name: chunks[name][slot].numpy() for name in self.obs_fields} for slot in slots}
        if restored:
            ray.get(self._shard(home).load.remote(restored), timeout=GET_TIMEOUT_S)
        for slot in slots:
            self.location[slot] = home

    def metrics(self, wait_s: float = 0.0) -> dict:
        """The observations each node's shard holds, as of its previous answer (or `wait_s` for this one's)."""
        if self._final is not None:
            return dict(self._final)
        if self._asked:
            ready, _ = ray.wait([ref for _, ref in self._asked], num_returns=len(self._asked), timeout=wait_s)
            for node_id, ref in self._asked:
                if ref in ready:
                    try:
                        self._latest[node_id] = ray.get(ref, timeout=GET_TIMEOUT_S)
                    except RayError:
                        self._latest.pop(node_id, None)
        self._asked = [(node_id, shard.stats.remote()) for node_id, shard in self.shards.items()]
        out = {"replay/nodes": len(self.shards)}
        for node_id, stats in self._latest.items():
            if node_id in self.shards:
                out[f"replay/node{self.nodes.index(node_id)}_bytes"] = stats["bytes"]
        out["replay/shard_bytes"] = sum(v for k, v in out.items() if k.endswith("_bytes"))
        return out

    def kill_all(self) -> None:
        """The run is over: the figures as of now stay (the trainer writes its closing record after Ray is gone)."""
        self.metrics()
        self._final = self.metrics(wait_s=2.0)
        for shard in self.shards.values():
            try:
                ray.kill(shard)
            except RayError:
                pass
        self.shards.clear()


def _numpy_dtype(dtype: torch.dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def _as_obs(arrays: dict, kept: np.ndarray):
    """One observation tensor, or a dict of them (Dict observations, keyed without the `obs.` prefix)."""
    picked = {name: torch.from_numpy(array if kept.all() else array[kept]) for name, array in arrays.items()}
    if "obs" in picked:
        return picked["obs"]
    return {name[4:]: tensor for name, tensor in picked.items()}
