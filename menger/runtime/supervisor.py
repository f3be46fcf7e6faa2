"""The actor supervisor: heartbeats, restarts with back-off and a cap, incarnations, the no-actor deadline.

Loop (`Trainer.run` calls `tick` every turn)::

    each restart whose back-off has passed (a heap of them)  -> fleet.start(actor, incarnation)
    each actor the fleet reports silent for heartbeat_timeout_s (one vectorised look at the heartbeats), and
    the next LIVENESS_CHECKS actors in rotation:
        its handle says it died                         -> lose it: "died (exit code ...)"
        silent                                          -> kill it, then lose it: "stalled"
    losing an actor: fleet.retire(actor) collects its last words and releases its link (returns the frames of
    its partial unroll), the incarnation number moves on, and a restart is scheduled after a back-off of
    0.05 s x 2^(failures in a row - 1), at most 5 s. More than `max_restarts` failures in a row (restarts
    without a delivered unroll in between) give the actor up: fleet.give_up(actor).
    no actor alive for no_actor_deadline_s -> NoActorsError, naming the actors' last errors

A tick's cost follows the actors that have something to say, not the fleet's size: with 4,096 actors it asks 64
handles and the heartbeat array, and a death that leaves no other sign is seen within 64 ticks.

Parking (an elastic run on Ray, `menger.runtime.autosize.ClusterWatcher`): `set_active(n)` keeps actors 0..n-1
running and parks the rest. A parked actor is stopped (its partial unroll is dropped like a lost one's), is not
restarted and does not count for batches or the deadline (fleet.park); unparking starts it again as a new
incarnation (fleet.unpark, then the next tick starts it). Parking is the run's choice, not a failure: it moves
no restart counter and no back-off.

The supervisor knows actors only through its `Fleet` (the trainer wires it to the transport and the
coordinator) and reads time only through `clock`, so it is tested with fakes of both.
"""
from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass
from typing import Callable, Protocol

from menger.core import ActorHandle

log = logging.getLogger("menger.supervisor")

MAX_BACKOFF_S = 5.0
FIRST_BACKOFF_S = 0.05
LIVENESS_CHECKS = 64  # handles asked per tick whether they live (the heartbeats are looked at all at once)


class NoActorsError(RuntimeError):
    """No actor was alive for longer than the deadline. `child_errors`: {"actor i": (its last error, the
    traceback it sent)}, what `menger.explain` reports (the message names each actor and its error)."""

    child_errors: dict[str, tuple[str, str]] = {}


class Fleet(Protocol):
    """What the supervisor does to actors, as the trainer wires it."""

    def start(self, actor_id: int, incarnation: int) -> ActorHandle:
        """Start this incarnation of the actor (and grant it its slots)."""

    def silent(self, seconds: float) -> list[int]:
        """The actors whose last sign of life is more than `seconds` old (one look at all heartbeats)."""

    def closed(self) -> list[int]:
        """The actors whose link to the learner closed at their end (a sign of death, seen by the transport):
        their handles are asked at once, not when the rotation reaches them."""

    def retire(self, actor_id: int) -> int:
        """A lost incarnation: collect what it sent before it went, release its link; frames its partial unroll
        loses."""

    def give_up(self, actor_id: int) -> None:
        """No more incarnations of this actor will be started."""

    def park(self, actor_id: int) -> None:
        """The actor is stopped by choice (elastic runs): it no longer counts for batches."""

    def unpark(self, actor_id: int) -> None:
        """A parked actor counts again; its next incarnation is started by the next tick."""


@dataclass
class ActorRecord:
    actor_id: int
    incarnation: int = 0
    handle: ActorHandle | None = None
    restarts: int = 0
    lost: int = 0                 # incarnations lost (died or stalled), including any found at the final pass
    failures_in_a_row: int = 0    # losses since the last unroll this actor delivered: drives back-off and the cap
    restart_at: float | None = None
    given_up: bool = False
    parked: bool = False          # stopped by choice (`set_active`): not restarted, not counted
    last_error: str = ""
    last_traceback: str = ""      # what the actor sent with its last error (its own process's traceback)


class ActorSupervisor:
    def __init__(self, config, num_actors: int, fleet: Fleet, clock: Callable[[], float] = time.monotonic,
                 active: int | None = None):
        """`config`: a `SupervisionConfig` (heartbeat_timeout_s, no_actor_deadline_s, max_restarts); `active`:
        how many of the `num_actors` to run from the start (the others are parked; default all)."""
        self.config, self.fleet, self.clock = config, fleet, clock
        self.actors = [ActorRecord(i) for i in range(num_actors)]
        active = num_actors if active is None else active
        if not 1 <= active <= num_actors:
            raise ValueError(f"active actors: give 1 to {num_actors}, not {active}")
        for record in self.actors[active:]:
            record.parked = True
        self.elastic = active < num_actors  # actors are parked now or have been: metrics count them
        self._last_alive = clock()
        self._running = 0  # actors with a handle: started and not yet found lost
        self._due: list[tuple[float, int]] = []  # (restart_at, actor): restarts waiting for their back-off
        self._cursor = 0  # where the next tick's liveness checks start

    # ----- the loop -------------------------------------------------------------------------------------
    def start_all(self) -> None:
        for record in self.actors:
            if record.parked:
                self.fleet.park(record.actor_id)
            else:
                self._start(record)
        self._last_alive = self.clock()

    def set_active(self, count: int) -> list[int]:
        """Run actors 0..count-1 and park the rest (1 <= count <= the actors there are); returns the ids that
        changed. An actor given up stays given up."""
        if not 1 <= count <= len(self.actors):
            raise ValueError(f"active actors: give 1 to {len(self.actors)}, not {count}")
        changed = []
        for record in self.actors:
            park = record.actor_id >= count
            if park == record.parked or record.given_up:
                continue
            changed.append(record.actor_id)
            if park:
                self._park(record)
            else:
                record.parked, record.failures_in_a_row = False, 0
                self._restart_at(record, self.clock())  # the next tick starts it
                self.fleet.unpark(record.actor_id)
        return changed

    @property
    def active(self) -> int:
        """Actors that are not parked (running, restarting or given up)."""
        return sum(1 for r in self.actors if not r.parked)

    def tick(self) -> None:
        """One supervision pass: restart what is due, lose the dead and the stalled, enforce the deadline. Its cost
        follows the actors with something to say, not the fleet: the restarts that are due (a heap), the actors the
        fleet reports silent (one vectorised look at the heartbeats) or closed (their link ended), and
        `LIVENESS_CHECKS` handles in rotation, so a death with no other sign is seen within
        ceil(actors / LIVENESS_CHECKS) ticks."""
        now = self.clock()
        while self._due and self._due[0][0] <= now:
            at, actor_id = heapq.heappop(self._due)
            record = self.actors[actor_id]
            if record.handle is None and record.restart_at == at and not (record.given_up or record.parked):
                self._start(record)
        timeout = self.config.heartbeat_timeout_s
        silent = set(self.fleet.silent(timeout)) if self._running else set()
        for actor_id in sorted(silent.union(self._rotation(), self.fleet.closed() if self._running else ())):
            record = self.actors[actor_id]
            if record.handle is None or record.given_up or record.parked:
                continue
            why = self._failure(record, actor_id in silent)
            if why is not None:
                self._lose(record, why)
        if self._running:
            self._last_alive = self.clock()
        elif self.clock() - self._last_alive > self.config.no_actor_deadline_s:
            errors = "; ".join(f"actor {r.actor_id}: {r.last_error}" for r in self.actors if r.last_error)
            error = NoActorsError(f"no actor has been alive for {self.config.no_actor_deadline_s:g} s "
                                  f"(runtime.supervision.no_actor_deadline_s); last errors: {errors or 'none reported'}")
            error.child_errors = self.child_errors()
            raise error

    def _rotation(self) -> list[int]:
        """The next `LIVENESS_CHECKS` actors, round the fleet: whose handles this tick asks whether they live."""
        count = len(self.actors)
        if count <= LIVENESS_CHECKS:
            return list(range(count))
        start, self._cursor = self._cursor, (self._cursor + LIVENESS_CHECKS) % count
        return [(start + i) % count for i in range(LIVENESS_CHECKS)]

    def final_pass(self) -> None:
        """As the run ends: count incarnations that died since the last pass, without restarting them."""
        for record in self.actors:
            if record.handle is not None and not record.handle.is_alive():
                record.lost += 1
                self._drop_handle(record)

    # ----- what the trainer reports ---------------------------------------------------------------------
    def delivered(self, actor_id: int) -> None:
        """The actor's live incarnation delivered an unroll: it is healthy, back-off and the cap start over."""
        self.actors[actor_id].failures_in_a_row = 0

    def report_error(self, actor_id: int, text: str, traceback: str = "") -> None:
        self.actors[actor_id].last_error = text
        self.actors[actor_id].last_traceback = traceback

    def child_errors(self) -> dict[str, tuple[str, str]]:
        """{"actor i": (last error, its traceback)} of the actors that reported one, for `menger.explain`."""
        return {f"actor {r.actor_id}": (r.last_error, r.last_traceback) for r in self.actors if r.last_error}

    # ----- views ----------------------------------------------------------------------------------------
    def handles(self) -> list[ActorHandle]:
        return [r.handle for r in self.actors if r.handle is not None]

    def metrics(self) -> dict[str, float]:
        return {"actor/restarts": sum(r.restarts for r in self.actors),
                "actor/lost": sum(r.lost for r in self.actors),
                "actor/given_up": sum(r.given_up for r in self.actors),
                "actor/alive": sum(1 for r in self.actors if r.handle is not None and r.handle.is_alive()),
                **({"actor/parked": sum(r.parked for r in self.actors)} if self.elastic else {})}

    # ----- internals ------------------------------------------------------------------------------------
    def _park(self, record: ActorRecord) -> None:
        """Stop the actor by choice: what it sent is collected, its partial unroll dropped; no restart."""
        self.elastic = True
        if record.handle is not None:
            record.handle.kill()
            record.handle.join(0.5)
            self.fleet.retire(record.actor_id)
            self._drop_handle(record)
            record.incarnation += 1  # whatever the stopped one still sends is stale
        record.parked, record.restart_at = True, None
        self.fleet.park(record.actor_id)

    def _start(self, record: ActorRecord) -> None:
        record.restart_at = None
        record.handle = self.fleet.start(record.actor_id, record.incarnation)
        self._running += 1

    def _drop_handle(self, record: ActorRecord) -> None:
        record.handle = None
        self._running -= 1

    def _restart_at(self, record: ActorRecord, at: float) -> None:
        record.restart_at = at
        heapq.heappush(self._due, (at, record.actor_id))

    def _failure(self, record: ActorRecord, silent: bool) -> str | None:
        if not record.handle.is_alive():
            code = getattr(record.handle, "exitcode", None)
            return f"died (exit code {code})"
        timeout = self.config.heartbeat_timeout_s
        if silent:
            record.handle.kill()
            record.handle.join(0.5)  # a process dies at once; a stalled thread cannot be killed and is fenced
            return (f"stalled (no heartbeat for {timeout:.1f} s after its last one, or after its start-up grace of "
                    f"{self.config.startup_grace_s:.0f} s if it never beat: runtime.supervision.heartbeat_timeout_s, "
                    "startup_grace_s)")
        return None

    def _lose(self, record: ActorRecord, why: str) -> None:
        lost_frames = self.fleet.retire(record.actor_id)  # its last words may carry an error and an unroll
        reported = record.last_error and not record.last_error.startswith(("died", "stalled"))  # not our own note
        if reported and why.startswith("died"):
            why += f": {record.last_error}"
        else:  # it said nothing (stalled, or killed without last words): what the supervisor saw is the error
            record.last_error, record.last_traceback = why, ""
        self._drop_handle(record)
        record.lost += 1
        record.restarts += 1
        record.failures_in_a_row += 1
        record.incarnation += 1
        if record.failures_in_a_row > self.config.max_restarts:
            record.given_up = True
            log.error("actor %d %s; restarted %d times in a row without delivering an unroll, giving it up "
                      "(runtime.supervision.max_restarts)", record.actor_id, why, record.failures_in_a_row - 1)
            self.fleet.give_up(record.actor_id)
            return
        backoff = min(FIRST_BACKOFF_S * 2 ** (record.failures_in_a_row - 1), MAX_BACKOFF_S)
        self._restart_at(record, self.clock() + backoff)
        log.warning("actor %d %s; %d frames of its partial unroll dropped; restarting as incarnation %d in %.2f s",
                    record.actor_id, why, lost_frames, record.incarnation, backoff)
