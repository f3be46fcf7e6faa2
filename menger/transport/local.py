"""The local transport (threads and processes launchers): pipes, shared-memory slots, one parameter copy per host.

The trainer drives it through `menger.core.Transport`; each actor gets an `ActorLinks`, its port:

    learner                                          actor (a thread, or a forked process)
    grant(actor, slot)  --("grant", slot)-->         wait_for_grant() -> slot
                                                     writes T x B steps into buffers.slot(slot), beat() per step
    receive()           <--("unroll", slot, meta)--  submit(slot, meta)
    publish(version)    -> SharedParameters          LocalActions.refresh() copies it when the version moved

Only slot indices and tags cross a pipe; observations and actions never get pickled. Each incarnation gets a
fresh pipe, and `release` closes a lost one's, so nothing from an old incarnation arrives after its
replacement started; a generation counter in shared memory fences a stalled thread that wakes up later.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import selectors
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from menger.children import stop_children
from menger.core import UnrollMeta
from menger.params import SharedParameters
from menger.transport.shm import SlotChunks, UnrollBuffers, UnrollSpec


class Superseded(RuntimeError):
    """This incarnation was replaced; it must not touch shared state any more."""


class LearnerGone(RuntimeError):
    """The learner stopped answering: the actor exits instead of waiting forever."""


@dataclass
class ActorLinks:
    """The local port: shared memory and a private pipe to the learner (threads and processes launchers)."""

    buffers: Any          # UnrollBuffers
    params: Any           # SharedParameters
    conn: Any             # multiprocessing Connection (duplex) to the learner
    heartbeat: torch.Tensor  # float64 [num_actors]: wall time of each actor's last sign of life
    progress: torch.Tensor   # int64 [num_actors]: frames written into the current, unfinished unroll
    stop: torch.Tensor       # uint8 [1]: set by the learner at shutdown
    parent_pid: int | None = None  # processes launcher: exit when the learner process is gone
    generation: torch.Tensor | None = None  # int64 [num_actors]: the current incarnation's start count, per actor
    my_generation: int = 0

    def __post_init__(self):
        self._heartbeat, self._progress = self.heartbeat.numpy(), self.progress.numpy()  # cheap per-step writes
        self._generation = self.generation.numpy() if self.generation is not None else None

    def slot(self, index: int) -> dict[str, torch.Tensor]:
        return self.buffers.slot(index)

    def num_slots(self) -> int:
        return self.buffers.num_slots

    def beat(self, actor_id: int, frames_in_unroll: int) -> None:
        """Sign of life; also the fence: an incarnation that has been replaced (a stalled thread that woke up,
        which cannot be killed) stops here, before it writes into slots that now belong to its successor."""
        if self._generation is not None and self._generation[actor_id] != self.my_generation:
            raise Superseded(f"actor {actor_id}: replaced by a newer incarnation while stalled; stopping")
        self._heartbeat[actor_id] = time.time()
        self._progress[actor_id] = frames_in_unroll

    def submit(self, slot: int, meta: UnrollMeta) -> None:
        self.conn.send(("unroll", slot, meta))

    def wait_for_grant(self, actor_id: int, snapshot: Callable[[], dict], timeout_s: float) -> int | None:
        """Block until the learner grants a slot; answer snapshot requests; never wait without a deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.heartbeat[actor_id] = time.time()
            if self.stop[0]:
                return None
            if self.conn.poll(0.05):
                message = self.conn.recv()
                if message[0] == "grant":
                    return message[1]
                if message[0] == "snapshot":
                    self.conn.send(("snapshot", snapshot()))
                elif message[0] == "stop":
                    return None
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline or self._learner_process_gone():
                raise LearnerGone(f"actor {actor_id}: no word from the learner for {timeout_s:.0f} s")

    def _learner_process_gone(self) -> bool:
        return self.parent_pid is not None and os.getppid() != self.parent_pid



class LocalTransport:
    """Actors on this host (threads or forked processes): a private pipe each, slots and params in shared memory."""

    def __init__(self, launcher, spec: UnrollSpec, policy, num_actors: int, slots_per_actor: int,
                 startup_grace_s: float, *, separate_processes: bool):
        """`launcher.start_actor(target, kwargs)` places each actor; `separate_processes`: actors are forked
        processes (they watch for the learner's process to vanish, and the learner closes their pipe ends)."""
        self.launcher, self.startup_grace_s = launcher, startup_grace_s
        self.separate_processes = separate_processes
        self.buffers = UnrollBuffers(spec, num_actors * slots_per_actor, shared=True)
        self.params = SharedParameters(policy, shared=True)
        self.heartbeat = torch.zeros(num_actors, dtype=torch.float64).share_memory_()
        self.progress_frames = torch.zeros(num_actors, dtype=torch.int64).share_memory_()
        self.stop_flag = torch.zeros(1, dtype=torch.uint8).share_memory_()
        self.generation = torch.zeros(num_actors, dtype=torch.int64).share_memory_()  # fences stale incarnations
        self.conns: dict[int, object] = {}
        # every live pipe, registered once: a receive costs what the ready pipes cost, not one call per actor
        self.selector = selectors.DefaultSelector()
        self.ended: set[int] = set()  # actors whose pipe closed at their end: the supervisor asks them at once

    def start_actor(self, actor_id: int, actor_kwargs: dict):
        learner_end, actor_end = mp.Pipe(duplex=True)
        processes = self.separate_processes
        self.generation[actor_id] += 1
        links = ActorLinks(self.buffers, self.params, actor_end, self.heartbeat, self.progress_frames, self.stop_flag,
                           parent_pid=os.getpid() if processes else None, generation=self.generation,
                           my_generation=int(self.generation[actor_id]))
        self.release(actor_id)  # a restart that was not retired first (the supervisor always retires)
        self.conns[actor_id] = learner_end
        self.selector.register(learner_end, selectors.EVENT_READ, actor_id)
        self.heartbeat[actor_id] = time.time() + self.startup_grace_s
        self.progress_frames[actor_id] = 0
        handle = self.launcher.start_actor(run_actor, dict(actor_kwargs, port=links, single_thread=processes))
        if processes:
            actor_end.close()
        return handle

    def grant(self, actor_id: int, slot: int) -> bool:
        try:
            self.conns[actor_id].send(("grant", slot))
            return True
        except (KeyError, OSError, ValueError):  # the actor is gone; supervision restarts it and re-grants
            return False

    def request_snapshot(self, actor_id: int) -> None:
        try:
            self.conns[actor_id].send(("snapshot",))
        except (KeyError, OSError, ValueError):
            pass

    def receive(self, timeout: float) -> list[tuple[int, tuple]]:
        """What the actors with something to say sent, waiting up to `timeout` s for the first; a pipe whose actor
        is gone (closed at its end) stays quiet here until supervision retires it."""
        if not self.conns:
            time.sleep(timeout)
            return []
        received: list[tuple[int, tuple]] = []
        for key, _ in self.selector.select(timeout):
            actor_id = key.data
            messages = self.drain(actor_id)
            if not messages:  # readable with nothing to read: the other end is closed; stop watching it
                self._unwatch(actor_id)
                self.ended.add(actor_id)
            received.extend((actor_id, message) for message in messages)
        return received

    def drain(self, actor_id: int) -> list[tuple]:
        conn, messages = self.conns.get(actor_id), []
        try:
            while conn is not None and conn.poll():
                messages.append(conn.recv())
        except (EOFError, OSError):
            pass
        return messages

    def silent_for(self, actor_id: int) -> float:
        return time.time() - float(self.heartbeat[actor_id])

    def silent(self, seconds: float) -> list[int]:
        """Every actor whose last heartbeat is more than `seconds` old, in one vectorised look."""
        return np.flatnonzero(time.time() - self.heartbeat.numpy() > seconds).tolist()

    def closed(self) -> list[int]:
        """The actors whose pipe closed at their end since they started (until they are released)."""
        return list(self.ended)

    def frames_in_flight(self, actor_id: int) -> int:
        return int(self.progress_frames[actor_id])

    def release(self, actor_id: int) -> None:
        """Close a lost actor's pipe: nothing from that incarnation can arrive after its replacement starts."""
        self._unwatch(actor_id)
        self.ended.discard(actor_id)
        conn = self.conns.pop(actor_id, None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def _unwatch(self, actor_id: int) -> None:
        conn = self.conns.get(actor_id)
        if conn is not None:
            try:
                self.selector.unregister(conn)
            except (KeyError, ValueError, OSError):  # not watched any more, or already closed
                pass

    def gather(self, slots: list[int]) -> dict:
        return self.buffers.gather(slots)

    def chunk_store(self) -> SlotChunks:
        """The replay's chunks: these slots, in shared memory."""
        return SlotChunks(self.buffers)

    def publish(self, policy, version: int) -> None:
        self.params.publish(policy, version)

    def metrics(self) -> dict:
        return {"transport/bytes_per_env_slot": self.buffers.bytes_per_env_slot,
                "params/bytes_per_version": self.params.nbytes, "params/copies_per_version": 1}

    def shutdown(self, handles: list) -> None:
        """Ask every actor to stop, wait a little, then kill what is left."""
        self.stop_flag[0] = 1
        stop_children(handles, message=None)  # they read the stop flag: no pipe message needed
        for actor_id in list(self.conns):
            self.release(actor_id)
        self.selector.close()


def run_actor(build, single_thread: bool = True, **actor_kwargs) -> None:
    """Entry point of an actor thread or process: `build(**actor_kwargs)` (the runtime's factory, handed over in
    the actor's keywords) makes the actor, then its loop runs until the learner stops it."""
    if single_thread:
        torch.set_num_threads(1)
    actor = build(**actor_kwargs)
    try:
        actor.run()
    finally:
        actor.envs.close()
