"""PQN on the runtime: its preset learns CartPole, its epsilon reaches the actors with the parameters, and its
config refuses what it cannot do, naming the fix."""
from __future__ import annotations

import pytest

from menger import api
from menger.config import ConfigError
from menger.experiment import load_experiment


@pytest.mark.slow
def test_cartpole_pqn_reaches_a_deterministic_evaluation_of_475(tmp_path, quiet):
    result = api.train("cartpole-pqn", overrides=[*quiet, "runtime.launcher=processes", "checkpoint.interval_s=0",
                                                   "runtime.seed=1"], run_dir=str(tmp_path / "pqn"))
    m = result.final_metrics
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 475 and m["eval/episodes"] == 10
    assert m["learner/policy_lag_max"] == 0  # sync: its targets come from the parameters the unrolls acted with


def test_epsilon_decays_with_the_frames_and_the_actors_explore_with_it(tmp_path, quiet):
    """The learner writes epsilon into the network's parameters after each update; the actors act with the
    version they copied, so the training episodes follow the schedule, and the resumed run goes on from it."""
    overrides = [*quiet, "runtime.launcher=threads", "runtime.seed=3", "stop.env_frames=8192",
                 "pqn.exploration_frames=4096", "pqn.epsilon_end=0.2", "eval.interval_s=0"]
    result = api.train("cartpole-pqn", overrides=overrides, run_dir=str(tmp_path / "run"))
    m = result.final_metrics
    assert m["learner/epsilon"] == pytest.approx(0.2)  # past the decay: its end
    policy = api.load_policy(tmp_path / "run")
    assert float(policy.network.epsilon) == pytest.approx(0.2)  # in the checkpoint's parameters
    resumed = api.resume(tmp_path / "run", overrides=["stop.env_frames=12288"])
    assert resumed.final_metrics["learner/epsilon"] == pytest.approx(0.2)


def test_pqn_refuses_a_run_without_a_decay_length_and_names_both_fixes():
    with pytest.raises(ConfigError, match="stop.env_frames, or pqn.exploration_frames"):
        load_experiment("cartpole-pqn", ["stop.env_frames=null", "stop.target_return=475"])
    config = load_experiment("cartpole-pqn", ["stop.env_frames=null", "stop.wall_clock_s=60",
                                              "pqn.exploration_frames=10000"])
    assert config.pqn.decay_frames(config.stop.env_frames) == 10_000


@pytest.mark.parametrize("override, named", [
    ("runtime.coordination.mode=replay", "learn from replay"),
    ("model.lstm_size=32", "feed-forward"),
    ("env.normalize.obs=true", "running normalisation is built for"),
    ("runtime.learner.mode=parameter_server", "gradient workers are built for"),
])
def test_pqn_refuses_what_its_registry_entry_does_not_offer(override, named):
    with pytest.raises(ConfigError, match=named):
        load_experiment("cartpole-pqn", [override])
