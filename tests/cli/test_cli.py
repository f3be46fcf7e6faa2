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
    assert "mean return" in ev.stdout and (run / "eval.mp4").stat().st_size > 1000
    assert f"video: {run / 'eval.mp4'} (600x400, " in ev.stdout
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


def test_load_policy_acts_on_one_observation_or_a_batch(tmp_path):
    import gymnasium as gym
    import numpy as np

    from menger import api

    run = api.train("cartpole-ppo", ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2",
                                     "runtime.unroll_length=8", "stop.env_frames=32", "stop.target_return=null",
                                     "log.tensorboard=false", "runtime.learner.device=cpu"],
                    run_dir=str(tmp_path / "run"))
    policy = api.load_policy(run.run_dir)
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    one = policy.act(obs)  # the README's `load_policy(run_dir).act(obs)`
    batch = policy.act(np.stack([obs, obs]))
    assert np.shape(one) == () and batch.shape == (2,) and int(one) == int(batch[0])


def test_no_progress_prints_one_plain_line_per_log_interval(tmp_path, capsys):
    from menger.cli import main

    code = main(["train", "cartpole-ppo", "--no-progress", "--launcher", "threads", "--run-dir", str(tmp_path / "run"),
                 "--set", "stop.env_frames=8192", "--set", "stop.target_return=null", "--set", "log.interval_s=0.1",
                 "--set", "log.tensorboard=false"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cartpole-ppo | ")]
    assert code == 0 and len(lines) >= 2, lines
    assert all(" frames " in line and " updates " in line and " dropped " in line for line in lines)


def test_menger_version_and_presets_say_something_whole(capsys):
    from menger.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("menger ")
    assert main(["presets"]) == 0
    listing = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert listing["pong-impala"].strip().endswith("(async actors, V-trace, learner on its own)")
