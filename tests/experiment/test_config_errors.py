"""What an experiment refuses by name: an unknown key, an unknown preset, a stop section without a condition."""
import pytest

from menger.config import ConfigError
from menger.experiment import load_experiment


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match="ppo.lr"):
        load_experiment("cartpole-ppo", ["ppo.lrr=0.1"])


def test_unknown_preset_suggests_the_closest():
    with pytest.raises(ConfigError, match="cartpole-ppo"):
        load_experiment("cartpole-pop")


def test_stop_section_needs_a_condition():
    with pytest.raises(ConfigError, match="stop"):
        load_experiment("ppo", ["stop.env_frames=null"])
