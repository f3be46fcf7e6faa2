"""FORK_GATE (menger/forking.py): a fork waits until no other thread is inside torch work, so the child inherits no
lock held by a thread it does not have (a league's learner once hung its actor on torch's default generator)."""
import multiprocessing as mp
import threading
import time

import torch

from menger.experiment import RuntimeConfig
from menger.forking import FORK_GATE, ForkGate
from menger.launch.local import ProcessLauncher


def _draw_once(**_) -> None:
    torch.rand(1)  # takes the default generator's lock


def _report_gate(conn) -> None:
    conn.send(FORK_GATE.state())


def _drawing_in_another_thread(gate: ForkGate):
    """A thread inside a working section, drawing from the default generator for a while; returns it once drawing."""
    drawing = threading.Event()

    def draw():
        with gate.working():
            drawing.set()
            torch.rand(60_000_000)  # holds the default generator's lock for the whole draw (about 0.3 s)

    thread = threading.Thread(target=draw)
    thread.start()
    drawing.wait()
    time.sleep(0.05)
    return thread


def test_an_actor_forked_while_another_trainer_draws_starts():
    """Without the gate the child inherits the generator's lock held and hangs at its first draw."""
    thread = _drawing_in_another_thread(FORK_GATE)
    actor = ProcessLauncher(RuntimeConfig()).start_actor(_draw_once, {"actor_id": 0})
    actor.join(30)
    thread.join()
    hung = actor.exitcode is None
    if hung:
        actor.kill()  # leave no hung child behind the failure
    assert not hung and actor.exitcode == 0, "the forked actor hung on a lock another thread held at the fork"


def test_new_working_sections_wait_for_a_waiting_fork():
    gate, order = ForkGate(), []
    inside, release = threading.Event(), threading.Event()

    def first():
        with gate.working():
            inside.set()
            release.wait(10)
            order.append("first section ends")

    def forker():
        with gate.forking():
            order.append("fork")

    def second():
        with gate.working():
            order.append("second section")

    threads = [threading.Thread(target=first)]
    threads[0].start()
    inside.wait(10)
    threads.append(threading.Thread(target=forker))
    threads[1].start()
    deadline = time.monotonic() + 10
    while gate.state()[1] == 0 and time.monotonic() < deadline:  # the fork is waiting
        time.sleep(0.001)
    threads.append(threading.Thread(target=second))
    threads[2].start()
    time.sleep(0.1)
    assert order == [], "a fork went ahead, or a new section started, while another section was open"
    release.set()
    for thread in threads:
        thread.join(10)
    assert order == ["first section ends", "fork", "second section"]
    assert gate.state() == (0, 0, False)


def test_threads_may_fork_from_inside_their_own_sections_without_waiting_for_each_other():
    gate, forked = ForkGate(), []
    both_inside = threading.Barrier(2, timeout=10)

    def trainer(name):
        with gate.working():
            both_inside.wait()
            with gate.working():  # nested: never waits
                with gate.forking():
                    forked.append(name)

    threads = [threading.Thread(target=trainer, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(forked) == ["a", "b"] and not any(t.is_alive() for t in threads)
    assert gate.state() == (0, 0, False)


def test_the_child_starts_with_a_fresh_gate():
    """What the parent's threads held is theirs: the child's gate counts nothing open."""
    inside, release = threading.Event(), threading.Event()

    def hold():
        with FORK_GATE.working():
            inside.set()
            release.wait(10)

    ours, theirs = mp.Pipe()
    with FORK_GATE.working():  # this thread's own section is set aside for its fork
        thread = threading.Thread(target=hold)
        thread.start()
        inside.wait(10)
        release.set()  # the fork waits for the other thread's section to end
        process = mp.get_context("fork").Process(target=_report_gate, args=(theirs,))
        with FORK_GATE.forking():
            process.start()
    assert ours.poll(30), "the child did not answer"
    assert ours.recv() == (0, 0, False)
    process.join(10)
    thread.join(10)
