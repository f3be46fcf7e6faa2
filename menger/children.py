"""The learner's child processes (data-parallel ranks, GORILA's learners, parameter-server shards, actors): how
they are stopped and how they report the error that ends them, written once.

    stop_children(processes, conns, message=("stop",))   # ask, wait until one shared deadline, kill the rest
    report_error(conn, exc)                              # in the child: ("error", "Type: text", traceback)
    subprocess.Popen(argv, preexec_fn=die_with_parent)   # a command's child that ends when the command dies

A child is a `multiprocessing.Process` or anything with `join(timeout)`, `is_alive()` and `kill()` (an actor's
handle). A child that ignores the request, or is stuck, is killed when the deadline passes, so shutting down never
waits longer than `deadline_s` plus a moment per child killed.
"""
from __future__ import annotations

import signal
import time
import traceback
from typing import Iterable


def die_with_parent() -> None:
    """In a child process before it runs (`preexec_fn`): SIGTERM when its parent dies (Linux; elsewhere nothing). A
    `menger bench` or `menger tune` that is killed leaves no child training on: the child stops as on any SIGTERM
    (a run writes its closing checkpoint), and the command run again resumes it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_children(children: Iterable, conns: Iterable = (), message: tuple | None = ("stop",), *,
                  deadline_s: float = 5.0, reap_s: float = 1.0) -> int:
    """Send `message` on every pipe (a pipe already closed is skipped; None sends nothing: the caller asked its
    own way), join every child until one shared deadline, kill those still alive and reap them, then close the
    pipes. Returns how many were killed."""
    conns = list(conns)
    if message is not None:
        for conn in conns:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the child is gone, or its pipe already closed
                pass
    deadline, killed = time.monotonic() + deadline_s, 0
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(reap_s)
            killed += 1
    for conn in conns:
        conn.close()
    return killed


def report_error(conn, exc: BaseException) -> None:
    """In a child that is about to die: tell the learner why, as ("error", "Type: message", traceback). The pipe
    may already be gone (the learner stopped first): then there is no one to tell."""
    try:
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    except Exception:  # noqa: BLE001 - a broken or closed pipe, a message that does not pickle
        pass
