"""The `menger` command as a user runs it: train, eval (with a video), plot, resume, config errors."""
import subprocess
import sys

import pytest

MENGER = [sys.executable, "-m", "menger.cli"]


def _menger(*args, timeout=240):
    return subprocess.run([*MENGER, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_train_eval_plot_resume_round_trip(tmp_path):
    run = tmp_path / "run"
    out = _menger("train", "cartpole-ppo", "--run-dir", str(run), "--no-progress", "--launcher", "processes",
                  "--set", "stop.env_frames=4096", "--set", "stop.target_return=null", "--set", "log.tensorboard=false")
    assert out.returncode == 0, out.stderr
    assert "results:" in out.stdout and (run / "plot.png").exists() and (run / "config.yaml").exists()
    ev = _menger("eval", str(run), "--episodes", "2", "--video")
    assert ev.returncode == 0, ev.stderr
    assert "mean return" in ev.stdout and (run / "eval.gif").stat().st_size > 1000
    res = _menger("resume", str(run), "--no-progress", "--set", "stop.env_frames=8192")
    assert res.returncode == 0, res.stderr
    assert _menger("plot", str(run)).returncode == 0


def test_unknown_key_fails_before_starting(tmp_path):
    out = _menger("train", "cartpole-ppo", "--run-dir", str(tmp_path / "r"), "--set", "ppo.lrr=1")
    assert out.returncode == 2
    assert "ppo.lrr" in out.stderr and "ppo.lr" in out.stderr
    assert not (tmp_path / "r").exists()


def test_presets_are_listed_and_all_validate():
    out = _menger("presets")
    assert out.returncode == 0
    names = [line.split()[0] for line in out.stdout.splitlines() if line.strip()]
    assert {"cartpole-ppo", "cartpole-impala", "pendulum-ppo", "pong-impala", "ppo", "impala"} <= set(names)
    from menger.experiment import load_experiment

    for name in names:
        load_experiment(name)
