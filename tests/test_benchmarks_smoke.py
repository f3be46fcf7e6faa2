"""Smoke tests of the benchmarks (throughput, soak, replay, autosize, ...): each runs end to end with tiny
durations.

Benchmarks sit outside the package and are not imported by anything else, so without these they rot
silently when the runtime or the config schema moves under them.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from menger.experiment import load_experiment

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # benchmarks import each other by their bare names


def _benchmark(name: str):
    """Loads benchmarks/NAME.py under a name of its own.

    A plain `import NAME` could return a test package of the same name instead (tests/multiagent is one, and
    pytest puts tests/ on sys.path), depending on which tests ran first.
    """
    key = f"menger_benchmark_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


replay = _benchmark("replay")
soak = _benchmark("soak")
throughput = _benchmark("throughput")


def _record(wall_s: float, frames: int) -> dict:
    return {"time/wall_s": wall_s, "time/env_frames": frames}


def test_training_rate_leaves_out_start_up_and_the_summary_record():
    records = [_record(1.0, 0), _record(2.0, 1000), _record(3.0, 3000), _record(4.0, 5000), _record(9.0, 5500)]
    assert throughput.training_rate(records) == pytest.approx((5000 - 1000) / (4.0 - 2.0))


def test_training_rate_refuses_too_few_records():
    with pytest.raises(ValueError, match="run longer"):
        throughput.training_rate([_record(1.0, 0), _record(2.0, 100), _record(3.0, 200)])


def test_growth_is_measured_after_the_warm_up_only():
    series = [(float(t), 100 if t < 20 else 200 + t) for t in range(100)]  # a jump during warm-up, then a slope
    growth = soak.growth_pct(series, warmup_fraction=0.2, duration_s=100)
    start, end = statistics.median(200 + t for t in range(20, 28)), statistics.median(200 + t for t in range(92, 100))
    assert growth == pytest.approx(100 * (end - start) / start)
    assert soak.growth_pct(series[:21], warmup_fraction=0.2, duration_s=100) is None


def test_children_and_their_memory_are_found_in_proc():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 5
        while child.pid not in soak.child_pids(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in soak.child_pids(os.getpid())
        assert soak.read_memory_kib(child.pid)["VmRSS"] > 0
    finally:
        child.kill()
        child.wait()
    assert soak.read_memory_kib(child.pid) is None


def test_pong_ceiling_uses_one_atari_vector_env():
    config = load_experiment("pong-impala", ["runtime.envs_per_actor=2"])
    limits = throughput.ceilings(config, seconds=0.2)
    assert set(limits) == {"vector"} and limits["vector"] > 0


def test_throughput_main_runs_cartpole(tmp_path, capsys):
    out = tmp_path / "out.json"
    rows = throughput.main(["--env", "cartpole", "--seconds", "2", "--ceiling-seconds", "0.2",
                            "--envs-per-actor", "64", "--json", str(out)])
    (row,) = rows
    assert row["envs_per_actor"] == 64 and row["actors"] == 1
    assert row["ceilings"]["vector"] > row["ceilings"]["single"] > 0
    assert row["training_env_steps_per_s"] > 0 and row["runs"][0]["training"]["env_frames"] > 0
    (run,) = row["runs"]
    assert row["ratio"] == pytest.approx(run["training"]["env_steps_per_s"] / run["ceilings"]["vector"])
    assert json.loads(out.read_text())[0]["training_env_steps_per_s"] == row["training_env_steps_per_s"]
    assert "CartPole-v1" in capsys.readouterr().out


def test_soak_main_samples_learner_and_actors(tmp_path, capsys):
    samples_csv = tmp_path / "soak.csv"
    status = soak.main(["--minutes", "0.06", "--interval", "0.4", "--csv", str(samples_csv),
                        "--set", "runtime.envs_per_actor=4"])
    rows = list(csv.DictReader(samples_csv.open()))
    roles = {row["role"] for row in rows}
    assert "learner" in roles and sum(role.startswith("actor-") for role in roles) == 2
    assert all(int(row["rss_kib"]) > 0 for row in rows)
    output = capsys.readouterr().out
    unroll_length, obs_bytes, step_bytes = 32, 4 * 4, 8 + 4 * 4  # CartPole: 4 float obs; action int64, 4 floats
    assert f"bytes per env slot: {(unroll_length + 1) * obs_bytes + unroll_length * step_bytes:,d}" in output
    assert status == (1 if "verdict: FAIL" in output else 0)


def test_replay_actors_insert_while_the_learner_samples():
    figures = replay.measure_actors(4096, 64, 0.3, 1, unroll=8, envs=8, fill_seconds=5.0)
    assert figures["actors"] == 2 and figures["actors_alive"] and figures["filled_fraction"] > 0.5
    assert figures["inserts_per_s"] > 0 and figures["samples_per_s"] > 0
    assert not [p for p in mp.active_children() if p.name.startswith("replay-bench-actor")]  # stopped and joined


def test_memory_benchmark_reads_a_real_r2d2_run_and_reports_the_sides(tmp_path, monkeypatch, capsys):
    """benchmarks/memory.py end to end on one short real R2D2 run (no target), with the slower sides faked."""
    memory = _benchmark("memory")

    def short(task, seed, python, overrides, root, timeout_s):
        extra = ["stop.target_return=null", "stop.env_frames=3000", "replay.min_size=64", "eval.interval_s=0.3"]
        return real(task, seed, python, [*overrides, *extra], root, timeout_s)

    real = memory.run_menger
    monkeypatch.setattr(memory, "run_menger", short)
    monkeypatch.setattr(memory, "run_peer", lambda seed, python: {
        "reached": True, "train_s": 40.0, "steps": 30_000, "best_eval": 480.0, "final_train_s": 40.0,
        "final_steps": 30_000, "evals": [[2048, 4.0, 20.0], [30_000, 40.0, 480.0]], "load": 1.0})
    out = memory.main(["--sides", "menger-r2d2", "recurrent-ppo", "--seeds", "1", "--plot", str(tmp_path / "c.png"),
                       "--json", str(tmp_path / "m.json")])
    run = out["runs"][1]["menger-r2d2"]
    assert not run["reached"] and run["final_steps"] >= 3000 and run["evals"]  # it evaluated on the way
    assert (tmp_path / "c.png").stat().st_size > 0 and json.loads((tmp_path / "m.json").read_text())["runs"]
    assert "RecurrentPPO / R2D2" not in capsys.readouterr().out  # R2D2 did not reach 475: no ratio is made up


def test_faults_benchmark_runs_a_fault_test_and_reads_back_its_verdict_and_figure(tmp_path):
    faults = _benchmark("faults")

    out = faults.main(["--only", "disk full", "--json", str(tmp_path / "f.json")])
    row = out["faults"]["disk full during a save"]
    assert row["injected"] == 3 and row["survived"] == 3  # one per parametrized file the disk fills on
    assert all("previous checkpoint's hashes unchanged: True" in case["printed"][-1] for case in row["cases"])
    assert faults._belongs("tests.faults.test_actor_faults::test_x[cartpole-ppo]", "tests/faults/test_actor_faults.py")
    assert not faults._belongs("tests.test_checkpoint::test_y", "tests/test_checkpoint.py::test_x")


def test_connect_four_benchmark_times_random_play_and_alpha_beta(tmp_path):
    connect_four = _benchmark("connect_four")

    out = connect_four.main(["--seconds", "0.05", "--repeats", "2", "--depth", "1", "--games", "4",
                             "--json", str(tmp_path / "c4.json")])
    assert out["random_games_per_s"] > 0 and len(out["random_games_per_s_runs"]) == 2
    assert out["alphabeta_moves_per_s"] > 0 and out["match_games"] == 4
    assert json.loads((tmp_path / "c4.json").read_text())["alphabeta_depth"] == 1


def test_the_search_benchmark_times_both_position_kinds_side_by_side(tmp_path, capsys):
    import torch

    search_speed = _benchmark("search_speed")
    threads = torch.get_num_threads()
    try:
        out = search_speed.main(["--games", "2", "--repeats", "1", "--play-walks", "8", "--json",
                                 str(tmp_path / "s.json")])
    finally:
        torch.set_num_threads(threads)
    for key in ("step_s gumbel, 16 walks", "step_s puct, 50 walks", "move_s network value", "move_s half playouts"):
        assert out[key]["pettingzoo"] > 0 and out[key]["bitboards"] > 0
    assert "speed-up" in capsys.readouterr().out and json.loads((tmp_path / "s.json").read_text())["games"] == 2


def test_the_multiagent_benchmark_prints_each_figure_beside_its_baseline(capsys):
    multiagent = _benchmark("multiagent")
    import torch

    threads = torch.get_num_threads()
    try:
        multiagent.main(["--seconds", "0.2", "--repeats", "1", "--games", "4", "--train-s", "0"])
    finally:
        torch.set_num_threads(threads)  # the benchmark times one core; the tests after it keep theirs
    out = capsys.readouterr().out
    assert "PettingZoo random play" in out and "Menger self-play" in out and "ratio" in out
    assert "wargame raw env, 8 games, random actions:" in out and "game steps/s" in out


@pytest.mark.slow
def test_the_exploitability_benchmark_trains_both_sides_and_an_exploiter_of_each(tmp_path, capsys):
    exploitability = _benchmark("exploitability")
    out = exploitability.main(["--budget-frames", "3072", "--exploiter-frames", "1024", "--games", "2", "--out",
                               str(tmp_path), "--set", "runtime.envs_per_actor=4", "--set", "runtime.actors=1",
                               "--json", str(tmp_path / "e.json")])
    selfplay, league = out["connect4-selfplay"], out["connect4-league"]
    assert selfplay["exploiter"]["target"] == str(tmp_path / "connect4-selfplay")
    assert league["exploiter"]["target"] == str(tmp_path / "connect4-league" / "players" / "main_0")
    assert (selfplay["learners"], league["learners"]) == (1, 3)
    assert selfplay["env_frames"] >= 3072 and league["env_frames"] >= 3 * 1024  # the frames split over the league
    for side in (selfplay, league):
        assert side["exploiter"]["games"] == 2 and 0.0 <= side["exploiter_win_rate"] <= 1.0
    printed = capsys.readouterr().out
    assert "exploiter wins" in printed and "league_exploiter_0" in printed  # the league's Elo table
    assert json.loads((tmp_path / "e.json").read_text())["connect4-league"]["exploiter_win_rate"] >= 0


def test_gradient_modes_reads_the_target_record_and_counts_a_gradient_per_worker():
    gradient_modes = _benchmark("gradient_modes")
    modes = {mode.name: mode for mode in gradient_modes.MODES}
    records = [{**_record(1.0, 1000), "learner/updates": 10, "learner/policy_lag_mean": 1.0,
                "episode/return_mean": 300.0},
               {**_record(2.0, 3000), "learner/updates": 30, "learner/policy_lag_mean": 2.0,
                "episode/return_mean": 480.0, "transport/frames_dropped/policy_lag": 256}]
    run = gradient_modes.read_run(records, modes["sync PS"], 4, seed=1, load=0.5)
    assert (run.frames_to_target, run.seconds_to_target) == (3000, 2.0)
    assert run.updates_per_s == 15.0 and run.gradients_per_s == 60.0 and run.frames_per_s == 1500.0
    assert run.policy_lag_mean == 1.5 and run.stale_frames_dropped == 256
    unreached = gradient_modes.read_run(records[:1], modes["async PS"], 4, seed=1, load=0.5)
    assert unreached.frames_to_target is None and unreached.gradients_per_s == unreached.updates_per_s == 10.0
    # the DQN family reads the greedy evaluation and leaves the evaluations' seconds out
    evaluated = [dict(records[0], **{"eval/return_mean": 200.0, "eval/time_s": 0.2}),
                 dict(records[1], **{"episode/return_mean": 100.0, "eval/return_mean": 490.0, "eval/time_s": 0.5,
                                     "learner/gradients_dropped_stale": 3})]
    gorila = gradient_modes.read_run(evaluated, modes["GORILA async PS"], 2, seed=1, load=0.5)
    assert (gorila.frames_to_target, gorila.seconds_to_target) == (3000, 1.5)
    assert gorila.updates_per_s == 20.0 and gorila.stale_frames_dropped == 256 + 3
    assert [m.flags(2) for m in gradient_modes.MODES if m.family == "dqn"] == [
        [], ["--learners", "2", "--set", "runtime.parameter_server.update=sync"], ["--learners", "2"]]


@pytest.mark.slow
def test_the_gradient_modes_benchmark_prints_a_row_per_mode_and_every_column(tmp_path, capsys):
    gradient_modes = _benchmark("gradient_modes")
    rows = gradient_modes.main(["--workers", "1", "--seeds", "1", "--wall-clock-s", "4", "--launcher", "threads",
                                "--json", str(tmp_path / "g.json")])
    names = [mode.name for mode in gradient_modes.MODES]
    assert [(row["mode"], row["workers"]) for row in rows] == [(name, 1) for name in names]
    assert all(row["updates_per_s"] > 0 and row["frames_per_s"] > 0 for row in rows)
    assert all(row["gradients_per_s"] == row["updates_per_s"] for row in rows)  # one worker: one gradient an update
    printed = capsys.readouterr().out.splitlines()
    assert all(heading in printed[0] for heading in gradient_modes.COLUMNS)
    for name in names:
        assert any(line.startswith(f"{name} ") for line in printed[2:])
    assert len(json.loads((tmp_path / "g.json").read_text())["runs"]) == len(names)


def test_the_pbt_benchmark_runs_a_population_and_its_fixed_twin_and_prints_the_comparison(tmp_path, capsys):
    pbt = _benchmark("pbt")
    rows = pbt.main(["--population", "2", "--ready", "128", "--budget", "256", "--seeds", "0", "--out",
                     str(tmp_path), "--set", "runtime.envs_per_actor=4", "--set", "runtime.unroll_length=16",
                     "--set", "ppo.epochs=1"])
    assert len(rows) == 1 and len(rows[0]["fixed_each"]) == 2
    assert rows[0]["fixed_median"] == float("inf")  # 256 frames reach no target: the comparison says so
    printed = capsys.readouterr().out
    assert all(heading in printed for heading in pbt.COLUMNS) and ">0.256k" in printed
    assert (tmp_path / "pbt-0" / "lineage.png").exists() and (tmp_path / "fixed-0" / "population.json").exists()


def test_the_autosize_benchmark_reads_rates_between_updates():
    autosize = _benchmark("autosize")
    clock = autosize.UpdateClock()
    clock.points = [(10.0, 1000), (12.0, 5000), (14.0, 9000)]
    assert clock.rate() == 2000.0  # from the first update on: the frames before it and the start-up left out
    clock.points = clock.points[:1]
    assert clock.rate() is None  # the caller reads the run's whole time instead


def test_the_autosize_benchmark_sets_auto_beside_a_grid_and_prints_the_ratio(tmp_path, capsys):
    autosize = _benchmark("autosize")
    rows = autosize.main(["--cases", "cartpole-impala", "--actors", "1", "--envs", "8", "--window-s", "2",
                          "--repeats", "1", "--json", str(tmp_path / "a.json")])
    (row,) = rows
    assert row["best_layout"] == "1x8" and row["best_rate"] > 0 and row["auto_rate"] > 0
    assert row["ratio"] == pytest.approx(row["auto_rate"] / row["best_rate"])
    assert 0 < row["picking_s"] <= 30 and len(row["auto_layouts"]) == 1
    assert json.loads((tmp_path / "a.json").read_text())[0]["auto_rate"] == row["auto_rate"]
    assert "auto/best" in capsys.readouterr().out


def test_the_cartpole_algorithms_benchmark_runs_each_preset_and_reads_its_own_criterion(tmp_path, capsys):
    bench = _benchmark("cartpole_algorithms")
    assert bench.criterion("cartpole-pqn") == "eval/return_mean"  # its actors explore: the greedy evaluation
    assert bench.criterion("cartpole-ppo") == "episode/return_mean"
    text = bench.main(["--presets", "cartpole-pqn", "cartpole-ppo", "--seeds", "1", "--target", "5",
                       "--set", "stop.env_frames=1024", "--set", "checkpoint.interval_s=0", "--set", "eval.interval_s=0.01",
                       "--keep", str(tmp_path)])
    assert "| cartpole-pqn | eval/return_mean | 1 |" in text and "| cartpole-ppo | episode/return_mean | 1 |" in text
    assert "| cartpole-pqn | 1/1 |" in text and "| cartpole-ppo | 1/1 |" in text  # a target of 5 is met at once


def test_the_suite_peers_benchmark_trains_each_cell_once_and_puts_menger_beside_sb3(tmp_path, monkeypatch, capsys):
    """benchmarks/suite_peers.py with the SB3 worker faked: the suite's budgets (the algorithm's own where the entry
    gives one) and evaluation spacing reach it, Box-only algorithms skip Discrete envs, a finished cell is not
    trained again, and the ratio is Menger's normalised final against SB3's."""
    peers = _benchmark("suite_peers")
    specs = []

    def fake_cell(python, spec, path):
        specs.append(spec)
        result = {"env": spec["env"], "seed": spec["seed"], "status": "done", "final_return": -600.0,
                  "best_return": -500.0, "frames": spec["frames"], "wall_s": 1.0, "curve": [[spec["frames"], -600.0]],
                  "load": 1.0}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result))
        return result

    monkeypatch.setattr(peers, "run_cell", fake_cell)
    menger_table = tmp_path / "classic" / "sac" / "table.json"
    menger_table.parent.mkdir(parents=True)
    menger_table.write_text(json.dumps({"rows": [{"env": "Pendulum-v1", "final_mean": -200.0,
                                                  "final_ci": [-210.0, -190.0]}]}))
    argv = ["classic", "--algo", "sac", "--seeds", "2", "--envs", "CartPole-v1", "Pendulum-v1",
            "--out", str(tmp_path)]
    out = peers.main(argv)
    assert [(s["env"], s["seed"], s["frames"], s["interval"], s["sb3_algo"]) for s in specs] == [
        ("Pendulum-v1", 1, 20_000, 1_000, "SAC"), ("Pendulum-v1", 2, 20_000, 1_000, "SAC")]  # sac's own budget
    rows = {row["env"]: row for row in out["rows"]}
    assert rows["CartPole-v1"]["skipped"] and not rows["CartPole-v1"]["seeds"]
    pendulum = rows["Pendulum-v1"]
    assert pendulum["seeds"] == [1, 2] and pendulum["final_mean"] == -600.0
    assert pendulum["menger_final_mean"] == -200.0
    random = pendulum["random"]
    assert pendulum["ratio"] == pytest.approx((-200.0 - random) / (-600.0 - random))
    assert "| Pendulum-v1 | 2 | -600.0" in (tmp_path / "classic" / "sb3-sac" / "table.md").read_text()
    peers.main(argv)
    assert len(specs) == 2  # both cells had results: nothing trained again


def test_the_suite_peers_table_gives_no_ratio_where_sb3_ended_at_random():
    """SB3's PPO at MountainCar's -200, a random policy's return: no scale to measure Menger against, so the
    ratio is left out and says why, instead of Menger's final divided by SB3's."""
    peers = _benchmark("suite_peers")
    from menger.commands.bench import load_suite

    suite = load_suite("classic")
    results = [{"env": "MountainCar-v0", "status": "done", "seed": s, "final_return": -200.0, "best_return": -200.0,
                "frames": 300_000, "wall_s": 1.0, "curve": [[300_000, -200.0]]} for s in (1, 2, 3)]
    rows = peers.peer_rows(suite, "ppo", results, {"MountainCar-v0": {"final_mean": -106.9,
                                                                       "final_ci": [-111.0, -101.4]}})
    assert rows[0]["ratio"] is None and rows[0]["ratio_kind"] == "reference at random"
    table = peers.format_rows("classic", "ppo", "PPO", rows, "python benchmarks/suite_peers.py classic --algo ppo")
    assert "| -106.9 [-111.0, -101.4] | – (SB3 at random) |" in table


def test_the_gpu_sharing_benchmark_sets_each_heuristic_beside_the_reference_simulators_runs(tmp_path, capsys,
                                                                                          monkeypatch):
    import numpy as np

    from menger.apps.gpucluster.synthetic import synthetic_nodes, synthetic_tasks
    from menger.apps.gpucluster.trace import write_nodes, write_tasks
    rng = np.random.default_rng(0)
    write_nodes(tmp_path / "nodes.csv", synthetic_nodes(20, rng))
    write_tasks(tmp_path / "tiny_trace.csv", synthetic_tasks(500, rng))
    with (tmp_path / "reference.csv").open("w", newline="") as handle:  # the simulator's format, one FGD run
        writer = csv.writer(handle)
        writer.writerow(["workload", "sc_policy", "tune", "seed", "total_gpus", *range(131)])
        writer.writerow(["tiny_trace", "06-FGD", 1.3, 42, 100, *[min(p, 90.0) for p in range(131)]])
    bench = _benchmark("gpu_sharing")
    monkeypatch.setattr(sys, "argv", ["gpu_sharing.py", "--nodes", str(tmp_path / "nodes.csv"), "--trace",
                                      str(tmp_path / "tiny_trace.csv"), "--reference", str(tmp_path / "reference.csv"),
                                      "--seeds", "2", "--out", str(tmp_path / "out")])
    bench.main()
    out = capsys.readouterr().out
    assert out.count("menger") == 6 and out.count("reference") == 1  # one row per heuristic; FGD has a reference row
    result = json.loads((tmp_path / "out" / "tiny_trace.json").read_text())
    assert result["policies"]["fgd"]["max_gap_80_130"] is not None
    assert result["policies"]["best-fit"]["max_gap_80_130"] is None


def test_the_scale_benchmark_measures_emulated_fleets_and_a_killed_host(tmp_path, capsys):
    bench = _benchmark("scale")
    points, replay, chaos, _, (on_ray, ray_chaos) = bench.main(
        ["--actors", "8", "64", "--hosts", "2", "--offered", "400", "--seconds", "1", "--settle-s", "0.2",
         "--writers", "32", "--shards", "1", "4", "--data-plane", "shm", "--cache-hosts",  # the caches: a test below
         "--ray-actors", "--no-ray-chaos",  # on Ray: the test below
         "--chaos-actors", "32", "--chaos-hosts", "2", "--out", str(tmp_path)])
    assert on_ray == [] and ray_chaos is None
    out = capsys.readouterr().out
    assert [p.actors for p in points] == [8, 64] and all(p.learned_per_s > 0 and p.per_core > 0 for p in points)
    assert "per learner core at 64 actors" in out and (tmp_path / "scale.png").exists()
    assert [(p.writers, p.shards) for p in replay] == [(32, 1), (32, 4)] and all(p.items_per_s > 0 for p in replay)
    planes = [line.split() for line in out.splitlines() if line.strip().startswith("shared memory")]
    assert sorted(words[2] for words in planes) == ["atari", "cartpole"]
    assert "largest error over the measured points" in out and "first bottleneck" in out
    assert chaos.killed_actors == 16 and chaos.duplicates == 0
    assert chaos.produced == chaos.learned + chaos.dropped + chaos.pending
    replay_chaos = next(line for line in out.splitlines() if line.startswith("chaos: replay"))
    assert "shard 0's 8 writers killed" in replay_chaos and "all back in nan" not in replay_chaos
    assert "duplicates 0;" in replay_chaos and replay_chaos.endswith("True")


def test_the_scale_benchmark_runs_the_learner_loop_and_a_killed_host_on_ray(tmp_path, capsys):
    pytest.importorskip("ray")
    bench = _benchmark("scale")
    points, replay, chaos, caches, (on_ray, ray_chaos) = bench.main(
        ["--actors", "8", "--ray-actors", "8", "32", "--hosts", "2", "--offered", "200", "--seconds", "1",
         "--settle-s", "0.2", "--writers", "--data-plane", "--cache-hosts", "--chaos-actors", "32",
         "--chaos-hosts", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert [p.actors for p in points] == [8] and [p.actors for p in on_ray] == [8, 32] and all(p.learned_per_s > 0 for p in on_ray)
    assert "the same on Ray" in out and "per learner core at 32 actors" in out
    assert ray_chaos.killed_actors == 16 and ray_chaos.duplicates == 0 and ray_chaos.back_s == ray_chaos.back_s
    assert ray_chaos.produced == ray_chaos.learned + ray_chaos.dropped + ray_chaos.pending
    assert "chaos on Ray: 32 actors on 2 hosts" in out


def test_the_cache_benchmark_counts_what_the_learner_sends_in_each_layout_and_routes_around_a_killed_cell(capsys):
    pytest.importorskip("ray")
    bench = _benchmark("cache_tree")
    points, chaos = bench.main(["--hosts", "8", "--seconds", "2", "--publish-s", "0.5", "--chaos-hosts", "8"])
    out = capsys.readouterr().out
    by_layout = {p.layout: p for p in points}
    assert sorted(by_layout) == ["flat", "per-host", "tree"] and all(p.sends_per_version > 0 for p in points)
    # the learner tells nobody (flat), every host (per-host), or the 2 cells of fan-out 4 over 8 hosts (tree)
    assert [by_layout[name].msgs_per_version for name in ("flat", "per-host", "tree")] == [0.0, 8.0, 2.0]
    assert by_layout["tree"].cells == 2 and "tree at 8 hosts: 2 tiers" in out
    assert chaos.rerouted == 4  # the killed process held the first cell, over hosts 0-3
    assert chaos.read_max_s < 60.0 and "chaos: tree at 8 hosts" in out
