"""The algorithm registry: each algorithm declares, in one place, what the rest of Menger asks of it.

An algorithm is a folder (`menger/algorithms/ppo/`, ...) with two modules:

    spec.py      `ALGORITHM = Algorithm(...)`: its config section(s) and cross-field checks, what it learns from
                 (unrolls or replay), its coordination, learner modes, action family, evaluation, the networks
                 its actors act with and the presets it ships. Schema-level: imports configs and models only.
    builder.py   `make_learner(config, policy, device)` and `actor_parts(config, policy, ...)`: the worker-level
                 pieces, loaded by `make_learner` and `actor_parts` below only when a run starts.

This module imports no algorithm: it loads their specs by name (`BUILT_IN`, the entry points) and their
builders by their spec's module, so the models, learners and experiment that ask it never import the
algorithms' folders, which import them.

The rest of the code asks the registry, never an algorithm's name::

    algorithm = get(config.algo)                 # ConfigError naming the closest one for a typo
    if algorithm.learns_from == "replay": ...    # a property, not `config.algo in (...)`
    network = algorithm.network(obs_space, action_space, config.model, config.env.normalize)

A package adds its own algorithm with an entry point in the group `menger.algorithms` whose value names its
`Algorithm` (`my_algo = "my_package.my_algo.spec:ALGORITHM"`); its builder is the module `builder` beside its
spec (`Algorithm.builder`). Its config section appears in every experiment as `<section>:`, its name among
`algo`'s choices, its presets among `menger presets` (the files in its `presets/` folder).
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import logging
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Literal

from menger.config import ConfigError

log = logging.getLogger("menger.algorithms")

ENTRY_POINT_GROUP = "menger.algorithms"

# The algorithms that ship with Menger: name -> where its `Algorithm` lives ("module:attribute").
BUILT_IN = {
    "ppo": "menger.algorithms.ppo.spec:ALGORITHM",
    "impala": "menger.algorithms.impala.spec:ALGORITHM",
    "appo": "menger.algorithms.appo.spec:ALGORITHM",
    "a3c": "menger.algorithms.a3c.spec:ALGORITHM",
    "apex": "menger.algorithms.apex.spec:ALGORITHM",
    "gorila": "menger.algorithms.gorila.spec:ALGORITHM",
    "r2d2": "menger.algorithms.r2d2.spec:ALGORITHM",
    "sac": "menger.algorithms.sac.spec:ALGORITHM",
    "pqn": "menger.algorithms.pqn.spec:ALGORITHM",
    "alphazero": "menger.algorithms.alphazero.spec:ALGORITHM",
}

ACTION_FAMILIES = ("policy", "q", "box")  # what `menger.models.actions.ActionCodec` acts in for each family


def _no_problems(config) -> list[str]:
    return []


def _no_extra_fields(config) -> dict:
    return {}


def _one_minibatch(config) -> int:
    return 1


@dataclass(frozen=True)
class Algorithm:
    """What an algorithm is, for everything outside its folder. Every field is read by one part of the runtime:

    * `sections` (experiment schema): its config sections, `{key: dataclass}`; two algorithms may share one
      (impala and appo read `vtrace`) if they give the same class. `settings` names the one its learner reads.
    * `learns_from` (experiment, trainer, coordinator): "unrolls" as they come, or "replay" (`replay:` section,
      replay coordination, n-step or sequence items per `replay_items`).
    * `coordination`: what `runtime.coordination.mode: auto` resolves to for an unroll learner: "sync" (every
      unroll of an update acted with the newest parameters) or "async".
    * `learner_modes`: the `runtime.learner.mode`s it supports; the first is what `auto` resolves to.
    * `actions`: the action family its networks act in: "policy" (any space a policy head can sample), "q" (one
      joint Discrete) or "box" (a flat Box).
    * `evaluation`: "episodes" (its training episodes are the policy's; `stop.target_return` reads them) or
      "greedy" (its actors explore: a deterministic evaluation runs by default and the stop rule reads it).
    * `network(obs_space, action_space, model, normalize)`: what actors act with and the learner trains.
    * `problems(config)`: its cross-field checks, each a message that names the keys and the fix.
    * `gamma(config)`: the discount (reward normalisation's return; the replay's n-step items).
    * `unroll_fields(config)`: extra fields of its unroll slots (`menger.transport.UnrollSpec` keywords).
    * `minibatches(config)`: the steps each data-parallel learner must take a column of the batch for.
    * What the model section may ask of it: `custom_network` (model.network), `independent_agents`
      (model.agents), `recurrent` (model.lstm_size), `board_mirror`, `normalize` (env.normalize),
      `central_inference`; `multi_agent` (a PettingZoo env, opponents played inside the actor's envs).
    * `gradient_learners`: the learner's side is learner processes pushing gradients to the parameter server
      (GORILA) instead of one learner stepping on batches.
    * `presets`: the preset files it ships (found in `presets/` beside its spec, or in `menger/presets`).
    """

    name: str
    summary: str
    sections: dict[str, type]
    settings: str
    network: Callable[..., Any]
    learns_from: Literal["unrolls", "replay"] = "unrolls"
    coordination: Literal["sync", "async"] = "sync"
    learner_modes: tuple[str, ...] = ("allreduce",)
    actions: Literal["policy", "q", "box"] = "policy"
    evaluation: Literal["episodes", "greedy"] = "episodes"
    replay_items: Literal["transitions", "sequences"] = "transitions"
    problems: Callable[[Any], list[str]] = _no_problems
    gamma: Callable[[Any], float] = lambda config: 0.99
    unroll_fields: Callable[[Any], dict] = _no_extra_fields
    minibatches: Callable[[Any], int] = _one_minibatch
    custom_network: bool = False
    independent_agents: bool = False
    recurrent: bool = False
    board_mirror: bool = False
    normalize: bool = False
    central_inference: bool = True
    multi_agent: bool = True
    gradient_learners: bool = False
    presets: tuple[str, ...] = ()
    module: str = field(default="", compare=False)  # the spec's module, filled in by the registry

    def __post_init__(self):
        problems = []
        if not self.name.isidentifier():
            problems.append(f"algorithm name {self.name!r}: use a Python identifier (it is a config value and may "
                            "name a section)")
        if self.settings not in self.sections:
            problems.append(f"algorithm {self.name!r}: settings={self.settings!r} is not one of its sections "
                            f"{sorted(self.sections)}")
        if self.actions not in ACTION_FAMILIES:
            problems.append(f"algorithm {self.name!r}: actions={self.actions!r}; use one of {ACTION_FAMILIES}")
        if not self.learner_modes or not set(self.learner_modes) <= {"allreduce", "parameter_server"}:
            problems.append(f"algorithm {self.name!r}: learner_modes={self.learner_modes!r}; give allreduce and/or "
                            "parameter_server, the default first")
        if problems:
            raise TypeError("; ".join(problems))

    def config(self, experiment):
        """Its own section of an experiment (`experiment.ppo`, `experiment.vtrace`, ...)."""
        return getattr(experiment, self.settings)

    @property
    def builder(self) -> str:
        """The module that builds its learner and its actors' parts: `builder` beside its spec."""
        return self.module.rpartition(".")[0] + ".builder"

    @property
    def preset_dir(self) -> Path | None:
        """`presets/` beside its spec, if the folder has one."""
        spec = importlib.import_module(self.module)
        folder = Path(spec.__file__).parent / "presets"
        return folder if folder.is_dir() else None


_REGISTRY: dict[str, Algorithm] = {}
_LOADED = False


def _load(name: str, target: str, origin: str) -> Algorithm | None:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        algorithm = getattr(module, attribute or "ALGORITHM")
    except Exception as exc:  # noqa: BLE001 - a broken plug-in must not stop the built-in algorithms
        log.warning("the algorithm %r (%s %s) could not be loaded and is left out: %s: %s", name, origin, target,
                    type(exc).__name__, exc)
        return None
    if not isinstance(algorithm, Algorithm):
        log.warning("the algorithm %r (%s %s) is a %s, not a menger.algorithms.Algorithm; it is left out", name,
                    origin, target, type(algorithm).__name__)
        return None
    if algorithm.name != name:
        log.warning("the algorithm registered as %r (%s %s) calls itself %r; it is left out", name, origin, target,
                    algorithm.name)
        return None
    object.__setattr__(algorithm, "module", module_name)
    return algorithm


def _ensure_loaded() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for name, target in BUILT_IN.items():
        algorithm = _load(name, target, "built in,")
        if algorithm is None:
            raise ImportError(f"the built-in algorithm {name!r} ({target}) failed to load; see the warning above")
        _REGISTRY[name] = algorithm
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in _REGISTRY:
            log.warning("the algorithm %r of entry point %s is already registered (%s); the first one is kept",
                        entry.name, entry.value, _REGISTRY[entry.name].module)
            continue
        algorithm = _load(entry.name, entry.value, "entry point")
        if algorithm is not None:
            _REGISTRY[entry.name] = algorithm
    _check_sections()


def _check_sections() -> None:
    """Two algorithms may share a section only with the same class; a section may not shadow a core key."""
    owners: dict[str, tuple[str, type]] = {}
    for algorithm in _REGISTRY.values():
        for section, cls in algorithm.sections.items():
            if section in owners and owners[section][1] is not cls:
                raise TypeError(f"the algorithms {owners[section][0]!r} and {algorithm.name!r} both declare the "
                                f"config section {section!r} with different classes; rename one")
            owners.setdefault(section, (algorithm.name, cls))


def names() -> tuple[str, ...]:
    """Every registered algorithm's name, built-in ones first."""
    _ensure_loaded()
    return tuple(_REGISTRY)


def get(name: str) -> Algorithm:
    """The algorithm called `name`; a ConfigError naming the closest one (and the choices) otherwise."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"algo={name!r} is not a registered algorithm{hint} (algorithms: {', '.join(_REGISTRY)}; "
                          f"a package adds one with an entry point in the group {ENTRY_POINT_GROUP!r})") from None


def all_algorithms() -> tuple[Algorithm, ...]:
    _ensure_loaded()
    return tuple(_REGISTRY.values())


def sections() -> dict[str, type]:
    """Every algorithm's config sections, in registration order: {key: dataclass}."""
    out: dict[str, type] = {}
    for algorithm in all_algorithms():
        for section, cls in algorithm.sections.items():
            out.setdefault(section, cls)
    return out


def that(predicate: Callable[[Algorithm], bool]) -> tuple[str, ...]:
    """The names of the algorithms for which `predicate` holds, for messages (`that(lambda a: a.recurrent)`)."""
    return tuple(algorithm.name for algorithm in all_algorithms() if predicate(algorithm))


def listing(predicate: Callable[[Algorithm], bool]) -> str:
    """`that(predicate)` in words: 'ppo, impala and appo'."""
    found = that(predicate)
    return found[0] if len(found) == 1 else ", ".join(found[:-1]) + " and " + found[-1] if found else "none"


def builder(algo: str) -> ModuleType:
    """The builder module of the algorithm called `algo` (loaded when a run starts)."""
    return importlib.import_module(get(algo).builder)


def make_learner(config, policy, device):
    """The learner of `config.algo` for `policy` (what actors act with; a learner adds what only it needs)."""
    return builder(config.algo).make_learner(config, policy, device)


def actor_envs(config, seed: int):
    """The envs of an actor of `config.algo` when its builder makes its own (`make_envs(config, seed)`: AlphaZero
    plays every seat of each game), else None: the experiment's env, as `menger.envs.make_vec_env` builds it."""
    make = getattr(builder(config.algo), "make_envs", None)
    return None if make is None else make(config, seed)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore: dict | None, envs=None) -> dict:
    """What an actor of `config.algo` needs beyond its envs and policy: exploration set on `policy`, and extra
    `Actor` keywords (its builder's `actor_parts`; none if it has none). A builder whose `actor_parts` takes an
    `envs` keyword gets the actor's envs (a search plays on their games)."""
    parts = getattr(builder(config.algo), "actor_parts", None)
    if parts is None:
        return {}
    extra = {"envs": envs} if "envs" in inspect.signature(parts).parameters else {}
    return parts(config, policy, actor_id=actor_id, incarnation=incarnation, restore=restore, **extra)


__all__ = ["ACTION_FAMILIES", "Algorithm", "BUILT_IN", "ENTRY_POINT_GROUP", "actor_envs", "actor_parts",
           "all_algorithms", "builder", "get", "listing", "make_learner", "names", "sections", "that"]
