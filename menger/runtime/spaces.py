"""Before a run directory is written: the env's spaces, from one env built in a helper thread with a deadline,
and the algorithm's network built once on them. What does not fit ends here with one clear error."""
from __future__ import annotations

import dataclasses
import logging
import threading

import gymnasium as gym
import numpy as np
import torch

from menger import registry
from menger.config import ConfigError
from menger.envs import EnvError, UnknownEnvError, make_vec_env
from menger.extras import MissingExtraError
from menger.models import build_policy

log = logging.getLogger("menger.trainer")


class NetworkBuildError(ConfigError):
    """The network (Menger's or a custom `model.network`) could not be built for the env's spaces."""


class EnvStartError(RuntimeError):
    """The env could not be built for the spaces probe."""


class EnvStartTimeout(EnvStartError):
    """The env could not even be built for the spaces probe within the start-up deadline."""


def check_fit(cfg) -> tuple[tuple, bool]:
    """((observation space, action space), whether the env is a multi-agent one) of the experiment's env, after
    building its network once on them: an unknown env id, bad env kwargs, an algorithm that does not take a
    multi-agent env, or a network that does not build end here."""
    facts: dict = {}
    spaces = probe_spaces(cfg.env, cfg.runtime.seed, *probe_deadline(cfg), facts)
    rows, per_game = cfg.runtime.envs_per_actor, facts["rows_per_game"]
    if per_game > 1 and rows % per_game:
        raise ConfigError(f"runtime.envs_per_actor={rows} counts the rows of learned agents, and {cfg.env.id} has "
                          f"{per_game} of them per game (env.multiagent.learn): give a multiple of {per_game}, e.g. "
                          f"{max(1, rows // per_game) * per_game}")
    if facts["multiagent"] and cfg.env.info_keys:
        raise ConfigError(f"env.info_keys={list(cfg.env.info_keys)} reads the infos of single-agent envs, and "
                          f"{cfg.env.id!r} is a multi-agent (PettingZoo) env whose games report their outcome to "
                          "the league instead; unset env.info_keys")
    if facts["multiagent"] and not cfg.algorithm.multi_agent:
        raise ConfigError(f"algo {cfg.algo!r} with the multi-agent env {cfg.env.id!r}: its opponents and "
                          "unfinished agents are not given to the replay algorithms yet; train it with "
                          f"{registry.listing(lambda a: a.multi_agent)}")
    try:
        with torch.random.fork_rng(devices=[]):
            build_policy(*spaces, cfg.model, cfg.algo, cfg.env.normalize)
    except Exception as exc:  # noqa: BLE001 - a user's network can fail in any way
        if cfg.model.network is None and isinstance(exc, ValueError):  # Menger's own: a misfit, named
            raise ConfigError(f"algo {cfg.algo!r} does not fit the env {cfg.env.id!r}: {exc}") from exc
        raise NetworkBuildError(f"model: building the network for this env failed ({type(exc).__name__}: "
                                f"{exc}; observations {space_text(spaces[0])}, actions {space_text(spaces[1])}); "
                                "check model.network, model.kwargs and model.hidden") from exc
    return spaces, facts["multiagent"]


# The probe `fit_to_env` made, handed to the run's own check (`check_fit`) of the same env: a run start builds the
# env once (an env may be costly to build, or hold a licence seat), not once to fit the config and again to check.
_HANDED: dict = {}


def _probe_key(env, seed: int) -> str:
    """What the probe of an env depends on (not env.normalize, which `fit_to_env` may decide)."""
    return repr((env.id, env.kwargs, env.preset, env.wrappers, env.multiagent, seed))


def probe_deadline(cfg) -> tuple[float, str]:
    """How long the spaces probe may take, and the setting that says so: the actors' start-up grace
    (runtime.supervision.startup_grace_s), or the run's own wall clock (stop.wall_clock_s) where that is shorter,
    so a run asked to last 20 s never waits 120 s for an env that does not build."""
    grace_s, wall_clock_s = cfg.runtime.supervision.startup_grace_s, cfg.stop.wall_clock_s
    if wall_clock_s is not None and wall_clock_s < grace_s:
        return wall_clock_s, f"stop.wall_clock_s, shorter than runtime.supervision.startup_grace_s={grace_s:g}"
    return grace_s, "runtime.supervision.startup_grace_s"


def probe_spaces(env, seed: int, timeout_s: float, deadline_key: str = "runtime.supervision.startup_grace_s",
                 facts: dict | None = None, hand_on: bool = False):
    """The env's observation and action spaces, from one env built and closed in a helper thread: an env whose
    constructor hangs ends the run with an error after `timeout_s` (`probe_deadline`: the start-up grace, or the
    run's wall clock where shorter; `deadline_key` names it in the message), instead of freezing it (a thread
    cannot be killed; it is left behind as a daemon). `hand_on`: keep what it saw for the next probe of the same
    env, which takes it instead of building the env again."""
    key = _probe_key(env, seed)
    outcome = _HANDED.pop(key, None) or _probe(env, seed, timeout_s, deadline_key)
    if hand_on:
        _HANDED.clear()
        _HANDED[key] = outcome
    if facts is not None:  # what else the probe saw: a multi-agent env, and its rows (learned agents) per game
        facts["multiagent"] = outcome["multiagent"]
        facts["rows_per_game"] = outcome["rows_per_game"]
    return outcome["spaces"]


def _probe(env, seed: int, timeout_s: float, deadline_key: str) -> dict:
    outcome: dict = {}

    def build():
        try:
            probe = make_vec_env(env.id, 1, seed=seed, kwargs=dict(env.kwargs), preset=env.preset,
                                 wrappers=env.wrappers, multiagent=env.multiagent)
            outcome["spaces"] = (probe.single_observation_space, probe.single_action_space)
            outcome["rows_per_game"] = getattr(probe, "k", 1)
            outcome["multiagent"] = hasattr(probe, "set_opponents")
            probe.close()
        except (UnknownEnvError, EnvError, MissingExtraError) as exc:  # already say what is wrong and what to do
            outcome["error"] = exc
        except Exception as exc:  # noqa: BLE001 - a user's env can fail in any way: say where
            outcome["error"] = EnvStartError(f"building the env {env.id!r} failed ({type(exc).__name__}: {exc}); "
                                             "check env.id and env.kwargs")
            outcome["error"].__cause__ = exc

    thread = threading.Thread(target=build, name="menger-env-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if "error" in outcome:
        raise outcome["error"]
    if "spaces" not in outcome:
        raise EnvStartTimeout(f"building the env {env.id!r} (to read its spaces) did not finish within "
                              f"{timeout_s:g} s ({deadline_key}); its constructor or reset hangs: check what it "
                              "waits for (a file, a server, a licence), or raise the deadline")
    return outcome


def fit_to_env(cfg):
    """`cfg` fitted to the env it is given, from one probe of it (the config itself where nothing needs fitting):

    * a multi-agent env's rows are games x learned agents per game: runtime.envs_per_actor is rounded to whole
      games where they do not divide it (40 rows of a game with 3 learned agents become 39, 13 games), and
      eval.episodes up to whole games (10 become 12, 4 games), said in the log, so a generic preset fits any game;
    * `auto` in env.normalize, where the algorithm normalises with one learner: rewards are scaled for every env
      (a return's scale is the env's, never the algorithm's: IMPALA did not learn Acrobot's -1 a step unscaled);
      observations are normalised for continuous control (Box actions, float Box observations), and with `vector`
      also for Discrete actions when the observation is a 1-D float vector (ppo: MountainCar learned, -200 raw).
      Off elsewhere."""
    facts: dict = {}
    obs_space, action_space = probe_spaces(cfg.env, cfg.runtime.seed, *probe_deadline(cfg), facts, hand_on=True)
    rows, per_game = cfg.runtime.envs_per_actor, facts["rows_per_game"]
    if per_game > 1 and rows % per_game:
        games = max(1, round(rows / per_game))
        log.warning("runtime.envs_per_actor=%d is not whole games of %s (%d learned agents each): %d rows, %d games "
                    "per actor", rows, cfg.env.id, per_game, games * per_game, games)
        cfg = dataclasses.replace(cfg, runtime=dataclasses.replace(cfg.runtime, envs_per_actor=games * per_game))
    episodes = cfg.eval.episodes
    if per_game > 1 and episodes % per_game:  # at least the episodes asked for, in whole games
        games = -(-episodes // per_game)
        log.warning("eval.episodes=%d is not whole games of %s (%d learned agents each): the evaluator plays %d "
                    "games, %d episodes", episodes, cfg.env.id, per_game, games, games * per_game)
        cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, episodes=games * per_game))
    normalize = cfg.env.normalize
    if normalize.auto:
        can = cfg.algorithm.normalize and cfg.runtime.learner.count == 1
        continuous = isinstance(action_space, gym.spaces.Box)
        flat = isinstance(obs_space, gym.spaces.Box) and obs_space.dtype != np.uint8
        vector = flat and len(obs_space.shape) == 1 and np.issubdtype(obs_space.dtype, np.floating)
        obs = {"auto": can and continuous and flat, "vector": can and ((continuous and flat) or vector)}
        decided = dataclasses.replace(
            normalize, obs=obs[normalize.obs] if isinstance(normalize.obs, str) else normalize.obs,
            reward=can if normalize.reward == "auto" else normalize.reward)
        cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, normalize=decided))
    return cfg


def space_text(space) -> str:
    """A space in a few characters: Box(4,) float32, Discrete(2), Dict(position, mask)."""
    if isinstance(space, gym.spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    if isinstance(space, gym.spaces.Dict):
        return f"Dict({', '.join(space.spaces)})"
    return str(space)
