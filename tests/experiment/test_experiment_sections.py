"""The experiment's runtime sections, and the keys of earlier versions that still load (with a warning)."""
import logging

import pytest
import yaml

from menger import api
from menger.config import ConfigError
from menger.experiment import (LEGACY_MODE_KEYS, LEGACY_RUNTIME_KEYS, CoordinationConfig, LearnerResources,
                               RuntimeConfig, SupervisionConfig, load_experiment)


def test_each_component_has_its_own_small_frozen_section():
    runtime = RuntimeConfig()
    assert isinstance(runtime.coordination, CoordinationConfig)
    assert isinstance(runtime.supervision, SupervisionConfig)
    assert isinstance(runtime.learner, LearnerResources)
    with pytest.raises(AttributeError):
        runtime.coordination.batch_unrolls = 3  # frozen


@pytest.mark.parametrize("old, new", sorted(LEGACY_RUNTIME_KEYS.items()))
def test_every_flat_runtime_key_of_earlier_versions_still_works_as_an_override(old, new, caplog):
    values = {"ray_address": "auto", "device": "cpu", "amp": "true", "learners": 1}
    value = values.get(old, 3)
    with caplog.at_level(logging.WARNING, logger="menger.config"):
        config = load_experiment("cartpole-impala", [f"runtime.{old}={value}"])
    section, key = new.split(".")
    expected = {"true": True}.get(value, value)
    assert getattr(getattr(config.runtime, section), key) == expected
    assert f"'runtime.{new}'" in caplog.text  # the warning names the new key


def test_flat_keys_in_an_experiment_file_move_into_their_sections(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"algo": "impala", "stop": {"env_frames": 1000},
                                    "runtime": {"actors": 3, "max_policy_lag": 2, "batch_unrolls": 3,
                                                "coordination": "async", "inference": "central",
                                                "inference_batch": 2, "heartbeat_timeout_s": 9.0}}))
    config = load_experiment(str(path))
    rt = config.runtime
    assert (rt.actors, rt.coordination.mode, rt.coordination.max_policy_lag, rt.coordination.batch_unrolls) == \
        (3, "async", 2, 3)
    assert (rt.inference.mode, rt.inference.batch, rt.supervision.heartbeat_timeout_s) == ("central", 2, 9.0)


@pytest.mark.parametrize("old", sorted(LEGACY_MODE_KEYS))
def test_a_plain_mode_override_keeps_the_rest_of_its_section(old):
    setting = {"coordination": "sync", "inference": "central"}[old]
    config = load_experiment("pong-impala", [f"runtime.{old}={setting}"])
    assert getattr(config.runtime, old).mode == setting
    assert config.runtime.coordination.max_policy_lag == 10  # the preset's own coordination keys survive


def test_a_saved_run_directory_of_an_earlier_version_loads(tmp_path):
    old = {"name": "chip", "algo": "ppo", "stop": {"wall_clock_s": 10},
           "env": {"id": "menger.envs.chip.env:ChipPlacementEnv", "kwargs": {"netlist": "toy_macro_stdcell"}},
           "model": {"network": "menger.envs.chip.policy:ChipPolicyNet"},
           "runtime": {"actors": 1, "learners": 1, "learner_threads": 1, "slots_per_actor": 3}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    config = api.load_run_config(tmp_path)
    assert config.env.id == "menger.apps.chip.env:ChipPlacementEnv"
    assert config.model.network == "menger.apps.chip.policy:ChipPolicyNet"
    assert (config.runtime.learner.threads, config.runtime.coordination.slots_per_actor) == (1, 3)


def test_an_unknown_key_in_a_section_is_still_named_with_a_suggestion():
    with pytest.raises(ConfigError, match="runtime.coordination.max_policy_lagg.*max_policy_lag"):
        load_experiment("cartpole-impala", ["runtime.coordination.max_policy_lagg=3"])


def test_learners_that_would_get_fewer_columns_than_minibatches_are_refused_when_read():
    with pytest.raises(ConfigError, match="runtime.learner.count=4 leaves a learner 4 unroll column"):
        load_experiment("cartpole-impala", ["runtime.learner.count=4", "vtrace.minibatches=8"])


def test_a_key_given_twice_in_an_experiment_file_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("algo: ppo\nppo:\n  lr: 0.001\n  epochs: 4\n  lr: 0.01\nstop: {env_frames: 100}\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: the key 'lr' is given twice in one mapping \(lines 3 and 5\)"):
        load_experiment(str(path))


def test_a_key_given_twice_in_a_flow_mapping_is_an_error_too():
    with pytest.raises(ConfigError, match="'actors' is given twice"):
        load_experiment("cartpole-ppo", ["runtime={actors: 1, actors: 2}"])


@pytest.mark.parametrize("hidden", ["[0]", "[64,0]", "[-3]"])
def test_layer_sizes_below_one_are_refused(hidden):
    with pytest.raises(ConfigError, match="every layer needs at least one unit"):
        load_experiment("cartpole-ppo", [f"model.hidden={hidden}"])


def test_hyperparameters_are_the_flat_scalar_settings_the_algorithm_reads():
    from menger.experiment import hyperparameters, load_experiment

    sac = hyperparameters(load_experiment("pendulum-sac", ["env.kwargs={g: 9.81}"]))
    assert sac["algo"] == "sac" and sac["sac.tau"] == 0.005 and sac["replay.batch_size"] == 256
    assert sac["model.hidden"] == "[128, 128]" and sac["env.kwargs.g"] == 9.81 and sac["runtime.seed"] == 0
    assert not any(key.split(".")[0] in ("ppo", "vtrace", "apex", "r2d2", "eval", "checkpoint", "log") for key in sac)
    assert "sac.target_entropy" not in sac  # unset: no value to compare
    assert all(isinstance(value, (bool, int, float, str)) for value in sac.values())
    impala = hyperparameters(load_experiment("cartpole-impala"))
    assert impala["vtrace.lr"] == 0.001 and "replay.batch_size" not in impala
    assert not any(key.startswith(("runtime.supervision", "runtime.ray")) for key in impala)
