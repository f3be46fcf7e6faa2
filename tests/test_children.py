"""Stopping the learner's child processes within one deadline, and a child's last error over its pipe."""
from __future__ import annotations

import multiprocessing as mp
import time

from menger.children import report_error, stop_children


def _obeys(conn) -> None:
    conn.recv()  # ("stop",)


def _ignores(conn) -> None:
    time.sleep(60)


def _fails(conn) -> None:
    try:
        raise ValueError("the shard's memory is gone")
    except ValueError as exc:
        report_error(conn, exc)


def _start(target):
    ours, theirs = mp.get_context("fork").Pipe()
    process = mp.get_context("fork").Process(target=target, args=(theirs,), daemon=True)
    process.start()
    theirs.close()
    return process, ours


def test_children_that_obey_stop_and_the_rest_are_killed_at_the_shared_deadline():
    (good, good_conn), (stuck, stuck_conn) = _start(_obeys), _start(_ignores)
    started = time.monotonic()
    killed = stop_children([good, stuck], [good_conn, stuck_conn], deadline_s=1.0)
    assert killed == 1 and not good.is_alive() and not stuck.is_alive()
    assert good.exitcode == 0 and stuck.exitcode != 0
    assert time.monotonic() - started < 5.0
    assert good_conn.closed and stuck_conn.closed


def test_a_closed_pipe_does_not_stop_the_shutdown():
    process, conn = _start(_obeys)
    conn.close()  # the child will never hear the request: it is killed at the deadline
    assert stop_children([process], [conn], deadline_s=0.5) == 1


def test_a_child_reports_its_error_with_the_traceback():
    process, conn = _start(_fails)
    kind, text, trace = conn.recv()
    process.join(5)
    assert (kind, text) == ("error", "ValueError: the shard's memory is gone")
    assert "raise ValueError" in trace


def test_reporting_on_a_pipe_that_is_gone_is_silent():
    ours, theirs = mp.Pipe()
    ours.close()
    theirs.close()
    report_error(theirs, RuntimeError("nobody listens"))
