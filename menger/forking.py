"""Forking from a process whose other threads use torch: a league's learners, PBT members in threads, a service.

A forked child inherits every lock as it was at the fork, and the threads that held them do not exist in the
child. Torch's default random generator has such a lock: if another thread was drawing (initial weights, a
minibatch order) when a learner forked an actor, the actor hangs at its first draw, and is only replaced after
its start-up grace. The gate keeps forks and torch work in other threads apart::

    with FORK_GATE.working():     # a trainer's set-up or loop turn, a service's batch: torch, imports, the RNG
        ...
    with FORK_GATE.forking():     # around Process.start(): waits until no other thread is inside working()
        process.start()

A fork waiting at the gate goes first: new working sections wait for it, so it waits at most for the sections
already running. A thread may fork from inside its own working section (a trainer starting its actors in a loop
turn): its own hold is set aside for the fork, so two such threads never wait for each other. With a single
trainer nobody else is inside working(), and the gate costs a lock per turn.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager


class ForkGate:
    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._working = 0     # working sections open, over all threads
        self._forks = 0       # threads waiting to fork or forking
        self._forking = False
        self._depth = threading.local()  # this thread's open working sections (nested ones count once each)

    def _mine(self) -> int:
        return getattr(self._depth, "n", 0)

    @contextmanager
    def working(self):
        mine = self._mine()
        with self._cond:
            if mine == 0:  # a nested section never waits: a fork waiting for its outer one would wait forever
                while self._forks:
                    self._cond.wait()
            self._working += 1
        self._depth.n = mine + 1
        try:
            yield
        finally:
            self._depth.n = mine
            with self._cond:
                self._working -= 1
                if self._working == 0:
                    self._cond.notify_all()

    @contextmanager
    def forking(self):
        mine = self._mine()
        with self._cond:
            self._working -= mine  # this thread's own hold does not keep its fork waiting
            self._forks += 1
            while self._forking or self._working:
                self._cond.wait()
            self._forking = True
        try:
            yield
        finally:
            with self._cond:
                self._forking = False
                self._forks -= 1
                self._working += mine
                self._cond.notify_all()

    def state(self) -> tuple[int, int, bool]:
        """(working sections open, forks waiting or under way, a fork under way): for tests."""
        with self._cond:
            return self._working, self._forks, self._forking


FORK_GATE = ForkGate()
# The child starts with a fresh gate: the counts it inherits belong to threads it does not have.
os.register_at_fork(after_in_child=FORK_GATE._reset)
