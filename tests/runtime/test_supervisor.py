"""The actor supervisor on its own: fake handles, a fake fleet and a fake clock; nothing is started for real."""
import logging

import pytest

from menger.experiment import SupervisionConfig
from menger.runtime.supervisor import FIRST_BACKOFF_S, MAX_BACKOFF_S, ActorSupervisor, NoActorsError


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeHandle:
    def __init__(self):
        self.alive, self.killed, self.exitcode = True, False, None

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.killed, self.alive, self.exitcode = True, False, -9

    def join(self, timeout: float) -> None:
        pass

    def die(self, code: int = -9) -> None:
        self.alive, self.exitcode = False, code


class FakeFleet:
    """Records what the supervisor did; `silence[a]` is actor a's seconds without a heartbeat."""

    def __init__(self, frames_lost: int = 12):
        self.started: list[tuple[int, int]] = []
        self.retired: list[int] = []
        self.given_up: list[int] = []
        self.parked: list[int] = []
        self.unparked: list[int] = []
        self.handles: dict[int, FakeHandle] = {}
        self.silence: dict[int, float] = {}
        self.ended: set[int] = set()  # actors whose link closed at their end
        self.frames_lost = frames_lost
        self.last_words: dict[int, str] = {}
        self.supervisor = None

    def start(self, actor_id: int, incarnation: int) -> FakeHandle:
        self.started.append((actor_id, incarnation))
        self.handles[actor_id] = FakeHandle()
        self.silence[actor_id] = 0.0
        return self.handles[actor_id]

    def silent(self, seconds: float) -> list[int]:
        return [actor_id for actor_id, silence in self.silence.items() if silence > seconds]

    def closed(self) -> list[int]:
        return sorted(self.ended)

    def retire(self, actor_id: int) -> int:
        self.retired.append(actor_id)
        if actor_id in self.last_words:  # as the trainer does: its last error arrives while draining
            self.supervisor.report_error(actor_id, self.last_words.pop(actor_id))
        return self.frames_lost

    def give_up(self, actor_id: int) -> None:
        self.given_up.append(actor_id)

    def park(self, actor_id: int) -> None:
        self.parked.append(actor_id)

    def unpark(self, actor_id: int) -> None:
        self.unparked.append(actor_id)


def make(actors: int = 2, **settings):
    config = SupervisionConfig(**{"heartbeat_timeout_s": 5.0, "no_actor_deadline_s": 30.0, "max_restarts": 3,
                                  **settings})
    clock, fleet = FakeClock(), FakeFleet()
    supervisor = ActorSupervisor(config, actors, fleet, clock=clock)
    fleet.supervisor = supervisor
    supervisor.start_all()
    return supervisor, fleet, clock


def test_every_actor_starts_as_incarnation_zero():
    supervisor, fleet, _ = make(3)
    assert fleet.started == [(0, 0), (1, 0), (2, 0)]
    supervisor.tick()
    assert supervisor.metrics() == {"actor/restarts": 0, "actor/lost": 0, "actor/given_up": 0, "actor/alive": 3}


def test_a_dead_actor_is_retired_then_restarted_as_the_next_incarnation_after_the_back_off(caplog):
    supervisor, fleet, clock = make()
    fleet.last_words[1] = "ValueError: bad obs"
    fleet.handles[1].die()
    with caplog.at_level(logging.WARNING, logger="menger.supervisor"):
        supervisor.tick()
    assert fleet.retired == [1] and supervisor.actors[1].handle is None
    assert "died (exit code -9): ValueError: bad obs" in caplog.text and "12 frames" in caplog.text
    supervisor.tick()
    assert fleet.started[-1] == (1, 0)  # not yet: the back-off has not passed
    clock.advance(FIRST_BACKOFF_S)
    supervisor.tick()
    assert fleet.started[-1] == (1, 1)
    assert supervisor.metrics()["actor/restarts"] == 1 and supervisor.metrics()["actor/lost"] == 1


def test_a_silent_actor_is_killed_and_replaced():
    supervisor, fleet, clock = make(heartbeat_timeout_s=5.0)
    fleet.silence[0] = 5.1
    stalled = fleet.handles[0]
    supervisor.tick()
    assert stalled.killed and fleet.retired == [0]
    clock.advance(FIRST_BACKOFF_S)
    supervisor.tick()
    assert fleet.started[-1] == (0, 1)


def test_back_off_doubles_in_a_crash_loop_up_to_its_cap_and_resets_after_a_delivery():
    supervisor, fleet, clock = make(1, max_restarts=20)
    waits = []
    for _ in range(9):
        fleet.handles[0].die()
        supervisor.tick()
        waits.append(supervisor.actors[0].restart_at - clock.now)
        clock.advance(waits[-1])
        supervisor.tick()
    assert waits[:4] == pytest.approx([FIRST_BACKOFF_S * 2 ** i for i in range(4)])
    assert max(waits) == pytest.approx(MAX_BACKOFF_S)
    supervisor.delivered(0)  # a healthy incarnation: the next failure starts over
    fleet.handles[0].die()
    supervisor.tick()
    assert supervisor.actors[0].restart_at - clock.now == pytest.approx(FIRST_BACKOFF_S)


def test_more_failures_in_a_row_than_the_cap_give_the_actor_up():
    supervisor, fleet, clock = make(2, max_restarts=2)
    for _ in range(3):
        fleet.handles[0].die()
        supervisor.tick()
        clock.advance(MAX_BACKOFF_S)
        supervisor.tick()
    assert fleet.given_up == [0] and supervisor.actors[0].given_up
    started_before = len(fleet.started)
    clock.advance(60)
    supervisor.tick()  # actor 1 is alive: no deadline; actor 0 is never started again
    assert len(fleet.started) == started_before
    assert supervisor.metrics()["actor/given_up"] == 1


def test_no_live_actor_for_the_deadline_raises_naming_the_last_errors():
    supervisor, fleet, clock = make(1, max_restarts=0, no_actor_deadline_s=10.0)
    fleet.last_words[0] = "RuntimeError: reset failed"
    fleet.handles[0].die()
    supervisor.tick()
    clock.advance(9.9)
    supervisor.tick()
    clock.advance(0.2)
    with pytest.raises(NoActorsError, match=r"no_actor_deadline_s.*actor 0: RuntimeError: reset failed"):
        supervisor.tick()


def test_an_actor_waiting_for_its_restart_does_not_start_the_deadline_clock_early():
    supervisor, fleet, clock = make(1, no_actor_deadline_s=1.0)
    fleet.handles[0].die()
    supervisor.tick()
    clock.advance(0.9)
    supervisor.tick()  # restarted here (back-off 0.05 s): alive again
    clock.advance(0.9)
    supervisor.tick()
    assert fleet.started[-1] == (0, 1)


def test_the_final_pass_counts_deaths_since_the_last_tick_without_restarting():
    supervisor, fleet, _ = make(2)
    fleet.handles[0].die()
    supervisor.final_pass()
    assert supervisor.metrics()["actor/lost"] == 1 and supervisor.metrics()["actor/restarts"] == 0
    assert fleet.started == [(0, 0), (1, 0)] and supervisor.handles() == [fleet.handles[1]]


# ----- parking (elastic runs) -----------------------------------------------------------------------------------
def test_an_elastic_run_starts_the_active_actors_and_parks_the_rest():
    config = SupervisionConfig(heartbeat_timeout_s=5.0, no_actor_deadline_s=30.0, max_restarts=3)
    clock, fleet = FakeClock(), FakeFleet()
    supervisor = ActorSupervisor(config, 4, fleet, clock=clock, active=2)
    supervisor.start_all()
    assert fleet.started == [(0, 0), (1, 0)] and fleet.parked == [2, 3] and supervisor.active == 2
    assert supervisor.metrics()["actor/parked"] == 2
    with pytest.raises(ValueError, match="give 1 to 4"):
        supervisor.set_active(5)


def test_parking_stops_an_actor_without_a_restart_and_unparking_starts_a_new_incarnation():
    supervisor, fleet, clock = make(actors=3)
    handle = fleet.handles[2]
    assert supervisor.set_active(2) == [2]
    assert handle.killed and fleet.retired == [2] and fleet.parked == [2]
    clock.advance(60.0)
    supervisor.tick()  # a parked actor is neither restarted nor counted as lost
    assert fleet.started == [(0, 0), (1, 0), (2, 0)]
    assert supervisor.metrics() == {"actor/restarts": 0, "actor/lost": 0, "actor/given_up": 0, "actor/alive": 2,
                                    "actor/parked": 1}
    assert supervisor.set_active(3) == [2] and fleet.unparked == [2]
    supervisor.tick()
    assert fleet.started[-1] == (2, 1)  # a new incarnation: whatever the parked one still sends is stale
    assert supervisor.metrics()["actor/parked"] == 0 and supervisor.active == 3


def test_only_parked_actors_left_alive_still_meet_the_no_actor_deadline():
    supervisor, fleet, clock = make(actors=2)
    supervisor.set_active(1)
    fleet.handles[0].die()
    supervisor.tick()  # actor 0 lost, restarting; actor 1 parked does not count as alive
    fleet.start = lambda actor_id, incarnation: (_ for _ in ()).throw(AssertionError("no start expected"))
    supervisor.actors[0].restart_at = None  # it never comes back
    clock.advance(31.0)
    with pytest.raises(NoActorsError):
        supervisor.tick()


class CountingHandle(FakeHandle):
    calls = 0

    def is_alive(self) -> bool:
        CountingHandle.calls += 1
        return self.alive


def test_a_tick_asks_a_bounded_number_of_handles_however_many_actors_there_are():
    from menger.runtime.supervisor import LIVENESS_CHECKS

    for actors in (16, 4096):
        supervisor, fleet, clock = make(actors)
        for actor_id in fleet.handles:
            fleet.handles[actor_id] = supervisor.actors[actor_id].handle = CountingHandle()
        CountingHandle.calls = 0
        supervisor.tick()
        assert CountingHandle.calls == min(actors, LIVENESS_CHECKS)
        fleet.silence[4] = 6.0  # one silent actor is looked at beside the rotation, and replaced
        CountingHandle.calls = 0
        supervisor.tick()
        assert CountingHandle.calls <= min(actors, LIVENESS_CHECKS) + 1 and fleet.retired == [4]


def test_among_thousands_a_death_without_other_sign_is_found_within_a_rotation():
    from menger.runtime.supervisor import LIVENESS_CHECKS

    actors = 4096
    supervisor, fleet, clock = make(actors)
    fleet.handles[3000].die()
    ticks = 0
    while not fleet.retired:
        supervisor.tick()
        ticks += 1
    assert fleet.retired == [3000] and ticks <= actors // LIVENESS_CHECKS
    clock.advance(FIRST_BACKOFF_S)
    supervisor.tick()
    assert fleet.started[-1] == (3000, 1)


def test_among_thousands_a_death_whose_link_closed_is_found_at_the_next_tick():
    """A killed actor's pipe ends (the transport sees it): its handle is asked at once, whatever the rotation."""
    supervisor, fleet, clock = make(4096)
    supervisor.tick()  # the rotation is at 64..127 now
    fleet.handles[3000].die()
    fleet.ended.add(3000)
    supervisor.tick()
    assert fleet.retired == [3000]
    fleet.ended.add(17)  # a link that closed while its actor still lives (it is exiting): asked, not lost
    supervisor.tick()
    assert fleet.retired == [3000]
