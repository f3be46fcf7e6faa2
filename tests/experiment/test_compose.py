"""`extends:` in experiment files: deep merge over a preset or a file, chains, cycles refused naming the chain."""
import pytest

from menger.config import ConfigError
from menger.experiment import deep_merge, load_experiment, load_experiment_data


def test_deep_merge_merges_mappings_and_replaces_everything_else():
    base = {"env": {"id": "CartPole-v1", "kwargs": {"a": 1}}, "model": {"hidden": [64, 64]}, "stop": {"x": 1}}
    over = {"env": {"kwargs": {"b": 2}}, "model": {"hidden": [32]}, "stop": 3}
    assert deep_merge(base, over) == {"env": {"id": "CartPole-v1", "kwargs": {"a": 1, "b": 2}},
                                      "model": {"hidden": [32]}, "stop": 3}
    assert base["env"]["kwargs"] == {"a": 1}  # the base is left as it was


def test_a_file_extends_a_preset_and_changes_only_what_it_names(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("extends: cartpole-ppo\nppo: {lr: 0.001}\nstop: {env_frames: 5000}\n")
    config, preset = load_experiment(str(path)), load_experiment("cartpole-ppo")
    assert config.ppo.lr == 0.001 and config.stop.env_frames == 5000
    assert config.ppo.gamma == preset.ppo.gamma == 0.98 and config.stop.target_return == 475
    assert config.name == "mine"  # named after the file, not its base


def test_chains_resolve_relative_paths_and_overrides_come_last(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "base.yaml").write_text("extends: cartpole-ppo\nname: base\nppo: {lr: 0.001, epochs: 3}\n")
    (tmp_path / "sub" / "child.yaml").write_text("extends: ../base.yaml\nname: child\nppo: {epochs: 5}\n")
    config = load_experiment(str(tmp_path / "sub" / "child.yaml"), ["ppo.gamma=0.9"])
    assert (config.name, config.ppo.lr, config.ppo.epochs, config.ppo.gamma) == ("child", 0.001, 5, 0.9)
    assert config.runtime.envs_per_actor == 16  # from the preset at the chain's root


def test_a_dict_may_extend_a_preset():
    data = load_experiment_data({"extends": "ppo", "env": {"id": "Acrobot-v1"}})
    assert data["env"] == {"id": "Acrobot-v1", "normalize": {"obs": "vector", "reward": "auto"}}
    assert data["name"] == "ppo" and "extends" not in data


def test_a_cycle_is_refused_naming_the_chain(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: c.yaml\n")
    (tmp_path / "c.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError) as error:
        load_experiment(str(tmp_path / "a.yaml"))
    assert f"{tmp_path / 'a.yaml'} -> b.yaml -> c.yaml -> a.yaml" in str(error.value)
    assert "remove the 'extends:' key" in str(error.value)


def test_an_unknown_base_is_refused_with_the_closest_preset(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: cartpole-ppp\n")
    with pytest.raises(ConfigError, match="neither a preset nor a file.*did you mean 'cartpole-ppo'"):
        load_experiment(str(tmp_path / "a.yaml"))
    (tmp_path / "b.yaml").write_text("extends: [cartpole-ppo]\n")
    with pytest.raises(ConfigError, match="must be a preset name or a YAML file path"):
        load_experiment(str(tmp_path / "b.yaml"))


def test_an_unknown_key_in_the_extending_file_is_still_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: cartpole-ppo\nppo: {lrr: 0.1}\n")
    with pytest.raises(ConfigError, match="ppo.lrr.*ppo.lr"):
        load_experiment(str(tmp_path / "a.yaml"))
