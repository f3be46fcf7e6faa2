"""Scripted players for multi-agent envs, by name: what plays a seat when no learned policy does.

    bot = make_bot("alphabeta:4", "pettingzoo.classic.connect_four_v3:env", seed=0)
    action = bot.act(observation, action_mask)      # PettingZoo's observation of one agent

A spec is `random` (uniform over the legal moves), `alphabeta:DEPTH` (Connect Four's search player) or
`bot:NAME`: a bot of the env's bot module, its `make_bot(name, seed=)` or `BOTS[name]` (`menger.envs.wargame`
for the wargame; for an env defined elsewhere `BOT_MODULES` names Menger's module, else the env's own module is
asked). The keyword arguments the env is made with (`env.kwargs`) go to a `make_bot` that takes them, so a bot
plays the game the env is (the wargame's map, teams and observation); one that takes none plays any. Every bot
follows one protocol, `act(observation, action_mask) -> action`, which a user's own bot follows too. The actors'
opponents and `menger match` build their bots here.
"""
from __future__ import annotations

import difflib
import importlib
import inspect

import numpy as np

# where the bots of an env defined outside Menger live
BOT_MODULES = {"pettingzoo.classic.connect_four_v3": "menger.envs.connect_four",
               "pettingzoo.classic.connect_four.connect_four": "menger.envs.connect_four"}


class BotError(ValueError):
    """A bot that cannot be built: an unknown name, an env without bots."""


class RandomBot:
    """Uniform over the legal moves (all moves when the env gives no mask)."""

    def __init__(self, seed: int = 0, num_actions: int | None = None):
        self.rng, self.num_actions = np.random.default_rng(seed), num_actions

    def act(self, observation, action_mask=None) -> int:
        if action_mask is None:
            return int(self.rng.integers(self.num_actions or 2))
        legal = np.flatnonzero(np.asarray(action_mask))
        return int(self.rng.choice(legal)) if len(legal) else 0


def bot_module(module: str) -> str:
    """The module whose bots play the env defined in `module`."""
    return BOT_MODULES.get(module, module)


def env_bot(name: str, env_id: str, seed: int = 0, module_name: str | None = None, env_kwargs: dict | None = None):
    """The env's own bot `name` (`alphabeta:4`, `focus-fire`): its bot module's `make_bot(name, seed=)` (with
    the env's `env_kwargs` when it takes keyword arguments), or `BOTS[name]` built with `seed=` (or nothing)."""
    module_name = module_name or bot_module(str(env_id).partition(":")[0])
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BotError(f"cannot import {module_name} for the bots of {env_id!r} ({exc})") from exc
    bots = getattr(module, "BOTS", None)
    make = getattr(module, "make_bot", None)
    if bots is None and make is None:
        raise BotError(f"the env {env_id!r} has no bots of Menger's ({module_name} defines no BOTS); play "
                       "random, a run directory or your own package.module:Factory")
    base = name.partition(":")[0]
    if bots is not None and base not in bots:
        close = difflib.get_close_matches(base, list(bots), n=1)
        raise BotError(f"the env {env_id!r} has no bot {base!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                       + f" Its bots ({module_name}.BOTS): {', '.join(bots)}")
    try:
        if make is not None:
            return make(name, seed=seed, **_accepted(make, env_kwargs or {}))
        return construct(bots[base], seed)
    except (TypeError, ValueError) as exc:
        raise BotError(f"bot {name!r} of {env_id!r}: {exc}") from exc


def _accepted(factory, kwargs: dict) -> dict:
    """The keyword arguments `factory` takes: all with a ``**kwargs``, else those it names."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {key: value for key, value in kwargs.items() if key in parameters and key not in ("name", "seed")}


def construct(factory, seed: int):
    """`factory(seed=seed)` if it takes a seed, else `factory()`."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes_seed = "seed" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    return factory(seed=seed) if takes_seed else factory()


def make_bot(spec: str, env_id: str, seed: int = 0, env_kwargs: dict | None = None):
    """A bot for `env_id` (made with `env_kwargs`) from its spec (see the module doc)."""
    if spec == "random":
        return RandomBot(seed)
    if spec == "alphabeta" or spec.startswith("alphabeta:"):
        return env_bot(spec, env_id, seed, env_kwargs=env_kwargs)
    if spec.startswith("bot:"):
        return env_bot(spec[4:], env_id, seed, env_kwargs=env_kwargs)
    raise BotError(f"unknown opponent {spec!r}: use random, alphabeta:DEPTH (Connect Four), bot:NAME (the env's "
                   "scripted bots) or run:PATH (another run's policy)")


def act_all(bot, raw: list, masks: np.ndarray | None) -> np.ndarray:
    """The bot's actions for a batch of seats (its own `act_batch` when it has one)."""
    observations = [o["observation"] if isinstance(o, dict) and "observation" in o else o for o in raw]
    if hasattr(bot, "act_batch"):
        return np.asarray(bot.act_batch(np.stack(observations), masks))
    return np.array([bot.act(o, None if masks is None else masks[n]) for n, o in enumerate(observations)])
