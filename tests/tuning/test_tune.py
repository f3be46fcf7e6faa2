"""`menger tune --search optuna`: the tune spec is validated before anything starts, trials become runs with their
learning curves reported, pruning stops a run, and a killed search goes on where it was."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from menger.config import ConfigError  # noqa: E402
from menger.experiment import load_experiment, tune_spec  # noqa: E402
from menger.tuning.search import LearningCurve, search  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPACE = "tune={ppo.lr: {log_uniform: [1.0e-4, 1.0e-2]}, ppo.epochs: {int_uniform: [2, 6]}}"
SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=8", "runtime.unroll_length=16",
         "runtime.learner.device=cpu", "log.tensorboard=false", "log.progress=false", "log.interval_s=0.05",
         "checkpoint.interval_s=0", "stop.target_return=null", "stop.env_frames=2048"]


@pytest.mark.parametrize("space, words", [
    ("tune={ppo.lrr: {log_uniform: [1.0e-4, 1.0e-2]}}", "'ppo.lrr' names no config value; did you mean 'ppo.lr'"),
    ("tune={ppo.lr: {log_uniform: [0, 1.0e-2]}}", "log_uniform needs low > 0"),
    ("tune={ppo.lr: {uniform: [0.1, 0.01]}}", "needs \\[low, high\\] with low < high"),
    ("tune={ppo.gamma: {uniform: [0.9, 1.5]}}", "ppo.gamma=1.5 is refused by the config"),
    ("tune={ppo.lr: {gaussian: [0, 1]}}", "give one distribution"),
    ("tune={model.activation: {uniform: [0, 1]}}", "not a number; tune it with choice"),
    ("tune={ppo.epochs: {int_uniform: [1.5, 4]}}", "int_uniform needs whole numbers"),
])
def test_a_bad_tune_spec_is_refused_naming_the_key_before_anything_starts(space, words, tmp_path):
    with pytest.raises(ConfigError, match=words):
        load_experiment("cartpole-ppo", [space])
    with pytest.raises(ConfigError, match=words):
        search("cartpole-ppo", tmp_path / "out", 2, [space])
    assert not (tmp_path / "out").exists()


def test_cartpole_ppo_ships_a_search_space():
    assert [t.key for t in tune_spec(load_experiment("cartpole-ppo"))] == ["ppo.lr", "ppo.gae_lambda", "ppo.epochs"]


def test_the_spec_reads_dotted_and_nested_keys_alike():
    flat = tune_spec(load_experiment("cartpole-impala", ["tune={vtrace.lr: {log_uniform: [1.0e-4, 1.0e-2]}, "
                                                         "vtrace.epochs: {int_uniform: [1, 4]}}"]))
    nested = tune_spec(load_experiment("cartpole-impala", ["tune.vtrace.lr={log_uniform: [1.0e-4, 1.0e-2]}",
                                                           "tune.vtrace.epochs={int_uniform: [1, 4]}"]))
    assert flat == nested and [t.key for t in flat] == ["vtrace.lr", "vtrace.epochs"]


def test_a_search_without_a_tune_section_or_a_frame_budget_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="nothing to tune"):
        search("cartpole-impala", tmp_path / "a", 1)
    with pytest.raises(ConfigError, match="set stop.env_frames"):
        search("cartpole-ppo", tmp_path / "b", 1, [SPACE, "stop.env_frames=null", "stop.wall_clock_s=5"])


class _Trial:
    def __init__(self, prune_at: int):
        self.reports, self.prune_at = [], prune_at

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return len(self.reports) >= self.prune_at


class _Trainer:
    stopped = False

    def request_stop(self):
        self.stopped = True


def test_the_learning_curve_is_reported_at_fixed_fractions_of_the_budget_and_pruning_stops_the_run():
    trial, trainer = _Trial(prune_at=3), _Trainer()
    curve = LearningCurve(trial, "episode/return_mean", total_frames=1000, reports=10)
    for frames, value in [(50, 10.0), (120, 12.0), (130, 13.0), (260, 20.0), (390, 25.0), (500, 30.0)]:
        curve.on_metrics(trainer, {"time/env_frames": frames, "episode/return_mean": value})
    assert trial.reports == [(1, 12.0), (2, 20.0), (3, 25.0)]  # one report a 100 frames, at the same steps for all
    assert curve.pruned and trainer.stopped and curve.last == 25.0
    assert curve.area() == (12.0 + 20.0 + 25.0 + 7 * 25.0) / 10  # the rest of the budget at the last value


def test_a_search_runs_its_trials_as_runs_and_writes_the_best(tmp_path):
    result = search("cartpole-ppo", tmp_path / "out", 3, [SPACE, *SMALL])
    states = [row["state"] for row in result.trials]
    assert states[:2] == ["complete"] * 2 and states[2] in ("complete", "pruned")  # the median pruner starts at 3
    for row in result.trials:
        assert 1e-4 <= row["params"]["ppo.lr"] <= 1e-2 and 2 <= row["params"]["ppo.epochs"] <= 6
        assert (Path(row["run_dir"]) / "checkpoints").is_dir()  # an ordinary run directory
    best = json.loads((tmp_path / "out" / "best.json").read_text())
    assert best["value"] == max(row["value"] for row in result.trials if row["state"] == "complete")
    assert Path(best["run_dir"]).is_dir()
    again = search("cartpole-ppo", tmp_path / "out", 3, [SPACE, *SMALL])  # nothing left to do
    assert len(again.trials) == 3


def _study_trials(out: Path) -> list:
    if not (out / "study.db").exists():
        return []
    try:
        return optuna.load_study(study_name="cartpole-ppo", storage=f"sqlite:///{out / 'study.db'}").get_trials()
    except Exception:  # noqa: BLE001 - the study is being created
        return []


def test_a_killed_search_goes_on_where_it_was(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "menger.cli", "tune", "cartpole-ppo", "--search", "optuna", "--trials", "3",
               "--out", str(out), "--set", SPACE.replace("tune=", "tune=", 1), *[a for s in SMALL for a in ("--set", s)],
               "--set", "stop.env_frames=6144"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        trials = _study_trials(out)
        states = [t.state for t in trials]
        drawn = any(t.state == optuna.trial.TrialState.RUNNING and len(t.params) == 2 for t in trials)  # all drawn
        if optuna.trial.TrialState.COMPLETE in states and drawn:
            break
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    else:
        pytest.fail("the search never had a finished trial and a running one with its values drawn")
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    before = {t.number: t for t in _study_trials(out)}
    first = next(t for t in before.values() if t.state == optuna.trial.TrialState.COMPLETE)
    interrupted = next(t for t in before.values() if t.state == optuna.trial.TrialState.RUNNING and len(t.params) == 2)

    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    after = {t.number: t for t in _study_trials(out)}
    finished = [t for t in after.values() if t.state in (optuna.trial.TrialState.COMPLETE,
                                                         optuna.trial.TrialState.PRUNED)]
    assert len(finished) == 3 and not any(t.state == optuna.trial.TrialState.RUNNING for t in after.values())
    assert after[first.number].value == first.value  # what was done stays done
    assert after[interrupted.number].state == optuna.trial.TrialState.FAIL
    retried = [t for t in after.values() if t.user_attrs.get("retry_of") == interrupted.number]
    assert len(retried) == 1 and retried[0].params == interrupted.params  # its values were tried again first
    print(f"killed with trial {first.number} complete and {interrupted.number} running; resumed: "
          f"{len(finished)} finished, the interrupted values retried as trial {retried[0].number}")


def test_a_study_whose_schema_another_process_is_writing_is_opened_again(tmp_path, monkeypatch):
    """A second process opening the new study.db at the same moment (a dashboard, a test polling it) can win the
    race to write the schema; the loser retries instead of failing the search."""
    from sqlalchemy.exc import IntegrityError

    from menger.tuning import search as tune

    real, calls = optuna.create_study, []

    def racing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE constraint failed"))
        return real(*args, **kwargs)

    monkeypatch.setattr(optuna, "create_study", racing)
    study = tune._open_study(optuna, "race", tmp_path / "study.db", "maximize", 0)
    assert len(calls) == 2 and study.study_name == "race"
