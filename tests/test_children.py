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


def test_a_child_started_with_die_with_parent_ends_when_its_parent_is_killed(tmp_path):
    """A parent (a bench, a tune) killed with SIGKILL: its child gets SIGTERM from the kernel and ends."""
    import os
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from menger.children import die_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], preexec_fn=die_with_parent)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n")])
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(child, 0)  # alive while its parent is
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, reaped by init soon, counts as gone)."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(f"/proc/{pid}")

