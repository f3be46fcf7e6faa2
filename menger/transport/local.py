"""The trainer's side of the link to its actors, and the local implementation (one host).

Every transport answers the same few calls, so the trainer's loop does not know where its actors run::

    handle = transport.start_actor(actor_id, actor_kwargs)     # a thread, a process or a Ray actor
    transport.grant(actor_id, slot)                            # the actor may fill `slot` (back-pressure)
    for actor_id, message in transport.receive(timeout):       # ("unroll", slot, meta) | ("error", text, tb)
        ...                                                    # | ("snapshot", state)
    batch = transport.gather(slots)                            # the accepted unrolls as one batch
    transport.publish(policy, version)                         # actors pull it when their version is older
    transport.silent_for(actor_id), transport.frames_in_flight(actor_id)   # liveness, frames a death loses

`LocalTransport` is pipes + shared-memory slots (`UnrollBuffers`) + `SharedParameters`: only slot indices and
tags cross a pipe. The Ray transport (`menger.transport.ray`) keeps the same calls with object references.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait as wait_connections
from typing import Protocol

import torch

from menger.actors import ActorLinks, run_actor
from menger.params import SharedParameters
from menger.transport.shm import UnrollBuffers, UnrollSpec


class Transport(Protocol):
    """The trainer's link to its actors (see the module docstring for the loop that drives it)."""

    def start_actor(self, actor_id: int, actor_kwargs: dict): ...

    def grant(self, actor_id: int, slot: int) -> bool: ...

    def receive(self, timeout: float) -> list[tuple[int, tuple]]: ...

    def drain(self, actor_id: int) -> list[tuple]: ...

    def request_snapshot(self, actor_id: int) -> None: ...

    def silent_for(self, actor_id: int) -> float: ...

    def frames_in_flight(self, actor_id: int) -> int: ...

    def release(self, actor_id: int) -> None: ...

    def gather(self, slots: list[int]) -> dict: ...

    def publish(self, policy, version: int) -> None: ...

    def metrics(self) -> dict: ...

    def shutdown(self, handles: list) -> None: ...


class LocalTransport:
    """Actors on this host (threads or forked processes): a private pipe each, slots and params in shared memory."""

    def __init__(self, launcher, spec: UnrollSpec, policy, num_actors: int, slots_per_actor: int,
                 startup_grace_s: float):
        self.launcher, self.startup_grace_s = launcher, startup_grace_s
        self.buffers = UnrollBuffers(spec, num_actors * slots_per_actor, shared=True)
        self.params = SharedParameters(policy, shared=True)
        self.heartbeat = torch.zeros(num_actors, dtype=torch.float64).share_memory_()
        self.progress_frames = torch.zeros(num_actors, dtype=torch.int64).share_memory_()
        self.stop_flag = torch.zeros(1, dtype=torch.uint8).share_memory_()
        self.generation = torch.zeros(num_actors, dtype=torch.int64).share_memory_()  # fences stale incarnations
        self.conns: dict[int, object] = {}

    def start_actor(self, actor_id: int, actor_kwargs: dict):
        learner_end, actor_end = mp.Pipe(duplex=True)
        processes = self.launcher.name == "processes"
        self.generation[actor_id] += 1
        links = ActorLinks(self.buffers, self.params, actor_end, self.heartbeat, self.progress_frames, self.stop_flag,
                           parent_pid=os.getpid() if processes else None, generation=self.generation,
                           my_generation=int(self.generation[actor_id]))
        self.conns[actor_id] = learner_end
        self.heartbeat[actor_id] = time.time() + self.startup_grace_s
        self.progress_frames[actor_id] = 0
        handle = self.launcher.start_actor(run_actor, dict(actor_kwargs, links=links,
                                                           single_thread=self.launcher.single_thread_actors))
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
        by_conn = {conn: actor_id for actor_id, conn in self.conns.items()}
        if not by_conn:
            time.sleep(timeout)
            return []
        return [(by_conn[conn], message) for conn in wait_connections(list(by_conn), timeout)
                for message in self.drain(by_conn[conn])]

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

    def frames_in_flight(self, actor_id: int) -> int:
        return int(self.progress_frames[actor_id])

    def release(self, actor_id: int) -> None:
        """Close a lost actor's pipe: nothing from that incarnation can arrive after its replacement starts."""
        conn = self.conns.pop(actor_id, None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def gather(self, slots: list[int]) -> dict:
        return self.buffers.gather(slots)

    def publish(self, policy, version: int) -> None:
        self.params.publish(policy, version)

    def metrics(self) -> dict:
        return {"transport/bytes_per_env_slot": self.buffers.bytes_per_env_slot,
                "params/bytes_per_version": self.params.nbytes, "params/copies_per_version": 1}

    def shutdown(self, handles: list) -> None:
        """Ask every actor to stop, wait a little, then kill what is left."""
        self.stop_flag[0] = 1
        deadline = time.monotonic() + 5.0
        for handle in handles:
            handle.join(max(0.0, deadline - time.monotonic()))
            if handle.is_alive():
                handle.kill()
                handle.join(1.0)
        for actor_id in list(self.conns):
            self.release(actor_id)
