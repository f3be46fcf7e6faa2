"""``make_vec_env``: turn an env id into a Menger ``VecEnv``.

An id is resolved in this order:

1. a preset (``preset="atari"``) picks a purpose-built vector env;
2. ``package.module:ClassOrFactory`` names a user env: a gymnasium.Env class/factory (stepped in a loop)
   or a VectorEnv class/factory taking ``num_envs`` (used as is);
3. anything else is a gymnasium id. An id gymnasium does not know yet makes the env providers register
   theirs, so importing ``menger.envs`` stays cheap: ALE and MinAtar where installed, and every module named by
   an entry point in the ``menger.env_providers`` group. Menger's applications (chip placement, cluster scheduling, in
   ``menger.apps``, above this layer) declare theirs in pyproject.toml; any installed package can add one:

       [project.entry-points."menger.env_providers"]
       mypkg = "mypkg.envs"            # importing it registers the ids
       other = "other.envs:register"   # or a function to call

An env with its own vectorised implementation (a ``vector_entry_point``) is used through it; others
are stepped one by one in a loop.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import importlib.metadata
import inspect
from typing import Any, Callable

import gymnasium

from menger.envs.atari import make_atari_vector_env, rom_name
from menger.envs.faults import FaultPolicy, UnknownEnvError
from menger.envs.multiagent import is_multiagent_env, multiagent_vec_env
from menger.envs.multiagent_batch import BatchedMultiAgentVecEnv, has_batched_core
from menger.envs.vector import LoopVecEnv, NativeVecEnv, VecEnv
from menger.extras import missing_extra, require

PRESETS = ("atari",)

# Modules whose import registers more gymnasium ids ("module", or "module:function" to call), tried only when an
# id is not yet known, and only where their package is installed: ALE's games, and MinAtar's, which registers its
# ids only when asked (minatar.gym.register_envs).
LAZY_ENV_PROVIDERS = ("ale_py", "minatar.gym:register_envs")
# The entry-point group of the packages that register more ids (see the module docstring); also tried
# only when an id is not yet known.
ENV_PROVIDER_GROUP = "menger.env_providers"


def make_vec_env(env_id: str, num_envs: int, *, seed: int, kwargs: dict | None = None, preset: str | None = None,
                 nonfinite: str = "drop", num_threads: int = 1, max_reset_retries: int = 5,
                 next_step_autoreset: bool = False, wrappers=(), multiagent=None, info_keys=()) -> VecEnv:
    """B copies of ``env_id`` behind Menger's ``VecEnv`` interface.

    Args:
        env_id: a gymnasium id ("CartPole-v1", "ALE/Pong-v5", "ChipPlacement-v0") or a user env given
            as "package.module:ClassOrFactory".
        num_envs: B, the number of envs stepped together.
        seed: env i is seeded from ``seed`` on the first reset (``seed + i`` in loop mode).
        kwargs: passed to the env's constructor (or, with a preset, override the preset's settings).
        preset: "atari" for ALE's threaded vector env with the standard preprocessing.
        nonfinite: "drop" NaN/Inf transitions (counted in ``stats``) or "fail" on the first one.
        num_threads: worker threads, for envs that have them (the atari preset).
        max_reset_retries: retries of a failing reset before ``EnvError``.
        next_step_autoreset: envs stepped in a loop reset on the step after an episode ends (``valid=False``),
            as native vector envs do, so the last observation of a truncated episode is returned (replay).
        wrappers: gymnasium wrappers applied to each env, in order (``env.wrappers``): "package.module:Wrapper"
            or {"class": "package.module:Wrapper", **kwargs}. A gymnasium id with its own vector implementation
            is then stepped as single wrapped envs in a loop.
        multiagent: for a PettingZoo env (``env.multiagent``, `menger.experiment.MultiAgentConfig`): the agents the
            policy plays; ``num_envs`` then counts their rows, games x learned agents per game
            (`menger.envs.multiagent`). None: the defaults (the first agent).
        info_keys: keys of the env's info read at each episode's end into ``StepResult.episode_info``
            (``env.info_keys``, `menger.envs.info`); single-agent envs only.
    """
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, got {num_envs!r}.")
    faults = FaultPolicy(nonfinite=nonfinite, max_reset_retries=max_reset_retries)
    kwargs = dict(kwargs or {})
    common = {"env_id": env_id, "seed": seed, "faults": faults, "info_keys": tuple(info_keys)}
    wrap = resolve_wrappers(wrappers)  # before any env is built: a bad wrapper is named first
    if preset is not None:
        if wrap:
            raise UnknownEnvError(f"env.wrappers cannot wrap the {preset!r} preset: it is a vector env with its own "
                                  "preprocessing; unset env.preset or env.wrappers")
        return NativeVecEnv(_preset_factory(preset, env_id, num_envs, num_threads, kwargs), **common)
    is_vector, factory = resolve_env(env_id)
    if not is_vector and ":" in env_id:  # a user factory may make a PettingZoo game: one is built to tell
        first = factory(**kwargs)
        if is_multiagent_env(first):
            if info_keys:
                first.close()
                raise ValueError(f"env.info_keys reads single-agent envs' infos, and {env_id!r} is a PettingZoo env; "
                                 "unset env.info_keys")
            if wrap:
                first.close()
                raise UnknownEnvError(f"env.wrappers wrap gymnasium envs, and {env_id!r} is a PettingZoo env; apply "
                                      "PettingZoo's wrappers in its factory instead")
            batched = BatchedMultiAgentVecEnv if has_batched_core(first) else None  # all games in one call
            return multiagent_vec_env(functools.partial(factory, **kwargs), num_envs, seed=seed, env_id=env_id,
                                      config=multiagent, first=first, batched=batched)
        factory = _first_then(first, factory)
    if wrap:
        if is_vector:
            is_vector, factory = _single_env_factory(env_id)
        factory = functools.partial(_wrapped, factory, wrap)
    if is_vector:
        return NativeVecEnv(functools.partial(factory, num_envs=num_envs, **kwargs), **common)
    return LoopVecEnv(functools.partial(_with_named_entries, factory, **kwargs), num_envs,
                      next_step_autoreset=next_step_autoreset, **common)


class TupleAsDict(gymnasium.ObservationWrapper):
    """A Tuple observation as a Dict of its entries "0", "1", ...: the networks read a Dict entry by entry (a
    Discrete one one-hot, an image with a CNN), and the slots store one tensor per entry."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Dict(
            {str(i): space for i, space in enumerate(env.observation_space.spaces)})

    def observation(self, observation):
        return {str(i): entry for i, entry in enumerate(observation)}


def _with_named_entries(factory: Callable[..., Any], **kwargs: Any) -> gymnasium.Env:
    env = factory(**kwargs)
    if isinstance(getattr(env, "observation_space", None), gymnasium.spaces.Tuple):
        env = TupleAsDict(env)
    return env


def _first_then(first: Any, factory: Callable[..., Any]) -> Callable[..., Any]:
    """`factory`, whose first call returns the env already built to find out what kind it is."""
    built = [first]

    def make(**kwargs: Any) -> Any:
        return built.pop() if built else factory(**kwargs)

    return make


def resolve_env(env_id: str, *, prefer_single: bool = False) -> tuple[bool, Callable[..., Any]]:
    """(is it vectorised, a factory) for an id; unknown ids, modules and attributes raise ``UnknownEnvError``.

    ``prefer_single``: a gymnasium id with both a vectorised and a single-env implementation gives the single
    one (a video renders one env)."""
    if ":" in env_id:
        module_name, _, attribute = env_id.partition(":")
        module = _import_user_module(module_name, env_id)
        if hasattr(module, attribute):
            return _classify_user_env(getattr(module, attribute), env_id)
        if attribute in gymnasium.registry:  # gymnasium's own "module:Id" form
            return _gymnasium_factory(attribute, prefer_single)
        raise UnknownEnvError(
            f"Module {module_name!r} has no attribute {attribute!r} (from env id {env_id!r})."
            f"{_did_you_mean(attribute, [name for name in dir(module) if not name.startswith('_')])}"
        )
    _find_spec(env_id)
    return _gymnasium_factory(env_id, prefer_single)


def resolve_wrappers(wrappers) -> list[tuple[str, Callable[..., Any], dict]]:
    """(name, wrapper, kwargs) for each `env.wrappers` entry; a module that does not import, a missing name, or
    something that is neither a gymnasium.Wrapper subclass nor a function (env -> env) raises UnknownEnvError."""
    out = []
    for index, item in enumerate(wrappers):
        if isinstance(item, str):
            name, kwargs = item, {}
        else:
            kwargs = dict(item)
            name = kwargs.pop("class", None)
        key = f"env.wrappers[{index}] = {name!r}"
        module_name, _, attribute = str(name).partition(":")
        if not module_name or not attribute:
            raise UnknownEnvError(f"{key}: name a wrapper as 'package.module:Wrapper'")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UnknownEnvError(f"{key}: cannot import module {module_name!r} ({exc}); check that its package is "
                                  "installed and on the path") from exc
        if not hasattr(module, attribute):
            raise UnknownEnvError(f"{key}: module {module_name!r} has no attribute {attribute!r}."
                                  f"{_did_you_mean(attribute, [n for n in dir(module) if not n.startswith('_')])}")
        target = getattr(module, attribute)
        is_wrapper_class = isinstance(target, type) and issubclass(target, gymnasium.Wrapper)
        if not is_wrapper_class and (isinstance(target, type) or not callable(target)):
            raise UnknownEnvError(f"{key} is a {type(target).__name__ if not isinstance(target, type) else 'class'} "
                                  f"that is not a gymnasium.Wrapper subclass; give a gymnasium.Wrapper (or a "
                                  "function taking an env and returning the wrapped env)")
        out.append((str(name), target, kwargs))
    return out


def _wrapped(factory: Callable[..., Any], wrappers: list, **kwargs: Any) -> gymnasium.Env:
    env = factory(**kwargs)
    for name, wrapper, wrapper_kwargs in wrappers:
        env = wrapper(env, **wrapper_kwargs)
        if not isinstance(env, gymnasium.Env):
            raise UnknownEnvError(f"env wrapper {name!r} returned a {type(env).__name__}, not a gymnasium.Env")
    return env


def _single_env_factory(env_id: str) -> tuple[bool, Callable[..., Any]]:
    """A gymnasium id's single env (wrappers wrap single envs, not its vector implementation)."""
    gym_id = env_id.partition(":")[2] if ":" in env_id else env_id
    if gym_id not in gymnasium.registry:
        raise UnknownEnvError(f"env.wrappers wrap single gymnasium envs, and {env_id!r} is a VectorEnv; apply "
                              "gymnasium.wrappers.vector inside your factory instead, or unset env.wrappers")
    return False, functools.partial(gymnasium.make, gym_id, disable_env_checker=True)


def _preset_factory(preset: str, env_id: str, num_envs: int, num_threads: int, kwargs: dict) -> Callable:
    if preset != "atari":
        raise ValueError(f"Unknown preset {preset!r}.{_did_you_mean(preset, list(PRESETS))} Presets: {PRESETS}.")
    rom_name(env_id)  # fail now, with suggestions, rather than inside the first build
    return functools.partial(make_atari_vector_env, env_id, num_envs, num_threads=num_threads, kwargs=kwargs)


def _gymnasium_factory(env_id: str, prefer_single: bool = False) -> tuple[bool, Callable[..., Any]]:
    spec = gymnasium.spec(env_id)
    if spec.vector_entry_point is not None and not (prefer_single and spec.entry_point is not None):
        return True, functools.partial(_make_native, env_id)
    # The passive checker only warns on the first steps; it is left out to keep the step path short
    # and every wrapper layer snapshotable.
    return False, functools.partial(gymnasium.make, env_id, disable_env_checker=True)


def _make_native(env_id: str, *, num_envs: int, **kwargs: Any) -> gymnasium.vector.VectorEnv:
    return gymnasium.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", **kwargs)


def _find_spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error:
        pass
    import_problems = _import_lazy_providers()
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error as exc:
        if env_id.startswith("ALE/") or "NoFrameskip" in env_id:  # ale-py registers these ids
            require("ale_py", "atari", f"the Atari env {env_id!r}")
        problems = "".join(f" ({name} could not be imported: {problem})" for name, problem in import_problems)
        raise UnknownEnvError(
            f"Unknown environment id {env_id!r}.{_did_you_mean(env_id, list(gymnasium.registry))} "
            "Give a gymnasium id (list them with gymnasium.pprint_registry()), a user env as "
            "'package.module:ClassOrFactory', or, for an id that a package registers when it is imported, "
            f"'package:Id' (e.g. 'minigrid:MiniGrid-Empty-5x5-v0'), which imports the package first in every process."
            f"{problems}"
        ) from exc


def env_providers() -> list[str]:
    """The providers tried for an unknown id: ``LAZY_ENV_PROVIDERS``, then the ``menger.env_providers``
    entry points ("module" or "module:function"), each once."""
    names = list(LAZY_ENV_PROVIDERS)
    for entry_point in importlib.metadata.entry_points(group=ENV_PROVIDER_GROUP):
        if entry_point.value not in names:
            names.append(entry_point.value)
    return names


def _import_lazy_providers() -> list[tuple[str, str]]:
    """Import the modules that register more ids; report (not raise) their failures for the error message."""
    problems = []
    for name in env_providers():
        if name in LAZY_ENV_PROVIDERS and importlib.util.find_spec(name.split(":")[0].split(".")[0]) is None:
            continue  # an optional package that is not installed: nothing to register, nothing to report
        try:
            _load_provider(name)
        except Exception as exc:  # a provider under construction must not hide the real "unknown id" error
            problems.append((name, f"{type(exc).__name__}: {exc}"))
    return problems


def _load_provider(name: str) -> None:
    """Import "module", or import "module:function" and call the function."""
    module_name, _, function = name.partition(":")
    module = importlib.import_module(module_name.strip())
    if function:
        target = module
        for part in function.strip().split("."):
            target = getattr(target, part)
        target()


def _import_user_module(module_name: str, env_id: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc, f"the env {env_id!r}")
        if extra is not None:
            raise extra from exc
        raise UnknownEnvError(
            f"Cannot import module {module_name!r} for env {env_id!r}: {exc}. Check that its package is installed "
            "and on the path; the format is 'package.module:ClassOrFactory'."
        ) from exc


def _classify_user_env(target: Any, env_id: str) -> tuple[bool, Callable[..., Any]]:
    if isinstance(target, type) and issubclass(target, gymnasium.vector.VectorEnv):
        return True, target
    if isinstance(target, type) and issubclass(target, gymnasium.Env):
        return False, target
    if isinstance(target, type) and _is_pettingzoo_class(target):
        return False, target
    if callable(target) and not isinstance(target, type):
        return "num_envs" in _parameter_names(target), target
    raise UnknownEnvError(
        f"{env_id!r} is a {type(target).__name__}, not a gymnasium.Env or VectorEnv class, nor a factory. "
        "A factory returning a VectorEnv must take a num_envs argument; one returning a single env must not."
    )


def _is_pettingzoo_class(target: type) -> bool:
    from pettingzoo import AECEnv, ParallelEnv

    return issubclass(target, (AECEnv, ParallelEnv))


def _parameter_names(function: Callable) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _did_you_mean(name: str, candidates: list[str]) -> str:
    by_lower = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    return f" Did you mean: {', '.join(by_lower[match] for match in close)}?" if close else ""
