"""The experiment: one small, frozen, documented config per component, validated before anything starts.

An experiment file (YAML) is a mapping with these sections; every key is optional except where noted.
`menger train PRESET --set ppo.lr=1e-3` overrides any key; an unknown key is an error naming the closest one.

    sections   the sections every run has (env, model, replay, league, eval, runtime, stop, checkpoint, log)
    checks     the cross-field checks and resolved values (coordination, learner mode, evaluation interval)
    tuned      the `tune:` section's spec
    presets    the shipped experiment files
    compose    `extends:` (a file or preset built on another, deep-merged)
    legacy     keys and module paths of earlier versions

`ExperimentConfig` is made here from them and every registered algorithm's section (`menger.registry`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from menger import registry
from menger.config import ConfigError, apply_overrides, field, from_dict, load_yaml, to_dict
from menger.experiment.checks import _Experiment
from menger.experiment.compose import deep_merge, resolve_extends
from menger.experiment.legacy import (LEGACY_MODE_KEYS, LEGACY_RUNTIME_KEYS, migrate_legacy_keys,
                                      migrate_legacy_override, moved_name)
from menger.experiment.presets import generic_preset, list_presets, preset_dir, preset_files
from menger.experiment.sections import (CheckpointConfig, CoordinationConfig, EnvConfig, EvalConfig,
                                        InferenceConfig, LeagueConfig, LearnerResources, LogConfig, ModelConfig,
                                        MultiAgentConfig, NormalizeConfig, ParameterServerConfig, RayConfig,
                                        ReplayConfig, RuntimeConfig, StopConfig, SupervisionConfig, WandbConfig,
                                        wrapper_spec)
from menger.experiment.tuned import TUNE_KINDS, Tuned, tune_spec


def _section_doc(section: str) -> str:
    users = registry.that(lambda a: section in a.sections)
    return f"settings of algo {', '.join(users)}"


def _experiment_fields() -> list[tuple]:
    """The fields of an experiment, in the order a config file lists them: what every run has, then each
    registered algorithm's section(s), then the runtime's sections."""
    before = [
        ("name", str, field("experiment", doc="name of the experiment (used in run directory names)")),
        ("algo", str, field("ppo", choices=registry.names(), doc="the algorithm: " + "; ".join(
            f"{a.name} ({a.summary.partition(': ')[2] or a.summary})" for a in registry.all_algorithms())
            + " (`menger.algorithms`; a package adds its own with an entry point)")),
        ("env", EnvConfig, field(default_factory=EnvConfig, doc="the environment")),
        ("model", ModelConfig, field(default_factory=ModelConfig, doc="the network")),
    ]
    sections = [(name, cls, field(default_factory=cls, doc=_section_doc(name)))
                for name, cls in registry.sections().items()]
    after = [
        ("replay", ReplayConfig, field(default_factory=ReplayConfig, doc="replay size, sampler and rate (algorithms "
                                       "that learn from replay: "
                                       f"{registry.listing(lambda a: a.learns_from == 'replay')})")),
        ("eval", EvalConfig, field(default_factory=EvalConfig, doc="deterministic evaluation during training")),
        ("league", LeagueConfig, field(default_factory=lambda: LeagueConfig(mode="none"), doc="multi-agent envs: "
                                       "self-play against snapshots, or an AlphaStar league of several learners")),
        ("runtime", RuntimeConfig, field(default_factory=RuntimeConfig, doc="actors, coordination, devices, "
                                         "liveness")),
        ("stop", StopConfig, field(default_factory=lambda: StopConfig(env_frames=1_000_000), doc="when to stop")),
        ("checkpoint", CheckpointConfig, field(default_factory=CheckpointConfig, doc="checkpoints")),
        ("log", LogConfig, field(default_factory=LogConfig, doc="metrics and progress")),
        ("tune", dict, field(default_factory=dict, doc="menger tune: the values to search, each a config key with "
                             "one of {log_uniform: [lo, hi]}, {uniform: [lo, hi]}, {int_uniform: [lo, hi]}, "
                             "{choice: [a, b, ...]}")),
    ]
    return before + sections + after


if TYPE_CHECKING:
    @dataclasses.dataclass(frozen=True)
    class ExperimentConfig(_Experiment):
        """What a type checker sees: the sections every run has (tests/experiment/test_typed_config.py keeps them
        equal to `_experiment_fields`); an algorithm's section (`ppo`, `vtrace`, a plug-in's) is an attribute of
        type Any, since the registry adds them when the module is imported."""

        name: str
        algo: str
        env: EnvConfig
        model: ModelConfig
        replay: ReplayConfig
        eval: EvalConfig
        league: LeagueConfig
        runtime: RuntimeConfig
        stop: StopConfig
        checkpoint: CheckpointConfig
        log: LogConfig
        tune: dict[str, Any]

        def __getattr__(self, section: str) -> Any: ...
else:
    # The experiment: the fields every run has, and one section per registered algorithm (built once, when this
    # module is imported, from the registry: a plug-in's section is here like a built-in one's).
    ExperimentConfig = dataclasses.make_dataclass("ExperimentConfig", _experiment_fields(), bases=(_Experiment,),
                                                  frozen=True, namespace={"__module__": __name__})
    ExperimentConfig.__doc__ = ("An experiment: " + ", ".join(f.name for f in dataclasses.fields(ExperimentConfig))
                                + ". Checks and resolved values: `_Experiment`.")

# How a run is operated, not what it learns: left out of its hyperparameters.
OPERATIONAL_KEYS = ("eval", "checkpoint", "log", "runtime.supervision", "runtime.ray", "tune")


def hyperparameters(config: ExperimentConfig) -> dict[str, bool | int | float | str]:
    """The settings that make one run differ from another, as flat dotted keys with scalar values, for comparing
    runs (TensorBoard's HParams tab): name, algo, env, model, the algorithm's own section(s) (and `replay` for one
    that learns from replay), runtime and stop, without the other algorithms' sections and `OPERATIONAL_KEYS`.
    Lists become their text (`model.hidden: "[64, 64]"`), mappings their own dotted keys (`env.kwargs.netlist`);
    unset (None) keys are left out."""
    algorithm = config.algorithm
    unread = set(registry.sections()) - set(algorithm.sections)
    if algorithm.learns_from != "replay":
        unread.add("replay")
    data = {key: value for key, value in to_dict(config).items() if key not in unread}
    flat: dict[str, bool | int | float | str] = {}

    def visit(prefix: str, value) -> None:
        if prefix in OPERATIONAL_KEYS or value is None:
            return
        if isinstance(value, dict):
            for key, inner in value.items():
                visit(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, (bool, int, float, str)):
            flat[prefix] = value
        else:
            flat[prefix] = str(list(value) if isinstance(value, tuple) else value)

    visit("", data)
    return flat


def load_experiment_data(source: str | dict, overrides: list[str] = ()) -> dict:
    """A preset name, a YAML path or a dict -> plain data with its `extends:` chain merged under it
    (`menger.experiment.compose`) and the --set overrides applied."""
    path = None
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        if not path.suffix and not path.exists():
            path = preset_files().get(str(source), preset_dir() / f"{source}.yaml")
            if not path.exists():
                import difflib

                names = list(list_presets())
                close = difflib.get_close_matches(str(source), names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown preset {source!r}{hint} (presets: {', '.join(names)}; or give a YAML file)")
        elif not path.exists():
            raise ConfigError(f"experiment file {str(path)!r} does not exist")
        data = load_yaml(path)
    data = resolve_extends(data, path)
    return apply_overrides(data, [migrate_legacy_override(o) for o in overrides])


def load_experiment(source: str | dict, overrides: list[str] = ()) -> ExperimentConfig:
    return from_dict(ExperimentConfig, load_experiment_data(source, overrides))


def __getattr__(name: str):
    return moved_name(name)


__all__ = ["CheckpointConfig", "CoordinationConfig", "EnvConfig", "EvalConfig", "ExperimentConfig",
           "InferenceConfig", "LEGACY_MODE_KEYS", "LEGACY_RUNTIME_KEYS", "LeagueConfig", "LearnerResources",
           "LogConfig", "ModelConfig", "MultiAgentConfig", "NormalizeConfig", "OPERATIONAL_KEYS",
           "ParameterServerConfig", "RayConfig", "ReplayConfig", "RuntimeConfig", "StopConfig", "SupervisionConfig",
           "TUNE_KINDS", "Tuned", "WandbConfig", "deep_merge", "generic_preset", "hyperparameters", "list_presets", "load_experiment",
           "load_experiment_data", "migrate_legacy_keys", "migrate_legacy_override", "preset_dir", "preset_files",
           "resolve_extends", "tune_spec", "wrapper_spec"]
