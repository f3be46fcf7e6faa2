"""Emulated actors: thousands of logical actors from a few host processes, against the real learner side.

Scale is measured on a small machine by keeping everything on the learner's side real (trainer, coordinator,
supervisor, `LocalTransport` with its pipes, heartbeats, generation fence and shared parameters) and making only
the actors cheap. An emulated host is one forked process that runs K virtual actors in one event loop. Each
virtual actor is what the learner expects of an actor: its own pipe (handed to the host as a file descriptor),
id, incarnation and sequence numbers, slots it is granted, a heartbeat and a per-unroll frame counter in shared
memory. Its "env" is a clock: an unroll of T x B frames takes T x B / `frames_per_s` seconds, and its data is what
the slot already holds, a template written once (`fill_template`: random observations, every row a valid step);
no env runs, and the learner or the replay does its usual work on those tensors.

    learner (Trainer, unchanged)                          emulated host h (one process, K virtual actors)
    transport.start_actor(a) -> pipe, launcher.start_actor  --(start a, incarnation, fd)-->  actor a joins the loop
    grant(a, slot)            --("grant", slot)-->          a: busy for T x B / frames_per_s s, heartbeat each 0.1 s
    receive()                 <--("unroll", slot, meta)--   meta: a's incarnation, next sequence, params version
    handle.kill()             --(kill a)-->                 a leaves the loop (exit code -9)
    kill the host process: all its actors die at once; the next start of one of them starts a new host

A host writes each of its actors' state into a shared array (`status[a]`: the running incarnation's generation,
0 when none), which is what the handles read; a host that is gone makes all its actors dead. Actors are spread
over hosts in blocks (actors 0..K-1 on host 0, ...), as real machines hold them.
"""
from __future__ import annotations

import heapq
import multiprocessing as mp
import os
import pickle
import selectors
import signal
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from menger.config import ConfigError
from menger.core import UnrollMeta
from menger.forking import FORK_GATE
from menger.inference import LocalInference
from menger.launch.local import LocalLauncher

BEAT_S = 0.1  # at most this long between a host's heartbeat writes (one vectorised write for all its actors)
KILLED = -9


class VirtualFleet:
    """What every emulated fleet shares: its settings checked, and actors spread over `hosts` in blocks (actors
    0..K-1 on host 0, ...), as real machines hold them."""

    runtime: Any

    def _fleet(self, runtime, hosts: int, frames_per_s: float) -> None:
        if not 1 <= hosts <= runtime.actors:
            raise ConfigError(f"emulated hosts: give 1 to runtime.actors={runtime.actors}, not {hosts}")
        if frames_per_s <= 0:
            raise ConfigError(f"emulated frames_per_s must be > 0, not {frames_per_s}")
        if runtime.inference.mode != "local":
            raise ConfigError("emulated actors compute no actions: use runtime.inference.mode=local")
        self.hosts, self.frames_per_s = hosts, frames_per_s

    def host_of(self, actor_id: int) -> int:
        return actor_id * self.hosts // self.runtime.actors

    def actors_of(self, host: int) -> range:
        n, h = self.runtime.actors, self.hosts
        return range(-(-host * n // h), -(-(host + 1) * n // h))


class EmulatedLauncher(VirtualFleet, LocalLauncher):
    """`hosts` processes running `runtime.actors` virtual actors between them, each making `frames_per_s` env
    frames per second. Local inference only (a virtual actor computes nothing)."""

    name = "emulated"
    separate_processes = True  # the learner's side is the processes launcher's: its pipe ends are closed here

    def __init__(self, runtime, hosts: int = 1, frames_per_s: float = 10_000.0):
        super().__init__(runtime)
        self.context = mp.get_context("fork")
        self._fleet(runtime, hosts, frames_per_s)
        self.status = torch.zeros(runtime.actors, dtype=torch.int64).share_memory_()  # generation running, 0: none
        self.exitcodes = torch.zeros(runtime.actors, dtype=torch.int64).share_memory_()
        self.transport: Any = None  # LocalTransport, made by make_transport
        self.host_processes: list = [None] * hosts
        self.controls: list[Any] = [None] * hosts  # socket.socket per host once it started
        self.host_starts = 0  # host processes started, replacements included

    @property
    def local_actors(self) -> int:
        return self.hosts  # what shares the learner's cores: the host processes

    def make_transport(self, spec, policy, slots_per_actor: int):
        self.transport = super().make_transport(spec, policy, slots_per_actor)
        fill_template(self.transport.buffers.tensors, self.runtime.seed)
        return self.transport

    def start_inference(self, policy, transport, device):
        return LocalInference()

    def start_actor(self, target, kwargs: dict) -> "EmulatedHandle":
        """`target` (the real actor's entry point) is not run: the actor's host runs a virtual one on its pipe."""
        port, actor_id = kwargs["port"], kwargs["actor_id"]
        host = self._live_host(self.host_of(actor_id), starting=port.conn)
        self.status[actor_id] = port.my_generation  # running from now on, as a started process is
        message = pickle.dumps(("start", actor_id, kwargs["incarnation"], port.my_generation))
        try:
            socket.send_fds(self.controls[host], [message], [port.conn.fileno()])
        except OSError:  # the host died just now: the actor is dead, and the next start makes a new host
            self.status[actor_id] = 0
            self.exitcodes[actor_id] = KILLED
        return EmulatedHandle(self, host, actor_id, port.my_generation)

    def kill_host(self, host: int) -> None:
        """Chaos: the whole host dies at once (SIGKILL), as a lost machine does."""
        process = self.host_processes[host]
        if process is not None and process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
            process.join(5.0)

    def _live_host(self, host: int, starting=None) -> int:
        process = self.host_processes[host]
        if process is None or not process.is_alive():
            self._start_host(host, starting)
        return host

    def _start_host(self, host: int, starting=None) -> None:
        """A new host process. The fork copies every pipe end and control socket the learner holds, and the actor
        end of the actor being started (`starting`): the host closes those copies first, or an actor end it still
        held would keep the learner from seeing that actor's pipe close when the actor dies (found only by the
        supervisor's rotation, seconds later in a large fleet)."""
        if self.controls[host] is not None:
            self.controls[host].close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for actor_id in self.actors_of(host):  # a new machine: nothing of the old one runs
            if self.status[actor_id]:
                self.status[actor_id], self.exitcodes[actor_id] = 0, KILLED
        copies = [ours, *[control for other, control in enumerate(self.controls) if control and other != host],
                  *self.transport.conns.values(), *([starting] if starting else [])]
        host_loop = EmulatedHost(self.transport, self.status, self.exitcodes, theirs, self.frames_per_s,
                                 parent_pid=os.getpid(), close_first=copies)
        process = self.context.Process(target=host_loop.run, daemon=True, name=f"menger-emulated-host-{host}")
        with FORK_GATE.forking():
            process.start()
        theirs.close()
        self.host_processes[host], self.controls[host] = process, ours
        self.host_starts += 1

    def send(self, host: int, message: tuple) -> None:
        try:
            self.controls[host].send(pickle.dumps(message))
        except (OSError, AttributeError):
            pass  # the host is gone: its actors are dead already

    def host_alive(self, host: int) -> bool:
        process = self.host_processes[host]
        return process is not None and process.is_alive()

    def shutdown(self) -> None:
        for host, process in enumerate(self.host_processes):
            if process is None:
                continue
            self.send(host, ("exit",))
            process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join(2.0)
            if self.controls[host] is not None:
                self.controls[host].close()
                self.controls[host] = None


def fill_template(tensors: dict, seed: int) -> None:
    """What every slot holds for the whole run (virtual actors write nothing): observations drawn once, every row a
    valid transition, action 0, reward 0, no episode end, so a learner or a replay has real work to do on it."""
    generator = torch.Generator().manual_seed(seed)
    for name, tensor in tensors.items():
        if name == "valid":
            tensor.fill_(1.0)
        elif name == "obs" or name.startswith("obs."):
            if tensor.dtype.is_floating_point:
                tensor.copy_(torch.randn(tensor.shape, generator=generator))
            else:
                tensor.copy_(torch.randint(0, 255, tensor.shape, generator=generator).to(tensor.dtype))


class EmulatedHandle:
    """One virtual actor incarnation, as the supervisor sees an actor: alive, killable, joinable, an exit code."""

    def __init__(self, launcher: EmulatedLauncher, host: int, actor_id: int, generation: int):
        self.launcher, self.host, self.actor_id, self.generation = launcher, host, actor_id, generation

    @property
    def pid(self) -> int | None:
        process = self.launcher.host_processes[self.host]
        return None if process is None else process.pid

    def is_alive(self) -> bool:
        return int(self.launcher.status[self.actor_id]) == self.generation and self.launcher.host_alive(self.host)

    def kill(self) -> None:
        self.launcher.send(self.host, ("kill", self.actor_id, self.generation))

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)

    @property
    def exitcode(self) -> int | None:
        if self.is_alive():
            return None
        if not self.launcher.host_alive(self.host):
            return KILLED
        return int(self.launcher.exitcodes[self.actor_id])


@dataclass
class VirtualActor:
    actor_id: int
    incarnation: int
    generation: int
    conn: Connection
    sequence: int = 0
    slots: list[int] = field(default_factory=list)  # granted, not yet filled
    started: float = 0.0                             # when the unroll in progress began (0: none)


class EmulatedHost:
    """The loop of one emulated host process: virtual actors on their pipes, a clock for their envs."""

    def __init__(self, transport, status, exitcodes, control: socket.socket, frames_per_s: float, *,
                 parent_pid: int, close_first=()):
        self.transport, self.status, self.exitcodes = transport, status, exitcodes
        self.control, self.parent_pid, self.close_first = control, parent_pid, close_first
        spec = transport.buffers.spec
        self.frames = spec.unroll_length * spec.envs_per_actor
        self.unroll_s = self.frames / frames_per_s
        # often enough that a partial unroll's frames are known when the host dies, as a real actor's per step are
        self.beat_s = max(0.005, min(BEAT_S, self.unroll_s / 8))
        self.actors: dict[int, VirtualActor] = {}
        self.timers: list[tuple[float, int, int]] = []  # (done at, actor, generation)

    def run(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the learner stops us, after its checkpoint
            signal.signal(signum, signal.SIG_IGN)
        for sock in self.close_first:
            sock.close()
        torch.set_num_threads(1)
        self.heartbeat, self.progress = self.transport.heartbeat.numpy(), self.transport.progress_frames.numpy()
        self.generations, self.stop = self.transport.generation.numpy(), self.transport.stop_flag.numpy()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.control, selectors.EVENT_READ, None)
        next_beat = 0.0
        try:
            while not self.stop[0] and os.getppid() == self.parent_pid:
                now = time.time()
                if now >= next_beat:
                    self._beat(now)
                    next_beat = now + self.beat_s
                wait = min(next_beat, self.timers[0][0] if self.timers else next_beat) - now
                for key, _ in self.selector.select(max(0.0, wait)):
                    if key.data is None:
                        if not self._control():
                            return
                    else:
                        self._messages(key.data)
                self._finish_due(time.time())
        finally:
            os._exit(0)

    # ----- the learner's words ------------------------------------------------------------------------------
    def _control(self) -> bool:
        """A start or a kill from the launcher; False: the host is to exit."""
        try:
            data, fds, _, _ = socket.recv_fds(self.control, 4096, 1)
        except OSError:
            return False
        if not data:  # the launcher closed its end
            return False
        message = pickle.loads(data)
        if message[0] == "start":
            _, actor_id, incarnation, generation = message
            self._leave(actor_id, KILLED)  # an older incarnation still here was replaced
            actor = VirtualActor(actor_id, incarnation, generation, Connection(fds[0]))
            self.actors[actor_id] = actor
            self.selector.register(actor.conn, selectors.EVENT_READ, actor_id)
            self.heartbeat[actor_id], self.progress[actor_id] = time.time(), 0
        elif message[0] == "kill":
            _, actor_id, generation = message
            running = self.actors.get(actor_id)
            if running is not None and running.generation == generation:
                self._leave(actor_id, KILLED)
        elif message[0] == "exit":
            return False
        return True

    def _messages(self, actor_id: int) -> None:
        actor = self.actors.get(actor_id)
        if actor is None:
            return
        try:
            while actor.conn.poll():
                message = actor.conn.recv()
                if message[0] == "grant":
                    actor.slots.append(message[1])
                elif message[0] == "snapshot":
                    actor.conn.send(("snapshot", {}))
                elif message[0] == "stop":
                    self._leave(actor_id, 0)
                    return
        except (EOFError, OSError):  # the learner released the pipe: this incarnation is over
            self._leave(actor_id, 0)
            return
        self._begin(actor, time.time())

    # ----- the virtual env ----------------------------------------------------------------------------------
    def _begin(self, actor: VirtualActor, now: float) -> None:
        if actor.started or not actor.slots:
            return
        actor.started = now
        heapq.heappush(self.timers, (now + self.unroll_s, actor.actor_id, actor.generation))

    def _finish_due(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, actor_id, generation = heapq.heappop(self.timers)
            actor = self.actors.get(actor_id)
            if actor is None or actor.generation != generation or not actor.started:
                continue
            if self.generations[actor_id] != generation:  # replaced while we were slow: the fence, as `beat`
                self._leave(actor_id, 1)
                continue
            slot = actor.slots.pop(0)
            actor.sequence += 1
            meta = UnrollMeta(actor_id, actor.incarnation, actor.sequence, self.transport.params.version(),
                              self.frames)
            actor.started, self.progress[actor_id] = 0.0, 0
            try:
                actor.conn.send(("unroll", slot, meta))
            except OSError:
                self._leave(actor_id, 0)
                continue
            self._begin(actor, now)

    def _beat(self, now: float) -> None:
        """Every actor's heartbeat and, for those mid-unroll, the frames written so far: one write each."""
        if not self.actors:
            return
        ids = np.fromiter(self.actors, dtype=np.int64, count=len(self.actors))
        started = np.fromiter((a.started for a in self.actors.values()), dtype=np.float64, count=len(ids))
        self.heartbeat[ids] = now
        done = np.clip((now - started) / self.unroll_s, 0.0, 1.0) * (started > 0)
        self.progress[ids] = (done * self.frames).astype(np.int64)

    def _leave(self, actor_id: int, exitcode: int) -> None:
        actor = self.actors.pop(actor_id, None)
        if actor is None:
            return
        try:
            self.selector.unregister(actor.conn)
        except (KeyError, ValueError):
            pass
        actor.conn.close()
        if int(self.status[actor_id]) == actor.generation:
            self.exitcodes[actor_id] = exitcode
            self.status[actor_id] = 0
