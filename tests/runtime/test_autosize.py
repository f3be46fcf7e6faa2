"""Runtime auto-sizing: the model and the picker on made-up costs, the config's `auto`, a run that resolves it
(with the measurement faked: tests check behaviour, not this machine's clock), its resume, and the in-run
adjustment of the batch size."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from menger import api
from menger.cli import _count_or_auto
from menger.config import ConfigError
from menger.coordinator.asynchronous import AsyncCoordinator
from menger.coordinator.base import FlowControlError
from menger.experiment import load_experiment
from menger.runtime import autosize
from menger.runtime.autosize import BatchAdjuster, Costs, Layout, adjust_batch, candidates, pick, predict


def line(fixed_s: float, per_frame_s: float) -> list:
    """Update timings on a straight line, from 10 frames to a million."""
    return [(n, fixed_s + per_frame_s * n) for n in (10, 1_000_000)]


def costs(**changes) -> Costs:
    """A made-up 4-core machine: an actor's step costs 1 ms + 10 µs per env, an update 5 ms + 1 µs per frame."""
    base = dict(cores=4, launcher="processes", coordination="async", unroll_length=10, slots_per_actor=2,
                actor_step_s={16: 1e-3 + 16e-5, 256: 1e-3 + 256e-5},
                learner_s={1: line(5e-3, 1e-6), 3: line(5e-3, 1e-6)})
    return Costs(**{**base, **changes})


# ----- the model ---------------------------------------------------------------------------------------------
def test_an_unroll_costs_what_was_measured_and_is_linear_between_and_beyond_the_measured_sizes():
    c = costs()
    assert c.unroll_s(16) == pytest.approx(10 * (1e-3 + 16e-5))
    assert c.unroll_s(136) == pytest.approx(10 * (1e-3 + 136e-5))      # between 16 and 256
    assert c.unroll_s(1024) == pytest.approx(10 * (1e-3 + 1024e-5))    # past the largest: its last slope
    assert c.unroll_s(8) >= c.unroll_s(16) * 8 / 16                    # never cheaper per env than measured


def test_sync_rounds_add_the_acting_and_the_learning():
    c = costs(coordination="sync")
    prediction = predict(c, Layout(2, 16))
    acting, learning = c.unroll_s(16), 5e-3 + 1e-6 * 2 * 16 * 10
    assert prediction.frames_per_s == pytest.approx(2 * 16 * 10 / (acting + learning))
    # more actors than cores take turns: 8 actors on 4 cores act twice as long as 4
    eight, four = predict(c, Layout(8, 16)), predict(c, Layout(4, 16))
    assert eight.bounds["acting_s"] == pytest.approx(2 * four.bounds["acting_s"])
    (line_,) = pick(c, [Layout(2, 16)], ("runtime.actors",)).reasons
    assert line_.startswith("runtime.actors=2: predicted") and "a round of 0.012 s acting and 0.005 s learning" in line_


def test_async_is_paced_by_the_slowest_of_actors_learner_and_cores():
    slow_actors = predict(costs(actor_step_s={16: 1.0}), Layout(1, 16, 1))
    assert slow_actors.bound == "actors" and slow_actors.frames_per_s == pytest.approx(16 * 10 / 10.0)
    slow_learner = predict(costs(learner_s={3: line(1.0, 0.0)}), Layout(1, 16, 1))
    assert slow_learner.bound == "learner" and slow_learner.frames_per_s == pytest.approx(160.0)
    one_core = predict(costs(cores=1, learner_s={1: line(0.0, 1e-3)}), Layout(4, 256, 8))
    assert one_core.bound == "cores"  # acting and learning share the one core


def test_a_learner_timed_only_on_several_threads_costs_the_cores_all_of_them():
    # timed on 2 threads only: 1 ms a frame of wall time is 2 ms of the cores the actors share
    c = costs(cores=2, learner_s={2: line(0.0, 1e-3)}, learner_threads=2, actor_step_s={8: 8e-3})
    assert c.update_cpu_s(1000) == pytest.approx(2.0)
    shared = predict(c, Layout(1, 8, 1))  # an env step 1 ms of one core, learning 2 ms of cores: 2 / 3 ms
    assert shared.bound == "cores" and shared.frames_per_s == pytest.approx(2 / 3e-3)
    assert costs(learner_s={1: line(0.0, 4e-6), 3: line(0.0, 2e-6)}).update_cpu_s(1000) == pytest.approx(4e-3)


def test_the_learner_gets_the_cores_the_actors_leave_and_threads_in_between_are_interpolated():
    c = costs(cores=8, learner_s={1: line(0.0, 8e-6), 7: line(0.0, 2e-6)})
    assert c.threads(1) == 7 and c.threads(7) == 1 and c.threads(12) == 1
    assert c.update_s(1000, 4) == pytest.approx(0.005)  # halfway between 1 and 7 threads
    assert costs(launcher="ray").threads(3) == 4 and costs(learner_threads=2).threads(1) == 2


def test_more_actors_win_when_acting_is_the_bottleneck_and_cores_are_free():
    c = costs(actor_step_s={16: 1e-2, 256: 16e-2})  # acting costs 10x learning
    choice = pick(c, candidates(c, envs=(16, 256)))
    assert choice.layout.actors >= 3 and choice.prediction.bound in ("actors", "cores")


def test_the_threads_launcher_counts_the_actors_as_one_core():
    c = costs(launcher="threads", actor_step_s={16: 1e-2, 256: 16e-2})
    assert predict(c, Layout(4, 16, 4)).bounds["actors"] == pytest.approx(predict(c, Layout(1, 16, 1)).bounds["actors"])


def test_ties_go_to_the_fewest_actors_then_the_smallest_batch_then_the_fewest_envs():
    c = costs(learner_s={3: line(1.0, 0.0), 1: line(1.0, 0.0)})  # 1 s whatever the batch: bigger is faster
    choice = pick(c, [Layout(2, 256, 4), Layout(4, 256, 4), Layout(4, 128, 8), Layout(1, 16, 1)])
    assert choice.layout == Layout(2, 256, 4)  # the same prediction as the 4-actor layouts, fewer processes
    assert choice.ranked[0] is choice.prediction and len(choice.ranked) == 4
    even = costs(actor_step_s={16: 1e-9, 256: 1e-9}, learner_s={3: line(0.0, 1e-6), 1: line(0.0, 1e-6)})
    assert pick(even, [Layout(1, 256, 2), Layout(1, 128, 2), Layout(1, 256, 1)]).layout == Layout(1, 128, 2)
    assert pick(even, [Layout(1, 256, 1), Layout(1, 128, 2)]).layout == Layout(1, 128, 2)  # same batch, fewer envs
    near = costs(actor_step_s={16: 1e-9, 256: 1e-9}, learner_s={1: [(2560, 0.1), (10240, 0.38)],
                                                              3: [(2560, 0.1), (10240, 0.38)]})
    # 25.6k frames/s for batches of 2,560 frames, 26.9k for 10,240: within 5 %, the smaller batch
    assert pick(near, [Layout(1, 256, 4), Layout(1, 256, 1)]).layout == Layout(1, 256, 1)


def test_update_costs_follow_the_measured_sizes_where_a_bigger_batch_may_cost_more_per_frame():
    c = costs(learner_s={1: [(100, 0.011), (1000, 0.02), (10_000, 0.11)]})  # 10 ms + 10 µs per frame
    assert c.update_s(5000, 1) == pytest.approx(0.06)
    assert c.update_s(100_000, 1) == pytest.approx(0.11 + 90_000 * 11e-6)  # never cheaper a frame than the largest
    caches = costs(learner_s={1: [(1000, 0.01), (4000, 0.03), (16_000, 0.2)]})  # 7.5 µs a frame, then 12.5
    assert caches.update_s(4000, 1) == pytest.approx(0.03) and caches.update_s(10_000, 1) == pytest.approx(0.115)
    assert caches.update_s(32_000, 1) == pytest.approx(0.2 + 16_000 * 0.17 / 12_000)  # the last segment's slope
    assert caches.update_s(500, 1) == pytest.approx(0.01 - 500 * 0.02 / 3000)  # the first segment, backwards
    assert costs(learner_s={1: [(1000, 0.5)]}).update_s(2000, 1) == pytest.approx(1.0)  # one size: per frame
    assert c.largest_batch == 10_000


def test_candidates_keep_fixed_keys_respect_memory_and_batches_fit_the_slots():
    c = costs(bytes_per_env=1000, memory_bytes=2 * 2 * 256 * 1000)  # 2 actors x 2 slots x 256 envs fit, no more
    layouts = candidates(c, envs=(16, 256))
    assert max(l.actors * l.envs_per_actor for l in layouts if l.envs_per_actor == 256) == 2 * 256
    assert all(1 <= l.batch_unrolls <= l.actors * 2 for l in layouts)
    assert {l.actors for l in candidates(c, envs=(16,), actors=3)} == {3}
    assert {l.batch_unrolls for l in candidates(c, envs=(16,), batch_unrolls=2)} == {2}
    assert all(l.envs_per_actor % 4 == 0 for l in candidates(c, envs=(6, 8, 16), rows_per_game=4))
    assert {l.batch_unrolls for l in candidates(costs(coordination="sync"), envs=(16,))} == {0}
    timed_small = costs(learner_s={1: [(10, 1e-3), (1000, 2e-3)]})  # batches past 2 x 1000 frames: not timed
    assert max(l.batch_unrolls * l.envs_per_actor * 10 for l in candidates(timed_small, envs=(16, 256))) <= 2000


def test_nothing_to_pick_says_what_to_do():
    with pytest.raises(ValueError, match="set runtime.actors and runtime.envs_per_actor to numbers"):
        pick(costs(), [])


def test_the_choice_says_why_for_each_key_and_applies_only_to_the_auto_keys():
    config = load_experiment("cartpole-impala", ["runtime.actors=auto", "runtime.envs_per_actor=auto"])
    keys = config.auto_keys
    c = costs()
    choice = pick(c, candidates(c, envs=(16, 256), batch_unrolls=1), keys)
    assert [line.split(":")[0] for line in choice.reasons] == [f"{k}={v}" for k, v in zip(
        keys, (choice.layout.actors, choice.layout.envs_per_actor))]
    assert all("learned frames/s, bound by the" in line and "µs/env" in line for line in choice.reasons)
    resolved = choice.apply(config)
    assert (resolved.runtime.actors, resolved.runtime.envs_per_actor) == (choice.layout.actors,
                                                                         choice.layout.envs_per_actor)
    assert resolved.runtime.coordination.batch_unrolls == 0  # not auto: the preset's
    report = choice.report()
    assert report["picked"] == {"actors": choice.layout.actors, "envs_per_actor": choice.layout.envs_per_actor,
                                "batch_unrolls": 1} and report["adjustments"] == []


# ----- the config ----------------------------------------------------------------------------------------------
def test_auto_is_accepted_for_the_three_keys():
    config = load_experiment("cartpole-impala", ["runtime.actors=auto", "runtime.envs_per_actor=auto",
                                                 "runtime.coordination.batch_unrolls=auto"])
    assert config.auto_keys == ("runtime.actors", "runtime.envs_per_actor", "runtime.coordination.batch_unrolls")
    assert load_experiment("cartpole-impala").auto_keys == ()


@pytest.mark.parametrize("key", ["runtime.actors", "runtime.envs_per_actor", "runtime.coordination.batch_unrolls"])
def test_another_string_is_refused_naming_the_key(key):
    with pytest.raises(ConfigError, match=rf"'{key}' must be an integer or 'auto', got str 'atuo'; did you mean "
                                          "'auto'"):
        load_experiment("cartpole-impala", [f"{key}=atuo"])


@pytest.mark.parametrize("preset, overrides, message", [
    ("cartpole-ppo", ["runtime.coordination.batch_unrolls=auto"], "only async coordination"),
    ("cartpole-apex", ["runtime.actors=auto"], "apex's replay or gradient workers are not modelled"),
    ("cartpole-impala", ["runtime.actors=auto", "runtime.inference.mode=central"], "inference.mode=central"),
])
def test_auto_where_the_measurement_does_not_model_the_run_is_refused(preset, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(preset, overrides)


def test_the_cli_takes_a_count_or_auto():
    assert _count_or_auto("auto") == "auto" and _count_or_auto("3") == 3
    with pytest.raises(Exception, match="give a whole number or auto"):
        _count_or_auto("many")


# ----- a run ---------------------------------------------------------------------------------------------------
@pytest.fixture
def fake_measure(monkeypatch):
    """The measurement replaced by made-up costs, counted; the candidates kept small."""
    calls = []

    def measure(config, budget_s=autosize.BUDGET_S):
        calls.append(config)
        return costs(cores=2, unroll_length=config.runtime.unroll_length, actor_step_s={4: 1e-4, 8: 1.2e-4},
                     learner_s={1: line(1e-3, 1e-6)}), 1

    monkeypatch.setattr(autosize, "measure", measure)
    monkeypatch.setattr(autosize, "ENVS", (4, 8))
    return calls


def test_a_run_with_auto_trains_with_the_picked_layout_and_its_resume_keeps_it(tmp_path, quiet, fake_measure):
    auto = ["runtime.actors=auto", "runtime.envs_per_actor=auto", "runtime.coordination.batch_unrolls=auto"]
    settings = [*quiet, "runtime.launcher=threads", "runtime.unroll_length=8", "checkpoint.interval_s=0",
                "stop.target_return=null"]
    run = api.train("cartpole-impala", [*settings, *auto, "stop.env_frames=256"], run_dir=str(tmp_path / "run"))
    report = json.loads((run.run_dir / "autosize.json").read_text())
    saved = yaml.safe_load((run.run_dir / "config.yaml").read_text())["runtime"]
    picked = report["picked"]
    assert (saved["actors"], saved["envs_per_actor"], saved["coordination"]["batch_unrolls"]) == (
        picked["actors"], picked["envs_per_actor"], picked["batch_unrolls"])
    assert all(isinstance(value, int) for value in picked.values()) and len(fake_measure) == 1
    assert report["keys"] == [key.split("=")[0] for key in auto] and len(report["reasons"]) == 3
    assert run.final_metrics["time/env_frames"] >= 256

    api.resume(run.run_dir, overrides=["stop.env_frames=1024"])  # from config.yaml: numbers, nothing measured
    api.resume(run.run_dir, overrides=[*auto, "stop.env_frames=2048"])  # auto again: the run's layout stays
    assert len(fake_measure) == 1
    again = yaml.safe_load((run.run_dir / "config.yaml").read_text())["runtime"]
    assert (again["actors"], again["envs_per_actor"], again["coordination"]["batch_unrolls"]) == (
        picked["actors"], picked["envs_per_actor"], picked["batch_unrolls"])


def test_a_resumed_run_whose_batch_was_auto_keeps_adjusting_it(tmp_path, fake_measure):
    config = load_experiment("cartpole-impala", ["runtime.coordination.batch_unrolls=auto"])
    resolved, choice, adjust = api._resolve_auto(config, tmp_path, resume=False)
    assert adjust and choice is not None and resolved.runtime.coordination.batch_unrolls >= 1
    autosize.write_report(tmp_path, choice)
    plain = load_experiment("cartpole-impala", [f"runtime.coordination.batch_unrolls={choice.layout.batch_unrolls}"])
    assert api._resolve_auto(plain, tmp_path, resume=True)[2]  # autosize.json says the batch was auto
    assert not api._resolve_auto(plain, tmp_path / "elsewhere", resume=True)[2]


# ----- adjusting during the run ------------------------------------------------------------------------------
def test_the_batch_grows_when_the_learner_falls_behind_and_shrinks_when_it_waits():
    grown = adjust_batch(2, 8, learner_busy=0.95, queued=3.0, lag_dropped=0.0)
    assert grown[0] == 4 and "the learner falls behind" in grown[1] and "3.0 unrolls queued" in grown[1]
    assert adjust_batch(6, 8, learner_busy=0.97, queued=0.0, lag_dropped=0.02)[0] == 8  # capped at the slots
    shrunk = adjust_batch(4, 8, learner_busy=0.3, queued=0.0, lag_dropped=0.0)
    assert shrunk[0] == 2 and "waits for unrolls" in shrunk[1] and "busy 30%" in shrunk[1]
    assert adjust_batch(4, 8, learner_busy=0.7, queued=0.5, lag_dropped=0.0) is None  # neither: leave it
    assert adjust_batch(1, 8, learner_busy=0.2, queued=0.0, lag_dropped=0.0) is None
    assert adjust_batch(8, 8, learner_busy=0.99, queued=4.0, lag_dropped=0.1) is None


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_adjuster_resizes_the_coordinators_batches_and_records_why(tmp_path):
    (tmp_path / autosize.REPORT_FILE).write_text(json.dumps({"adjustments": []}))
    coordinator = AsyncCoordinator(num_actors=2, slots_per_actor=2, batch_unrolls=1, max_policy_lag=8)
    accounts = SimpleNamespace(dropped={}, produced=0)
    trainer = SimpleNamespace(coordinator=coordinator, accounts=accounts, run_dir=tmp_path, elapsed=lambda: 12.0)
    clock = _Clock()
    adjuster = BatchAdjuster(window_s=10.0, clock=clock)
    adjuster.on_start(trainer)
    for _ in range(11):  # the learner busy 0.95 s of every second, two unrolls left waiting at each batch
        coordinator.pending = [(0, None), (1, None)]
        adjuster.on_batch(trainer, None)
        clock.now += 0.95
        accounts.produced += 512
        adjuster.on_update(trainer, {})
        clock.now += 0.05
    assert coordinator.batch_unrolls == 2
    (entry,) = json.loads((tmp_path / autosize.REPORT_FILE).read_text())["adjustments"]
    assert entry["batch_unrolls"] == [1, 2] and "the learner falls behind" in entry["reason"]
    with pytest.raises(FlowControlError, match="give 1 to 4"):
        coordinator.resize_batch(5)


class _FakeLearner:
    """An update costs 0.2 s + 1 ms per frame on the fake clock."""

    def __init__(self, clock: _Clock):
        self.clock = clock

    def update(self, batch: dict, frames: int) -> None:
        self.clock.now += 0.2 + 1e-3 * frames


def test_the_learner_is_timed_at_sizes_that_fit_and_at_two_at_least_when_the_second_fits_the_hard_limit():
    import gymnasium as gym

    from menger.transport import UnrollSpec
    from menger.transport.shm import UnrollBuffers

    buffers = UnrollBuffers(UnrollSpec(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), 4, 16), 1, shared=False)
    clock = _Clock()
    samples = autosize._time_learner(_FakeLearner(clock), buffers, clock, deadline=30.0, second_by=30.0)
    assert [n for n, _ in samples] == [64, 256, 1024, 4096]  # the next (16,384 frames, about 16 s) does not fit
    assert samples[0][1] == pytest.approx(0.2 + 0.064) and clock.now <= 30.0
    clock = _Clock()
    tight = autosize._time_learner(_FakeLearner(clock), buffers, clock, deadline=0.9, second_by=3.0)
    assert [n for n, _ in tight] == [64, 256] and clock.now <= 3.0  # the second size past the soft deadline
