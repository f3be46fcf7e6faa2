"""Composite action spaces end to end: every algorithm family trains on a tiny env that pays for matching a target
per action component (tests/runtime/menger_test_space_envs.py), `menger eval` and `load_policy` act in the env's
own space, what a family cannot act in is refused before any file is written, custom networks drive Box actions
and the LSTM core, and a MultiDiscrete policy exports to TorchScript."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from menger import api
from menger.config import ConfigError
from menger.commands.evaluate import evaluate_run
from menger.commands.export import export_policy

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # menger_test_space_envs: a user's own module (forked actors inherit the path)

from menger_test_space_envs import MatchEnv  # noqa: E402

SMALL = ["runtime.launcher=threads", "runtime.learner.device=cpu", "runtime.learner.threads=1",
         "checkpoint.interval_s=0", "log.tensorboard=false", "stop.target_return=null", "eval.interval_s=0",
         "stop.wall_clock_s=null", "runtime.seed=1"]
REPLAY = ["replay.lockstep=true", "replay.min_size=128"]  # a function of the seeds


def _train(tmp_path, quiet, preset, kind, *extra):
    run_dir = tmp_path / f"{preset}-{kind}"
    result = api.train(preset, overrides=[*quiet, *SMALL, "env.id=menger_test_space_envs:MatchEnv",
                                          f"env.kwargs={{kind: {kind}}}", *extra], run_dir=str(run_dir))
    return run_dir, result.final_metrics


def _acts_in_the_env_space(run_dir, kind):
    env = MatchEnv(kind)
    obs = np.stack([env.reset(seed=s)[0] for s in range(5)])
    policy = api.load_policy(run_dir, allow_import=["menger_test_space_envs"])
    actions = policy.act(obs)
    assert len(actions) == 5 and all(env.action_space.contains(a) for a in actions), actions
    assert env.action_space.contains(policy.act(obs[0]))  # one observation: one action


@pytest.mark.parametrize("preset,kind,extra", [
    ("cartpole-ppo", "multidiscrete", ["stop.env_frames=2048"]),
    ("cartpole-ppo", "tuple", ["stop.env_frames=2048", "model.lstm_size=16"]),
    ("cartpole-ppo", "dict", ["stop.env_frames=2048", "runtime.inference.mode=central"]),
    ("cartpole-ppo", "multibinary", ["stop.env_frames=2048", "runtime.learner.count=2"]),
    ("cartpole-impala", "multidiscrete", ["stop.env_frames=2048", "runtime.launcher=processes"]),
    ("cartpole-impala", "dict", ["stop.env_frames=2048"]),
    ("cartpole-impala", "tuple", ["stop.env_frames=2048", "algo=appo"]),
    ("cartpole-impala", "multibinary", ["stop.env_frames=2048", "algo=appo"]),
    ("cartpole-apex", "multidiscrete", ["stop.env_frames=1024", *REPLAY]),
    ("cartpole-novel-r2d2", "discrete_tuple", ["stop.env_frames=1024", *REPLAY]),
    ("pendulum-sac", "boxes", ["stop.env_frames=600", *REPLAY, "replay.batch_size=64", "replay.samples_per_insert=8"]),
])
def test_every_family_trains_on_composite_actions_and_its_policy_acts_in_the_env_space(tmp_path, quiet, preset,
                                                                                        kind, extra):
    run_dir, m = _train(tmp_path, quiet, preset, kind, *extra)
    assert m["learner/updates"] > 0 and np.isfinite(m["learner/loss"]), m
    assert m["episode/count"] > 0 and np.isfinite(m["episode/return_mean"])
    _acts_in_the_env_space(run_dir, kind)
    report = evaluate_run(run_dir, episodes=2, allow_import=["menger_test_space_envs"])
    assert report["episodes"] == 2 and 0.0 <= report["return_mean"] <= MatchEnv(kind).length


@pytest.mark.parametrize("preset,kind,match", [
    ("cartpole-apex", "tuple", "apex needs discrete actions.*Box component.*use algo sac"),
    ("pendulum-sac", "multidiscrete", "sac needs continuous.*ppo, impala or appo"),
])
def test_a_family_that_cannot_act_in_the_space_is_refused_before_any_file(tmp_path, quiet, preset, kind, match):
    with pytest.raises(ConfigError, match=match):
        _train(tmp_path, quiet, preset, kind, "stop.env_frames=512")
    assert not (tmp_path / f"{preset}-{kind}").exists()


def test_ppo_learns_to_match_every_component_of_a_multidiscrete_action(tmp_path, quiet):
    """MultiDiscrete([3, 3, 3]), 8 steps an episode: a random policy earns 8/3, the best one 8."""
    run_dir, m = _train(tmp_path, quiet, "cartpole-ppo", "multidiscrete", "stop.env_frames=16384")
    assert m["episode/return_mean"] >= 6.0, m
    report = evaluate_run(run_dir, episodes=20, allow_import=["menger_test_space_envs"])
    assert report["return_mean"] >= 7.0, report  # the deterministic action: each component's mode


def test_dqn_learns_a_small_multidiscrete_through_its_joint_discrete(tmp_path, quiet):
    """27 joint actions; a random policy earns 8/3 an episode, the greedy one of a trained Q network near 8."""
    run_dir, m = _train(tmp_path, quiet, "cartpole-apex", "multidiscrete", "stop.env_frames=6000",
                        "apex.target_update_interval=50", *REPLAY)
    report = evaluate_run(run_dir, episodes=20, allow_import=["menger_test_space_envs"])
    assert report["return_mean"] >= 5.0, (report, m)


@pytest.mark.parametrize("network,lstm", [("MeanValueNet", 0), ("FeaturesNet", 0), ("FeaturesNet", 16)])
def test_a_custom_network_drives_box_actions_and_the_lstm_core_on_pendulum(tmp_path, quiet, network, lstm):
    result = api.train("pendulum-ppo", overrides=[*quiet, *SMALL, "stop.env_frames=512", "runtime.envs_per_actor=4",
                                                  "runtime.unroll_length=32", "ppo.minibatches=2",
                                                  f"model.network=menger_test_space_envs:{network}",
                                                  f"model.lstm_size={lstm}"], run_dir=str(tmp_path / "run"))
    assert result.final_metrics["learner/updates"] > 0
    policy = api.load_policy(tmp_path / "run", allow_import=["menger_test_space_envs"])
    actions = policy.act(np.random.default_rng(0).uniform(-1, 1, (6, 3)).astype(np.float32))
    assert actions.shape == (6, 1) and np.all(np.abs(actions) <= 2.0)  # Pendulum's torque bounds, clipped


def test_an_exported_multidiscrete_policy_acts_as_load_policy_does(tmp_path, quiet):
    for preset, extra in (("cartpole-ppo", ["stop.env_frames=2048"]),
                          ("cartpole-apex", ["stop.env_frames=512", *REPLAY])):  # a joint Discrete, given back
        run_dir, _ = _train(tmp_path, quiet, preset, "multidiscrete", *extra)  # as its components
        path = export_policy(run_dir, allow_import=["menger_test_space_envs"])
        extra_files = {"menger.json": ""}
        exported = torch.jit.load(str(path), _extra_files=extra_files)
        meta = json.loads(extra_files["menger.json"])
        assert meta["action_layout"] == [{"key": None, "space": "MultiDiscrete([3 3 3])", "start": 0, "stop": 3}]
        env = MatchEnv("multidiscrete")
        obs = np.stack([env.reset(seed=s)[0] for s in range(7)])
        actions = exported(torch.from_numpy(obs)).numpy()
        np.testing.assert_array_equal(actions, api.load_policy(run_dir, ["menger_test_space_envs"]).act(obs))


@pytest.mark.parametrize("preset,kind", [("cartpole-apex", "multidiscrete"), ("pendulum-sac", "boxes")])
def test_the_evaluator_plays_whole_episodes_of_composite_actions(quiet, preset, kind):
    from menger.experiment import load_experiment
    from menger.runtime.evaluation import Evaluator

    cfg = load_experiment(preset, [*quiet, "env.id=menger_test_space_envs:MatchEnv", f"env.kwargs={{kind: {kind}}}",
                                   "eval.episodes=3"])
    env = MatchEnv(kind)
    evaluator = Evaluator(cfg, env.observation_space, env.action_space)
    try:
        stats = evaluator.run(evaluator.network)
    finally:
        evaluator.close()
    assert stats["eval/episodes"] == 3 and stats["eval/length_mean"] == env.length
