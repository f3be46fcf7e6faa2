"""Config machinery: plain data in, frozen validated dataclasses out, and errors that name the key to fix."""

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Optional

import pytest

from menger.config import (
    ConfigError,
    apply_overrides,
    describe,
    dump_yaml,
    field,
    from_dict,
    load_yaml,
    to_dict,
    validate,
)


@dataclass(frozen=True)
class PPOConfig:
    clip: float = field(0.2, doc="Ratio clipping epsilon.", min=0.0, max=1.0)
    epochs: int = field(4, doc="Passes over each batch.", min=1)
    advantage: Literal["gae", "nstep"] = field("gae", doc="Advantage estimator.")
    batch_size: int = field(256, doc="Transitions per update.", min=1)
    minibatch_size: int = field(64, doc="Transitions per gradient step.", min=1)

    def __post_init__(self):
        if self.batch_size % self.minibatch_size:
            raise ConfigError(f"batch_size ({self.batch_size}) must be a multiple of minibatch_size "
                              f"({self.minibatch_size}); change one of them")


@dataclass(frozen=True)
class ModelConfig:
    hidden: tuple[int, ...] = field((64, 64), doc="Hidden layer widths.")
    activation: str = field("tanh", doc="Nonlinearity.", choices=("tanh", "relu", "gelu"))
    init_scale: Optional[float] = field(None, doc="Orthogonal init gain; None keeps torch's default.", min=0.0)


@dataclass(frozen=True)
class ExperimentConfig:
    name: str = field(doc="Run name, used for the output folder.")
    seed: int = field(0, doc="Base random seed.")
    deterministic: bool = field(False, doc="Force deterministic torch kernels.")
    checkpoint_every: int | None = field(None, doc="Updates between checkpoints; None disables them.", min=1)
    env_kwargs: dict[str, Any] = field(default_factory=dict, doc="Extra keyword arguments for the env.")
    ppo: PPOConfig = field(default_factory=PPOConfig, doc="PPO learner settings.")
    model: ModelConfig = field(default_factory=ModelConfig, doc="Network settings.")


@dataclass(frozen=True)
class SelfValidating:
    rate: float = field(1.0, doc="A rate.", min=0.0)

    def __post_init__(self):
        validate(self)


def problems_of(excinfo) -> str:
    return str(excinfo.value)


def test_builds_nested_config_with_defaults():
    cfg = from_dict(ExperimentConfig, {"name": "run", "ppo": {"clip": 0.1}})
    assert cfg.name == "run"
    assert cfg.ppo == PPOConfig(clip=0.1)
    assert cfg.model == ModelConfig()


def test_unknown_key_names_it_and_suggests_closest():
    with pytest.raises(ConfigError) as excinfo:
        from_dict(ExperimentConfig, {"name": "run", "sed": 3})
    message = problems_of(excinfo)
    assert "unknown key 'sed'" in message and "did you mean 'seed'?" in message
    assert "valid keys:" in message and "checkpoint_every" in message


def test_unknown_nested_key_uses_full_dotted_path():
    with pytest.raises(ConfigError) as excinfo:
        from_dict(ExperimentConfig, {"name": "run", "ppo": {"clip_eps": 0.1}})
    assert "unknown key 'ppo.clip_eps'; did you mean 'ppo.clip'?" in problems_of(excinfo)


def test_unknown_key_without_close_match_still_lists_valid_keys():
    with pytest.raises(ConfigError) as excinfo:
        from_dict(PPOConfig, {"zzzzzz": 1})
    message = problems_of(excinfo)
    assert "did you mean" not in message
    assert "valid keys: clip, epochs, advantage, batch_size, minibatch_size" in message


def test_missing_required_key():
    with pytest.raises(ConfigError, match=r"missing required key 'name' \(str\).*--set name="):
        from_dict(ExperimentConfig, {})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"seed": "3"}, "'seed' must be an integer, got str '3'"),
        ({"seed": 3.5}, "'seed' must be an integer, got float 3.5; drop the fractional part"),
        ({"seed": True}, "'seed' must be an integer, got bool True"),
        ({"deterministic": 1}, "'deterministic' must be true or false, got int 1"),
        ({"ppo": {"clip": "big"}}, "'ppo.clip' must be a number (float), got str 'big'"),
        ({"ppo": {"clip": False}}, "'ppo.clip' must be a number (float), got bool False"),
        ({"ppo": {"clip": "1e-3"}}, "'ppo.clip' must be a number (float), got str '1e-3'"),
        ({"model": {"hidden": 64}}, "'model.hidden' must be a list"),
        ({"model": {"hidden": [64, "x"]}}, "'model.hidden[1]' must be an integer"),
        ({"env_kwargs": [1]}, "'env_kwargs' must be a mapping"),
        ({"ppo": 3}, "'ppo' must be a mapping of keys to values, got int 3"),
    ],
)
def test_wrong_types_are_named(data, expected):
    with pytest.raises(ConfigError) as excinfo:
        from_dict(ExperimentConfig, {"name": "run", **data})
    assert expected in problems_of(excinfo)


def test_int_is_accepted_for_float_and_converted():
    cfg = from_dict(PPOConfig, {"clip": 1})
    assert cfg.clip == 1.0 and type(cfg.clip) is float


def test_out_of_range_names_key_and_range():
    with pytest.raises(ConfigError) as excinfo:
        from_dict(ExperimentConfig, {"name": "run", "ppo": {"clip": 1.5}})
    assert "'ppo.clip' = 1.5 is out of range; choose a value in [0.0, 1.0]" in problems_of(excinfo)


def test_choices_and_literal():
    with pytest.raises(ConfigError, match=r"'model.activation' = 'rleu' is not one of 'tanh', 'relu', 'gelu'; "
                                          r"did you mean 'relu'\?"):
        from_dict(ExperimentConfig, {"name": "run", "model": {"activation": "rleu"}})
    with pytest.raises(ConfigError, match=r"'advantage' = 'td' is not one of 'gae', 'nstep'"):
        from_dict(PPOConfig, {"advantage": "td"})
    assert from_dict(PPOConfig, {"advantage": "nstep"}).advantage == "nstep"


def test_optional_accepts_none_and_checks_the_inner_type():
    assert from_dict(ModelConfig, {"init_scale": None}).init_scale is None
    assert from_dict(ModelConfig, {"init_scale": 2}).init_scale == 2.0
    with pytest.raises(ConfigError, match="'init_scale' = -1.0 is out of range"):
        from_dict(ModelConfig, {"init_scale": -1})
    with pytest.raises(ConfigError, match="'checkpoint_every' must be an integer, got str 'often'"):
        from_dict(ExperimentConfig, {"name": "run", "checkpoint_every": "often"})


def test_tuple_from_yaml_list():
    cfg = from_dict(ModelConfig, {"hidden": [128, 32, 8]})
    assert cfg.hidden == (128, 32, 8) and isinstance(cfg.hidden, tuple)


def test_several_problems_are_reported_first_one_first():
    with pytest.raises(ConfigError) as excinfo:
        from_dict(ExperimentConfig, {"name": 5, "seed": "x", "ppo": {"clip": 9}})
    lines = problems_of(excinfo).splitlines()
    assert lines[0].startswith("'name' must be a string")
    assert lines[1] == "2 more problem(s):"
    assert len(excinfo.value.problems) == 3


def test_post_init_cross_field_error_propagates_with_prefix():
    with pytest.raises(ConfigError, match=r"in 'ppo': batch_size \(100\) must be a multiple of minibatch_size"):
        from_dict(ExperimentConfig, {"name": "run", "ppo": {"batch_size": 100}})


def test_config_is_frozen():
    cfg = from_dict(ExperimentConfig, {"name": "run"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1  # type: ignore[misc]


def test_validate_checks_configs_built_in_code():
    assert SelfValidating(rate=2.0).rate == 2.0
    with pytest.raises(ConfigError, match="'rate' = -1.0 is out of range"):
        SelfValidating(rate=-1.0)
    with pytest.raises(ConfigError, match="'rate' = -1.0 is out of range"):
        from_dict(SelfValidating, {"rate": -1})


def test_overrides_parse_values_as_yaml_and_create_levels():
    base = {"name": "run", "ppo": {"clip": 0.2}}
    result = apply_overrides(base, ["seed=3", "model.hidden=[32,32]", "checkpoint_every=null",
                                    "ppo.clip=1e-3", "env_kwargs.render_mode=rgb_array", "name=a=b"])
    assert result == {"name": "a=b", "seed": 3, "checkpoint_every": None,
                      "ppo": {"clip": 0.001}, "model": {"hidden": [32, 32]},
                      "env_kwargs": {"render_mode": "rgb_array"}}
    assert base == {"name": "run", "ppo": {"clip": 0.2}}, "the input must not be modified"
    cfg = from_dict(ExperimentConfig, result)
    assert cfg.model.hidden == (32, 32) and cfg.ppo.clip == 0.001


@pytest.mark.parametrize("override", ["ppo.clip", "=3", "ppo..clip=1", "ppo.=1"])
def test_malformed_override_says_expected_form(override):
    with pytest.raises(ConfigError, match="expected the form key.subkey=value"):
        apply_overrides({}, [override])


def test_override_below_a_scalar_is_refused():
    with pytest.raises(ConfigError, match="'seed' holds int 3, not a mapping"):
        apply_overrides({"seed": 3}, ["seed.x=1"])


def test_round_trip_through_yaml(tmp_path):
    cfg = from_dict(ExperimentConfig, {
        "name": "round-trip", "checkpoint_every": 10, "env_kwargs": {"size": [3, 4], "mode": "fast"},
        "ppo": {"clip": 0.3, "advantage": "nstep"}, "model": {"hidden": [16], "init_scale": 1.5},
    })
    path = tmp_path / "cfg.yaml"
    dump_yaml(to_dict(cfg), path)
    assert from_dict(ExperimentConfig, load_yaml(path)) == cfg
    assert to_dict(cfg)["model"]["hidden"] == [16]


def test_yaml_reads_scientific_notation_as_float(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("ppo:\n  clip: 5e-2\nname: x\n")
    assert from_dict(ExperimentConfig, load_yaml(path)).ppo.clip == 0.05


def test_load_yaml_errors_name_the_file(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("ppo: {clip: 0.1\n")
    with pytest.raises(ConfigError, match=f"{broken} is not valid YAML"):
        load_yaml(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=f"{listing} must hold a mapping"):
        load_yaml(listing)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_yaml(tmp_path / "absent.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_yaml(empty) == {}


def test_describe_lists_every_key_with_type_default_and_doc():
    text = describe(ExperimentConfig)
    assert "name: str = (required)" in text
    assert "checkpoint_every: int | None = None  [in [1, inf]]" in text
    assert "ppo.clip: float = 0.2  [in [0.0, 1.0]]" in text
    assert "ppo.advantage: one of 'gae', 'nstep' = 'gae'" in text
    assert "model.hidden: tuple[int, ...] = [64, 64]" in text
    assert "model.activation: str = 'tanh'  [one of 'tanh', 'relu', 'gelu']" in text
    assert "    Ratio clipping epsilon." in text
    assert text.count("\n") + 1 == 2 * (7 + 5 + 3)


def test_field_requires_documentation():
    with pytest.raises(TypeError, match="non-empty doc"):
        field(1, doc=" ")
