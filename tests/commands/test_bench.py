"""`menger bench`: the suite files validate, the table's arithmetic, and the runner's resume, failure and skip rules
(with a fake cell runner; one real CartPole cell of 2,000 frames is marked slow)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from menger.commands.bench import (
    Cell,
    bench,
    SuiteError,
    aggregate_curve,
    bootstrap_interval,
    check_imports,
    collect_results,
    draw_curves,
    load_suite,
    plan_cells,
    ratio,
    run_bench,
    suite_names,
    table_rows,
    validate_suite,
    write_report,
    MissingPackageError,
)

SUITES = ["atari", "box2d", "classic", "minatar", "mujoco", "pettingzoo", "pomdp"]
SOURCE = {"title": "a paper", "url": "https://example.org/paper"}


def tiny_suite(**entry) -> dict:
    return {"name": "tiny", "description": "two envs", "algos": ["ppo"], "entries": [
        {"id": "CartPole-v1", "action": "discrete", "frames": 1000, "random": {"value": 20.0, "computed": "here"},
         "reference": {"ppo": {"value": 500.0, "source": SOURCE}}, **entry},
        {"id": "Pendulum-v1", "action": "continuous", "frames": 1000, "note": "no reference found"}]}


# ------------------------------------------------------------------------------------------------------- suites
@pytest.mark.parametrize("name", SUITES)
def test_every_suite_file_validates(name):
    suite = load_suite(name)
    assert suite.name == name and suite.algos and suite.entries
    for entry in suite.entries:
        assert entry.frames > 0 and entry.action in ("discrete", "continuous")
        for reference in entry.reference.values():
            assert np.isfinite(reference.value) and reference.source.url.startswith("https://")
        assert entry.reference or entry.note, f"{entry.id}: a missing reference says why"
        for settings in entry.settings.values():
            assert settings.source.url.startswith("https://") and all("." in key for key in settings.values)


def test_the_required_suites_ship():
    assert set(SUITES) <= set(suite_names())
    assert {e.id for e in load_suite("classic").entries} == {"CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                                                              "Pendulum-v1", "MountainCarContinuous-v0"}
    assert len(load_suite("minatar").entries) == 5


def test_a_suite_with_mistakes_lists_each_with_the_fix():
    data = tiny_suite(frame=10, reference={"ppo": {"value": "high", "source": {"title": "x"}}})
    data["entries"][1]["frames"] = 0
    with pytest.raises(SuiteError) as error:
        validate_suite(data, "tiny.yaml")
    text = str(error.value)
    assert "unknown key 'frame' (did you mean 'frames'?)" in text
    assert "reference.ppo.value: a number" in text and "needs a title and an http(s) url" in text
    assert "(Pendulum-v1).frames: the frame budget" in text


def test_an_entry_without_reference_must_say_why():
    data = tiny_suite()
    del data["entries"][1]["note"]
    with pytest.raises(SuiteError, match="no reference: say why in a note"):
        validate_suite(data)


def test_an_unknown_suite_names_the_known_ones():
    with pytest.raises(SuiteError, match="did you mean 'classic'"):
        load_suite("clasic")


# ------------------------------------------------------------------------------------------------- the arithmetic
def test_bootstrap_interval_is_fixed_and_brackets_the_mean():
    values = [100.0, 200.0, 300.0]
    low, high = bootstrap_interval(values)
    assert (low, high) == bootstrap_interval(values)  # a fixed rng seed: the same table every time
    assert 100.0 <= low < 200.0 < high <= 300.0
    assert bootstrap_interval([7.0]) == (7.0, 7.0)


def test_ratio_is_normalized_by_random_or_plain_without_it():
    assert ratio(260.0, 500.0, 20.0) == (0.5, "normalized")
    assert ratio(250.0, 500.0, None) == (0.5, "plain")
    assert ratio(250.0, None, 20.0) == (None, "")
    # a reference that is a random policy's return (SB3 stuck at MountainCar's -200) has no scale: no ratio,
    # not mean / reference
    assert ratio(-106.9, -200.0, -200.0) == (None, "reference at random")


def fabricated(env: str, seed: int, final: float, best: float, status: str = "done") -> dict:
    return {"status": status, "env": env, "seed": seed, "final_return": final, "best_return": best,
            "frames": 1000 + seed, "wall_s": 10.0 * seed, "curve": [[0, 0.0], [500, best], [1000 + seed, final]]}


def test_table_rows_from_fabricated_results():
    suite = validate_suite(tiny_suite())
    results = [fabricated("CartPole-v1", 1, 200.0, 300.0), fabricated("CartPole-v1", 2, 400.0, 500.0),
               {"status": "failed", "env": "CartPole-v1", "seed": 3, "error": "boom"},
               {"status": "skipped", "env": "Pendulum-v1", "seed": 1, "reason": "cannot act"}]
    cartpole, pendulum = table_rows(suite, "ppo", results)
    assert cartpole["seeds"] == [1, 2] and cartpole["failed"] == [3]
    assert cartpole["final_mean"] == 300.0 and cartpole["best_mean"] == 400.0
    assert cartpole["final_ci"][0] >= 200.0 and cartpole["final_ci"][1] <= 400.0
    assert cartpole["frames_median"] == 1001.5 and cartpole["wall_s_median"] == 15.0
    assert cartpole["ratio"] == pytest.approx((300.0 - 20.0) / (500.0 - 20.0))
    assert cartpole["ratio_kind"] == "normalized"
    assert pendulum["skipped"] == "cannot act" and pendulum["final_mean"] is None  # a miss stays in the table


def test_aggregate_curve_interpolates_and_bands():
    grid, mean, low, high = aggregate_curve([[[0, 0.0], [100, 10.0]], [[0, 10.0], [100, 30.0]]], points=3)
    assert list(grid) == [0.0, 50.0, 100.0]
    assert list(mean) == [5.0, 12.5, 20.0]
    assert np.all(low <= mean) and np.all(mean <= high)


def test_write_report_renders_table_and_curves(tmp_path):
    suite = validate_suite(tiny_suite())
    for seed, final in ((1, 100.0), (2, 300.0)):
        run_dir = tmp_path / "CartPole-v1" / f"seed{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "result.json").write_text(json.dumps(fabricated("CartPole-v1", seed, final, final)))
    paths = write_report(tmp_path, suite, "ppo")
    table = paths["table"].read_text()
    assert "| CartPole-v1 | 2 | 200 [" in table and "normalized" in table
    assert json.loads(paths["json"].read_text())["rows"][0]["final_mean"] == 200.0
    assert paths["curves"].read_bytes().startswith(b"\x89PNG")


# ------------------------------------------------------------------------------------------------------ the runner
def discrete_only(algo: str):
    return "q", False, False


def plan(tmp_path, describe=discrete_only, **entry) -> list[Cell]:
    return plan_cells(validate_suite(tiny_suite(**entry)), "ppo", [1, 2], tmp_path, describe_algo=describe)


class FakeRunner:
    """Writes what a finished run leaves: a metrics.jsonl with evaluations and the final evaluation."""

    def __init__(self, fail_env: str = ""):
        self.calls: list[tuple[str, int, bool]] = []
        self.fail_env = fail_env

    def run(self, cell: Cell, resume: bool) -> int:
        self.calls.append((cell.env, cell.seed, resume))
        if cell.env == self.fail_env:
            (cell.run_dir / "error.txt").write_text("Traceback ...\nRuntimeError: the env exploded\n")
            return 1
        records = [{"step": 500, "time/wall_s": 1.0, "eval/return_mean": 50.0, "eval/count": 1},
                   {"step": 1000, "time/wall_s": 2.0, "eval/return_mean": 50.0, "eval/count": 1}]
        (cell.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (cell.run_dir / "final_eval.json").write_text(json.dumps({"return_mean": 40.0 + cell.seed}))
        return 0


def test_a_cell_the_algorithm_cannot_act_in_is_skipped_with_a_message(tmp_path):
    cells = plan(tmp_path)
    lines: list[str] = []
    summary = run_bench(cells, FakeRunner(), "menger bench tiny --algo ppo", echo=lines.append)
    assert [c.env for c in summary.skipped] == ["Pendulum-v1", "Pendulum-v1"]
    assert any("skipped: ppo acts in 'q' action spaces (discrete only); Pendulum-v1 has continuous" in line
               for line in lines)
    result = json.loads((cells[2].run_dir / "result.json").read_text())
    assert result["status"] == "skipped"


def test_a_done_cell_records_final_best_and_curve(tmp_path):
    cells = plan(tmp_path)
    run_bench(cells, FakeRunner(), "the command", echo=lambda _: None)
    result = json.loads((cells[0].run_dir / "result.json").read_text())
    assert result["status"] == "done" and result["final_from"] == "final evaluation"
    assert result["final_return"] == 41.0 and result["best_return"] == 50.0
    assert result["curve"] == [[500, 50.0], [1000, 41.0]] and result["frames"] == 1000
    assert result["command"] == "the command" and "menger train ppo --set env.id=CartPole-v1" in \
        result["train_command"]


def test_rerunning_skips_finished_cells_and_resumes_a_killed_one(tmp_path):
    cells = plan(tmp_path)
    runner = FakeRunner()
    run_bench(cells, runner, "cmd", echo=lambda _: None)
    assert runner.calls == [("CartPole-v1", 1, False), ("CartPole-v1", 2, False)]
    killed = cells[1].run_dir
    (killed / "result.json").unlink()  # killed after its checkpoint, before it finished
    (killed / "checkpoints").mkdir()
    (killed / "checkpoints" / "ckpt-1").write_text("x")
    again = FakeRunner()
    summary = run_bench(cells, again, "cmd", echo=lambda _: None)
    assert again.calls == [("CartPole-v1", 2, True)]
    assert len(summary.finished_before) == 3


def test_a_cell_stopped_by_a_signal_is_left_to_resume_and_the_bench_stops(tmp_path):
    class Stopped(FakeRunner):
        def run(self, cell: Cell, resume: bool) -> int:
            self.calls.append((cell.env, cell.seed, resume))
            return 128 + 15  # SIGTERM: cell_main stopped the run at a checkpoint

    cells, lines = plan(tmp_path), []
    runner = Stopped()
    summary = run_bench(cells, runner, "cmd", echo=lines.append)
    assert runner.calls == [("CartPole-v1", 1, False)] and summary.stopped is cells[0] and not summary.failed
    assert summary.exit_code == 143
    assert not (cells[0].run_dir / "result.json").exists()  # unfinished: the next bench resumes it
    assert "stopped by SIGTERM with a checkpoint; run the same command again to resume it" in lines[-1]


def test_a_failed_cell_is_recorded_and_the_bench_goes_on(tmp_path):
    suite = tiny_suite()
    suite["entries"].insert(0, {"id": "Acrobot-v1", "action": "discrete", "frames": 10, "note": "none"})
    cells = plan_cells(validate_suite(suite), "ppo", [1], tmp_path, describe_algo=discrete_only)
    runner = FakeRunner(fail_env="Acrobot-v1")
    summary = run_bench(cells, runner, "cmd", echo=lambda _: None)
    assert [c.env for c in summary.failed] == ["Acrobot-v1"]
    assert ("CartPole-v1", 1, False) in runner.calls
    failed = json.loads((cells[0].run_dir / "result.json").read_text())
    assert failed["status"] == "failed" and "the env exploded" in failed["error"]
    retried = FakeRunner()
    run_bench(cells, retried, "cmd", retry_failed=True, echo=lambda _: None)
    assert retried.calls == [("Acrobot-v1", 1, False)]


def test_published_settings_are_applied_as_overrides_only_when_asked_for(tmp_path):
    settings = {"ppo": {"source": SOURCE, "set": {"ppo.lr": 0.001, "model.hidden": [64, 64]}}}
    generic = plan(tmp_path, settings=settings)  # the generic preset alone, by default
    assert not any("ppo.lr" in o or "model.hidden" in o for o in generic[0].overrides)
    assert "eval.interval_frames=50" in generic[0].overrides  # 20 evaluations of the 1,000 frames, by frames
    assert str(generic[1].run_dir).endswith("tiny/ppo/CartPole-v1/seed2")
    cells = plan_cells(validate_suite(tiny_suite(settings=settings)), "ppo", [1, 2], tmp_path, published=True,
                       describe_algo=discrete_only)
    assert cells[0].overrides[:3] == ("env.id=CartPole-v1", "stop.env_frames=1000", "runtime.seed=1")
    assert "ppo.lr=0.001" in cells[0].overrides and "model.hidden=[64, 64]" in cells[0].overrides
    assert str(cells[1].run_dir).endswith("tiny/ppo+published/CartPole-v1/seed2")


def test_an_algorithm_can_have_its_own_budget_on_an_env(tmp_path):
    """`algo_frames`: a3c trains 5,000 frames where the others train the entry's 1,000; a user's file of a3c too."""
    suite = validate_suite(tiny_suite(algo_frames={"a3c": 5000}))
    assert suite.entries[0].budget("a3c") == 5000 and suite.entries[0].budget("ppo") == 1000
    cells = plan_cells(suite, "a3c", [1], tmp_path, envs=["CartPole-v1"], frames_scale=0.5,
                       describe_algo=discrete_only)
    assert cells[0].frames == 2500 and "stop.env_frames=2500" in cells[0].overrides
    assert "eval.interval_frames=125" in cells[0].overrides  # 20 evaluations of its own budget
    experiment = tmp_path / "my-a3c.yaml"
    experiment.write_text("extends: a3c\nname: my-a3c\n")
    assert plan_cells(suite, str(experiment), [1], tmp_path, envs=["CartPole-v1"])[0].frames == 5000
    with pytest.raises(SuiteError, match=r"algo_frames: a mapping of algorithm to its own frame budget"):
        validate_suite(tiny_suite(algo_frames={"a3c": 0}))


def test_an_experiment_file_of_the_users_runs_as_the_algo(tmp_path):
    """`--algo my-apex.yaml`: the cells train the file, in a folder named by its stem, not at the file's path."""
    experiment = tmp_path / "configs" / "my-apex.yaml"
    experiment.parent.mkdir()
    experiment.write_text("extends: apex\nname: my-apex\napex: {lr: 0.001}\n")
    out = tmp_path / "out"
    cells = plan_cells(load_suite("classic"), str(experiment), [1], out, envs=["CartPole-v1"])
    assert [c.env for c in cells] == ["CartPole-v1"] and not cells[0].skip_reason
    assert cells[0].run_dir == out / "classic" / "my-apex" / "CartPole-v1" / "seed1"
    assert f"menger train {experiment} --set env.id=CartPole-v1" in cells[0].train_command()
    lines: list[str] = []
    summary, paths = bench("classic", str(experiment), seeds=[1], out=out, envs=["CartPole-v1"], runner=FakeRunner(),
                           echo=lines.append)
    assert not any("is meant for" in line for line in lines)  # it trains apex, which the suite is for
    assert paths["table"] == out / "classic" / "my-apex" / "table.md" and experiment.read_text().startswith("extends")
    row = json.loads(paths["json"].read_text())["rows"][0]
    assert row["reference"] == load_suite("classic").entries[0].reference["apex"].value  # apex's, what it trains
    figure = draw_curves(load_suite("classic"), str(experiment), collect_results(out / "classic" / "my-apex"))
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert f"reference {row['reference']:g}" in labels  # the curves stand beside the same reference


def test_a_missing_env_package_names_the_extra(tmp_path):
    cells = plan(tmp_path, imports=["surely_not_installed_pkg"])
    with pytest.raises(MissingPackageError, match=r'pip install "menger-rl\[suites\]"'):
        check_imports(cells)


def test_the_real_presets_skip_by_action_space(tmp_path):
    suite = load_suite("classic")
    reasons = {c.env: c.skip_reason for c in plan_cells(suite, "sac", [1], tmp_path)}
    assert "discrete" in reasons["CartPole-v1"] and reasons["Pendulum-v1"] == ""
    assert all(not c.skip_reason for c in plan_cells(suite, "ppo", [1], tmp_path))


@pytest.mark.slow
def test_one_real_cell_trains_evaluates_and_resumes_as_done(tmp_path):
    from menger.cli import main

    argv = ["bench", "classic", "--algo", "ppo", "--seed-list", "1", "--envs", "CartPole-v1", "--frames-scale",
            "0.02", "--eval-episodes", "2", "--out", str(tmp_path)]
    assert main(argv) == 0
    result = json.loads((tmp_path / "classic/ppo/CartPole-v1/seed1/result.json").read_text())
    assert result["status"] == "done" and result["frames"] >= 2000 and result["final_from"] == "final evaluation"
    assert main(argv) == 0  # finished: skipped, the report written again
    assert (tmp_path / "classic/ppo/curves.png").is_file()
    assert main(["bench", "--report", str(tmp_path / "classic/ppo")]) == 0


def test_the_bench_starts_each_cell_to_end_with_the_bench(tmp_path, monkeypatch):
    import subprocess

    from menger.children import die_with_parent
    from menger.commands import bench

    seen = {}

    def fake_run(argv, **kwargs):
        seen.update(kwargs)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    cell = bench.Cell("tiny", "ppo", "CartPole-v1", 1, 1000, tmp_path, ("env.id=CartPole-v1",), (), 10, "")
    assert bench.SubprocessCells().run(cell, resume=False) == 0
    assert seen["preexec_fn"] is die_with_parent


def test_a_game_entry_can_ask_for_a_longer_final_evaluation(tmp_path, monkeypatch):
    """`final_episodes`: a game's final is 200 games, both seats, where its periodic evaluations are 10 (steps of 0.1
    to 0.2 in the final column); other entries keep the periodic evaluations' count."""
    from menger.commands import bench as bench_module

    cells = plan(tmp_path, final_episodes=200)
    assert [c.final_episodes for c in cells] == [200, 200, 0, 0] and all(c.eval_episodes == 10 for c in cells)
    assert all(c.final_episodes == 200 for c in plan_cells(load_suite("pettingzoo"), "marl", [1], tmp_path,
                                                            envs=["pettingzoo.classic.tictactoe_v3:env"]))
    asked = []
    monkeypatch.setattr(bench_module, "final_evaluation",
                        lambda run_dir, episodes, allow_import=(): asked.append(episodes) or {})
    monkeypatch.setattr("menger.api.run_experiment", lambda *args, **kwargs: None)
    for cell in cells:
        cell.run_dir.mkdir(parents=True)
        path = cell.run_dir / "cell.json"
        path.write_text(json.dumps(cell.as_json()))
        assert bench_module.cell_main([str(path)]) == 0
    legacy = {**cells[0].as_json()}
    del legacy["final_episodes"]  # a cell.json written before the key: as many as the periodic evaluations
    (cells[0].run_dir / "cell.json").write_text(json.dumps(legacy))
    assert bench_module.cell_main([str(cells[0].run_dir / "cell.json")]) == 0
    assert asked == [200, 200, 10, 10, 10]
    with pytest.raises(SuiteError, match=r"final_episodes: episodes of the final evaluation, a whole number > 0"):
        validate_suite(tiny_suite(final_episodes=0))


def test_the_final_evaluation_opens_a_cell_whose_env_is_a_third_party_module(tmp_path):
    """A run names its env's module (`mpe2.simple_spread_v3:parallel_env`), which opening it again would import: the
    bench allows the cell's own env package and imports, so its final evaluation plays instead of falling back to
    the last periodic one (it failed with UntrustedRunError)."""
    from menger import api
    from menger.commands import bench as bench_module
    from menger.commands.bench import final_evaluation, trusted_modules

    assert trusted_modules({"env": "mpe2.simple_spread_v3:parallel_env", "imports": ["mpe2"]}) == ("mpe2",)
    assert trusted_modules({"env": "MinAtar/Breakout-v1", "imports": ["minatar:register"]}) == ("minatar",)
    run_dir = tmp_path / "run"
    api.train("marl", overrides=["env.id=tests.multiagent.fakes:Mixed", "runtime.launcher=threads", "model.hidden=[8]",
                                 "runtime.unroll_length=8", "log.tensorboard=false", "stop.env_frames=300"],
              run_dir=str(run_dir))
    cell = {"env": "tests.multiagent.fakes:Mixed", "imports": []}
    assert "UntrustedRunError" in final_evaluation(run_dir, 2)["error"]
    report = final_evaluation(run_dir, 2, trusted_modules(cell))
    # 2 episodes asked of a game of 3 learned agents: one whole game, an episode per agent
    assert "error" not in report and report["episodes"] == 3 and np.isfinite(report["return_mean"])
    cell.update(run_dir=str(run_dir), algo="marl", overrides=[], eval_episodes=3, final_episodes=0)
    (run_dir / "cell.json").write_text(json.dumps(cell))  # a cell killed after its checkpoint: the bench resumes it
    assert bench_module.cell_main([str(run_dir / "cell.json")]) == 0
    assert json.loads((run_dir / "final_eval.json").read_text())["episodes"] == 3
