"""SJF, Packer and random on hand-built states; evaluation; the schedule command."""

import csv

import numpy as np
import pytest

from menger.apps.cluster.commands import ObservationScheduler, schedule_main
from menger.apps.cluster.config import ClusterConfig
from menger.apps.cluster.heuristics import RandomScheduler, evaluate, packer, shortest_job_first
from menger.apps.cluster.simulator import ClusterState


def make_state(used_now, durations, demands, horizon=20):
    """A cluster whose current usage ``used_now`` lasts the whole horizon."""
    durations = np.array(durations, dtype=np.int64)
    return ClusterState(
        time=0, capacity=10,
        used=np.tile(np.array(used_now, dtype=np.int64), (horizon, 1)),
        slot_present=durations > 0, slot_duration=durations,
        slot_demand=np.array(demands, dtype=np.int64), backlog_count=0, since_last_arrival=0)


def test_sjf_picks_the_shortest_job_that_fits_now():
    # Slot 0 is shortest but needs 8 CPU while only 6 are free; slot 3 is empty.
    state = make_state([4, 0], [1, 5, 2, 0], [[8, 1], [2, 2], [3, 3], [0, 0]])
    assert shortest_job_first(state) == 2


def test_sjf_breaks_ties_by_slot_order():
    state = make_state([0, 0], [4, 2, 2], [[1, 1], [1, 1], [1, 1]])
    assert shortest_job_first(state) == 1


def test_packer_picks_the_best_alignment_with_free_resources():
    # Free: (8, 2). Alignments: slot 0 -> 8*1+2*2 = 12, slot 1 -> 8*5+2*1 = 42, slot 2 does not fit (9 > 8).
    state = make_state([2, 8], [3, 3, 3], [[1, 2], [5, 1], [9, 1]])
    assert packer(state) == 1


def test_heuristics_wait_when_nothing_fits_now():
    state = make_state([9, 9], [1, 2, 0], [[2, 1], [1, 2], [0, 0]])
    for scheduler in (shortest_job_first, packer, RandomScheduler(0)):
        assert scheduler(state) == 3


def test_random_only_starts_jobs_that_fit():
    state = make_state([5, 0], [1, 1, 1, 1], [[6, 1], [5, 1], [9, 1], [1, 1]])
    scheduler = RandomScheduler(seed=1)
    picks = {scheduler(state) for _ in range(200)}
    assert picks == {1, 3}


def test_evaluate_reports_pooled_metrics_and_sjf_beats_random_at_high_load():
    seeds = range(1_000_000, 1_000_006)
    sjf = evaluate(shortest_job_first, {"load": 1.5, "num_jobs": 40}, seeds)
    rand = evaluate(RandomScheduler(0), {"load": 1.5, "num_jobs": 40}, seeds)
    assert (sjf["episodes"], sjf["jobs"], sjf["unfinished_jobs"]) == (6, 240, 0)
    assert sjf["mean_slowdown"] >= 1.0 and 0 < sjf["utilisation"] <= 1
    assert sjf["mean_slowdown"] < rand["mean_slowdown"]


def test_evaluate_is_deterministic_per_seed():
    kwargs = {"load": 0.8, "num_jobs": 20}
    assert evaluate(packer, kwargs, [5, 6]) == evaluate(packer, kwargs, [5, 6])


def test_observation_scheduler_feeds_a_batch_of_one_image():
    config = ClusterConfig(action_mask=True)
    seen = []

    def act(batch, deterministic):
        seen.append((batch["obs"].shape, batch["action_mask"].shape, deterministic))
        return np.array([5])

    state = make_state([0, 0], [1, 0, 0, 0, 0], [[1, 1]] + [[0, 0]] * 4)
    assert ObservationScheduler(act, config)(state) == 5
    assert seen == [((1, 20, 124), (1, 6), True)]


def test_schedule_command_prints_each_policy(capsys):
    assert schedule_main(["--policy", "sjf", "--policy", "packer", "--episodes", "2", "--load", "0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["policy", "sjf", "packer"]


def test_schedule_sweep_writes_csv_and_png(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["--sweep-load", "0.3:0.9:0.3", "--policy", "sjf", "--episodes", "2", "--out", str(out)]
    assert schedule_main(argv) == 0
    with (out / "slowdown_vs_load.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [float(r["load"]) for r in rows] == [0.3, 0.6, 0.9]
    assert (out / "slowdown_vs_load.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, message", [
    (["--policy", "nope"], "Unknown policy 'nope'"),
    (["--env", "num_slot=3"], "Did you mean 'num_slots'"),
    (["--sweep-load", "1:0.5:0.1"], "START <= STOP"),
    (["--trace", "x.csv", "--load", "1"], "cannot be combined"),
])
def test_schedule_command_errors_exit_2_with_a_message(argv, message, capsys):
    assert schedule_main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_run_directory_is_compared_on_its_training_settings(tmp_path, monkeypatch, capsys):
    import types

    import menger.api

    shapes = []

    def act(batch, deterministic):
        shapes.append(batch.shape)
        return np.array([3])  # always wait

    run_config = types.SimpleNamespace(env=types.SimpleNamespace(kwargs={"num_slots": 3, "new_job_rate": 0.5}))
    monkeypatch.setattr(menger.api, "load_run_config", lambda run_dir: run_config)
    monkeypatch.setattr(menger.api, "load_policy", lambda run_dir: types.SimpleNamespace(act=act))
    argv = ["--policy", str(tmp_path), "--policy", "sjf", "--episodes", "1", "--env", "time_limit=30"]
    assert schedule_main(argv) == 0
    assert set(shapes) == {(1, 20, 2 * (1 + 3) * 10 + 3 + 1)}, "the run's num_slots=3 sets the image"
    trained, sjf = capsys.readouterr().out.splitlines()[1:]
    assert float(trained.split()[-1]) == 0.0, "a policy that only waits uses nothing"
    assert float(sjf.split()[-1]) > 0.0


def test_slowdown_stderr_is_the_spread_of_episode_means_over_root_n():
    seeds = range(1_000_000, 1_000_008)
    per_episode = [evaluate(shortest_job_first, {"load": 1.0}, [seed])["mean_slowdown"] for seed in seeds]
    pooled = evaluate(shortest_job_first, {"load": 1.0}, seeds)
    assert pooled["slowdown_stderr"] == pytest.approx(np.std(per_episode, ddof=1) / np.sqrt(len(seeds)))
    assert evaluate(shortest_job_first, {"load": 1.0}, seeds[:1])["slowdown_stderr"] == 0.0
