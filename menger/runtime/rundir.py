"""One owner per run directory: the training process holds an advisory lock (fcntl.flock) on `RUN_DIR/.lock`.

A second `menger train` or `menger resume` on a live run would interleave checkpoints and metrics with the
first; it is refused, naming the owner's pid. The operating system drops the lock when its holder dies, so a
SIGKILLed learner leaves nothing stale behind: `menger resume` works at once. Forked actors and learner ranks
close their inherited copy, so a lingering child never holds a run directory that its learner left.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"
_held: set[int] = set()  # descriptors of this process's locks: a forked child closes them


def _close_in_child() -> None:
    for fd in list(_held):
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)


class RunDirectoryBusy(RuntimeError):
    """Another live process trains in this run directory."""


class RunDirectoryLock:
    """Held from `acquire` to `release` (or the holder's death). Use (`menger.api.run_experiment`)::

        with RunDirectoryLock(run_dir):               # RunDirectoryBusy if another process holds it
            ... train, checkpoint ...
    """

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> "RunDirectoryLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunDirectoryBusy(
                f"{self.path.parent} is in use by another training process (pid {owner}); wait for it to end, "
                f"or stop it (kill -TERM {owner} writes a checkpoint first), then resume; or give another "
                "--run-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        _held.add(fd)
        return self

    def release(self) -> None:
        if self.fd is not None:
            _held.discard(self.fd)
            os.close(self.fd)  # closing drops the lock; the file stays, harmless
            self.fd = None

    def __enter__(self) -> "RunDirectoryLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
