"""The bad-input table (docs/guides/reliability.md promise 6; the reliability issue's 47 inputs and more): every bad config,
file or command line `menger train` is given ends in one clear message and a non-zero exit before the run
directory exists (the env and the network are built once to check them, before it; nothing else starts): no
traceback, no actor started, nothing written. `benchmarks/faults.py` counts these.

Each case: (id, the preset, the command line's extra arguments, words the message must hold).
"""
from __future__ import annotations

import pytest

from menger.cli import main

BAD_INPUTS = [
    # non-finite and out-of-range numbers
    ("lr-inf", "cartpole-ppo", ["--set", "ppo.lr=.inf"], ["ppo.lr", "not finite"]),
    ("lr-nan", "cartpole-ppo", ["--set", "ppo.lr=.nan"], ["ppo.lr", "not finite"]),
    ("clip-negative", "cartpole-ppo", ["--set", "ppo.clip=-0.1"], ["ppo.clip", "out of range"]),
    ("wall-clock-negative", "cartpole-ppo", ["--set", "stop.wall_clock_s=-5"], ["stop.wall_clock_s"]),
    ("log-interval-0", "cartpole-ppo", ["--set", "log.interval_s=0"], ["log.interval_s"]),
    # sizes of 0
    ("hidden-0", "cartpole-ppo", ["--set", "model.hidden=[0]"], ["model.hidden"]),
    ("envs-0", "cartpole-ppo", ["--set", "runtime.envs_per_actor=0"], ["runtime.envs_per_actor"]),
    ("unroll-0", "cartpole-ppo", ["--set", "runtime.unroll_length=0"], ["runtime.unroll_length"]),
    ("epochs-0", "cartpole-ppo", ["--set", "ppo.epochs=0"], ["ppo.epochs"]),
    ("minibatches-0", "cartpole-ppo", ["--set", "ppo.minibatches=0"], ["ppo.minibatches"]),
    ("slots-0", "cartpole-impala", ["--set", "runtime.coordination.slots_per_actor=0"],
     ["runtime.coordination.slots_per_actor"]),
    ("batch-size-0", "cartpole-apex", ["--set", "replay.batch_size=0"], ["replay.batch_size"]),
    ("keep-last-0", "cartpole-ppo", ["--set", "checkpoint.keep_last=0"], ["checkpoint.keep_last"]),
    ("eval-episodes-0", "cartpole-apex", ["--set", "eval.episodes=0"], ["eval.episodes"]),
    ("lstm-negative", "cartpole-ppo", ["--set", "model.lstm_size=-1"], ["model.lstm_size"]),
    # wrong types and choices
    ("seed-text", "cartpole-ppo", ["--set", "runtime.seed=abc"], ["runtime.seed", "integer"]),
    ("kwargs-not-a-mapping", "cartpole-ppo", ["--set", "env.kwargs=3"], ["env.kwargs"]),
    ("algo-unknown", "cartpole-ppo", ["--set", "algo=dqn"], ["algo", "'apex'"]),
    ("env-preset-unknown", "cartpole-ppo", ["--set", "env.preset=mujoco"], ["env.preset", "'atari'"]),
    ("nonfinite-unknown", "cartpole-ppo", ["--set", "env.nonfinite=ignore"], ["env.nonfinite", "'drop'"]),
    ("activation-unknown", "cartpole-ppo", ["--set", "model.activation=gelu"], ["model.activation", "'relu'"]),
    ("encoder-unknown", "cartpole-ppo", ["--set", "model.encoder=resnet"], ["model.encoder", "'mlp'"]),
    ("device-unknown", "cartpole-ppo", ["--set", "runtime.learner.device=tpu"], ["runtime.learner.device"]),
    ("sampler-unknown", "cartpole-apex", ["--set", "replay.sampler=rank"], ["replay.sampler", "'uniform'"]),
    ("optimizer-unknown", "cartpole-impala", ["--set", "vtrace.optimizer=sgd"], ["vtrace.optimizer"]),
    ("override-without-value", "cartpole-ppo", ["--set", "ppo.lr"], ["malformed override 'ppo.lr'", "=value"]),
    # settings that do not fit together
    ("no-stop-rule", "cartpole-ppo", ["--set", "stop.target_return=null", "--set", "stop.env_frames=null",
                                      "--set", "stop.wall_clock_s=null"], ["stop"]),
    ("apex-sync", "cartpole-apex", ["--set", "runtime.coordination.mode=sync"],
     ["runtime.coordination.mode", "replay"]),
    ("ppo-replay", "cartpole-ppo", ["--set", "runtime.coordination.mode=replay"], ["runtime.coordination.mode"]),
    ("apex-central", "cartpole-apex", ["--set", "runtime.inference.mode=central"], ["runtime.inference.mode"]),
    ("apex-learners", "cartpole-apex", ["--set", "runtime.learner.count=2"], ["runtime.learner.count"]),
    ("apex-lstm", "cartpole-apex", ["--set", "model.lstm_size=16"], ["model.lstm_size", "r2d2"]),
    ("r2d2-no-lstm", "cartpole-novel-r2d2", ["--set", "model.lstm_size=0"], ["model.lstm_size"]),
    ("r2d2-untiled", "cartpole-novel-r2d2", ["--set", "runtime.unroll_length=30"], ["runtime.unroll_length"]),
    ("r2d2-burn-in", "cartpole-novel-r2d2", ["--set", "r2d2.burn_in=16"], ["r2d2.burn_in"]),
    ("unfillable-batch", "cartpole-impala", ["--set", "runtime.actors=1", "--set",
                                             "runtime.coordination.batch_unrolls=3"],
     ["runtime.coordination.batch_unrolls"]),
    ("learners-without-columns", "cartpole-impala", ["--set", "runtime.learner.count=8", "--set",
                                                     "runtime.envs_per_actor=1", "--set", "runtime.actors=1"],
     ["runtime.learner.count"]),
    # envs, networks and files that cannot be used
    ("sac-discrete", "pendulum-sac", ["--set", "env.id=CartPole-v1"], ["algo 'sac' does not fit", "Box"]),
    ("apex-box", "cartpole-apex", ["--set", "env.id=Pendulum-v1"], ["algo 'apex' does not fit", "Discrete"]),
    ("menger-env-unknown", "cartpole-ppo", ["--set", "env.id=menger/NoSuch-v0"], ["menger/NoSuch-v0"]),
    ("env-module-missing", "cartpole-ppo", ["--set", "env.id=no_such_package.envs:Env"], ["no_such_package"]),
    ("network-module-missing", "cartpole-ppo", ["--set", "model.network=no_such_package.nets:Net"],
     ["no_such_package"]),
    ("preset-unknown", "cartpole-pppo", [], ["unknown preset 'cartpole-pppo'", "did you mean"]),
    ("file-missing", "missing.yaml", [], ["missing.yaml", "does not exist"]),
]


def _experiment_files(tmp_path):
    duplicate = tmp_path / "duplicate.yaml"
    duplicate.write_text("algo: ppo\nppo: {lr: 0.001}\nppo: {lr: 0.1}\nstop: {env_frames: 1000}\n")
    not_a_mapping = tmp_path / "list.yaml"
    not_a_mapping.write_text("- algo: ppo\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("algo: ppo\nenv: {id: CartPole-v1\n")
    return [(duplicate, ["duplicate", "ppo"]), (not_a_mapping, ["mapping"]), (broken, ["broken.yaml"])]


def _check(capsys, run_dir, code, words):
    captured = capsys.readouterr()
    err = captured.err.strip()
    print(f"exit code {code}, message: {err[:200]}")
    assert code not in (0, None), "a bad input was accepted"
    assert "Traceback" not in err, err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert not run_dir.exists(), "a rejected input left a run directory behind: something started"


@pytest.mark.parametrize(("preset", "args", "words"), [case[1:] for case in BAD_INPUTS],
                         ids=[case[0] for case in BAD_INPUTS])
def test_a_bad_input_is_one_clear_message_before_the_run_exists(tmp_path, capsys, preset, args, words):
    run_dir = tmp_path / "run"
    code = main(["train", preset, "--no-progress", "--launcher", "threads", "--run-dir", str(run_dir), *args])
    _check(capsys, run_dir, code, words)


@pytest.mark.parametrize("index", range(3), ids=["duplicate-keys", "not-a-mapping", "broken-yaml"])
def test_a_bad_experiment_file_is_one_clear_message_before_the_run_exists(tmp_path, capsys, index):
    path, words = _experiment_files(tmp_path)[index]
    run_dir = tmp_path / "run"
    code = main(["train", str(path), "--no-progress", "--run-dir", str(run_dir)])
    _check(capsys, run_dir, code, words)
