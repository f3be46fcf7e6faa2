"""Local launchers: actors as threads of the learner's process, or as forked processes.

Both own the same transport (`LocalTransport`: a private pipe per actor, unroll slots and parameters in shared
memory) and the same central inference service (`CentralInference`, request slots in shared memory), so actor
and learner code is identical under either. Processes are forked (cheap to start; the shared tensors are
inherited, nothing is pickled) and run torch single-threaded.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
from typing import Callable

from menger.children import report_error
from menger.extras import require
from menger.core import InferenceBackend
from menger.forking import FORK_GATE
from menger.inference import CentralInference, InferenceSlots, LocalInference
from menger.transport.local import LocalTransport


class ThreadHandle:
    def __init__(self, thread: threading.Thread, conn):
        self.thread, self._conn = thread, conn
        self.pid = os.getpid()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def kill(self) -> None:
        """A thread cannot be killed: ask it to stop at its next wait."""
        try:
            self._conn.send(("stop",))
        except OSError:
            pass

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    @property
    def exitcode(self) -> int | None:
        return None if self.thread.is_alive() else 0


class ProcessHandle:
    def __init__(self, process):
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        if self.process.is_alive():
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def join(self, timeout: float) -> None:
        self.process.join(timeout)

    @property
    def exitcode(self) -> int | None:
        return self.process.exitcode


def _guarded(target: Callable, kwargs: dict) -> None:
    """Run an actor; report its exception to the learner over its pipe before dying."""
    try:
        target(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - the learner decides what a dead actor means
        report_error(kwargs["port"].conn, exc)
        raise


def _process_main(target: Callable, kwargs: dict) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # stopping is the learner's to handle: it
        signal.signal(signum, signal.SIG_IGN)                     # checkpoints first; actors exit after it
    try:
        _guarded(target, kwargs)
    except BaseException:  # noqa: BLE001 - already reported to the learner
        os._exit(1)
    os._exit(0)


class LocalLauncher:
    """What both local launchers share: their transport and their central inference service."""

    name = "local"
    separate_processes = False

    def __init__(self, runtime):
        """`runtime`: the experiment's `RuntimeConfig` (actors, seed, supervision and inference sections)."""
        self.runtime = runtime
        self.spec = None

    @property
    def local_actors(self) -> int:
        """Actors that share this host's cores with the learner."""
        return self.runtime.actors

    def make_transport(self, spec, policy, slots_per_actor: int) -> LocalTransport:
        self.spec = spec
        return LocalTransport(self, spec, policy, self.runtime.actors, slots_per_actor,
                              self.runtime.supervision.startup_grace_s, separate_processes=self.separate_processes)

    def start_inference(self, policy, transport: LocalTransport, device) -> InferenceBackend:
        """`runtime.inference.mode`: local (no service) or central (a thread here, request slots in shared memory)."""
        inference, spec = self.runtime.inference, self.spec
        if inference.mode != "central":
            return LocalInference()
        slots = InferenceSlots.allocate(self.runtime.actors, spec.envs_per_actor, spec.observation_space,
                                        spec.action_space, spec.lstm_size)
        return CentralInference(slots, policy, transport.params, device,
                                max_requests=inference.batch or self.runtime.actors,
                                timeout_s=inference.timeout_ms / 1000.0, seed=self.runtime.seed + 1).start()

    def shutdown(self) -> None:
        pass


class ThreadLauncher(LocalLauncher):
    name = "threads"

    def start_actor(self, target: Callable, kwargs: dict) -> ThreadHandle:
        def main():
            try:
                _guarded(target, kwargs)
            except BaseException:  # noqa: BLE001 - reported over the pipe; the learner restarts the actor
                pass

        thread = threading.Thread(target=main, name=f"actor-{kwargs['actor_id']}", daemon=True)
        thread.start()
        return ThreadHandle(thread, kwargs["port"].conn)


class ProcessLauncher(LocalLauncher):
    name = "processes"
    separate_processes = True

    def __init__(self, runtime):
        super().__init__(runtime)
        self.context = mp.get_context("fork")

    def start_actor(self, target: Callable, kwargs: dict) -> ProcessHandle:
        process = self.context.Process(target=_process_main, args=(target, kwargs), daemon=True,
                                       name=f"menger-actor-{kwargs['actor_id']}")
        with FORK_GATE.forking():  # no other trainer thread of this process is inside torch (menger.forking)
            process.start()
        return ProcessHandle(process)


def make_launcher(runtime):
    """The launcher `runtime.launcher` names, for this `RuntimeConfig`.

    On Ray with no `runtime.ray.address`, a private Ray instance on this machine: it then binds to loopback only.
    """
    if runtime.launcher == "threads":
        return ThreadLauncher(runtime)
    if runtime.launcher == "processes":
        return ProcessLauncher(runtime)
    if runtime.launcher == "ray":
        if runtime.ray.address is None and "ray" not in sys.modules:
            # Ray's own switch for single-machine instances: every node address becomes 127.0.0.1, so a local
            # run opens nothing on the machine's network interfaces.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        require("ray", "ray", "the ray launcher (--launcher ray)", instead="use --launcher processes")
        from menger.launch.ray import RayLauncher

        return RayLauncher(runtime)
    raise ValueError(f"unknown launcher {runtime.launcher!r}; use threads, processes or ray")
