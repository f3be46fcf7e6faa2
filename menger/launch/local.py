"""Local launchers: actors as threads of the learner's process, or as forked processes.

Both hand an actor the same `ActorLinks` (shared-memory buffers, the parameter server, a private pipe), so
actor and learner code is identical under either. Processes are forked (cheap to start; the shared tensors
are inherited, nothing is pickled) and run torch single-threaded.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
from typing import Callable


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
        try:
            kwargs["links"].conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        except Exception:  # noqa: BLE001 - the pipe may already be gone
            pass
        raise


def _process_main(target: Callable, kwargs: dict) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    try:
        _guarded(target, kwargs)
    except BaseException:  # noqa: BLE001 - already reported to the learner
        os._exit(1)
    os._exit(0)


class ThreadLauncher:
    name = "threads"
    single_thread_actors = False

    def start_actor(self, target: Callable, kwargs: dict) -> ThreadHandle:
        def main():
            try:
                _guarded(target, kwargs)
            except BaseException:  # noqa: BLE001 - reported over the pipe; the learner restarts the actor
                pass

        thread = threading.Thread(target=main, name=f"actor-{kwargs['actor_id']}", daemon=True)
        thread.start()
        return ThreadHandle(thread, kwargs["links"].conn)

    def shutdown(self) -> None:
        pass


class ProcessLauncher:
    name = "processes"
    single_thread_actors = True

    def __init__(self):
        self.context = mp.get_context("fork")

    def start_actor(self, target: Callable, kwargs: dict) -> ProcessHandle:
        process = self.context.Process(target=_process_main, args=(target, kwargs), daemon=True,
                                       name=f"menger-actor-{kwargs['actor_id']}")
        process.start()
        return ProcessHandle(process)

    def shutdown(self) -> None:
        pass


def make_launcher(name: str, *, ray_address: str | None = None):
    """`ray_address` None means a private Ray instance on this machine: it then binds to loopback only."""
    if name == "threads":
        return ThreadLauncher()
    if name == "processes":
        return ProcessLauncher()
    if name == "ray":
        if ray_address is None and "ray" not in sys.modules:
            # Ray's own switch for single-machine instances: every node address becomes 127.0.0.1, so a local
            # run opens nothing on the machine's network interfaces.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            from menger.launch.ray import RayLauncher
        except ImportError as exc:
            raise RuntimeError(f"the ray launcher needs Ray ({exc}); install it with: pip install 'menger-rl[ray]'") \
                from exc
        return RayLauncher()
    raise ValueError(f"unknown launcher {name!r}; use threads, processes or ray")
