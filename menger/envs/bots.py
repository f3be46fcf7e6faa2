"""Scripted players for multi-agent envs, by name: what plays a seat when no learned policy does.

    bot = make_bot("alphabeta:4", "pettingzoo.classic.connect_four_v3:env", seed=0)
    action = bot.act(observation, action_mask)      # PettingZoo's observation of one agent

A spec is `random` (uniform over the legal moves), `alphabeta:DEPTH` (Connect Four's search player) or
`bot:NAME`: a name in the `BOTS` table of the env's bot module (`menger.envs.wargame` for the wargame, the env's
own module for a user env). Every bot follows one protocol, `act(observation, action_mask) -> action`, which a
user's own bot follows too.
"""
from __future__ import annotations

import importlib

import numpy as np

# where the bots of an env live, when not in the env's own module
BOT_MODULES = {"pettingzoo.classic.connect_four_v3": "menger.envs.connect_four",
               "pettingzoo.classic.connect_four": "menger.envs.connect_four"}


class RandomBot:
    """Uniform over the legal moves (all moves when the env gives no mask)."""

    def __init__(self, seed: int = 0, num_actions: int | None = None):
        self.rng, self.num_actions = np.random.default_rng(seed), num_actions

    def act(self, observation, action_mask=None) -> int:
        if action_mask is None:
            return int(self.rng.integers(self.num_actions or 2))
        legal = np.flatnonzero(np.asarray(action_mask))
        return int(self.rng.choice(legal)) if len(legal) else 0


def bot_module(env_id: str):
    name = env_id.partition(":")[0]
    return importlib.import_module(BOT_MODULES.get(name, name))


def make_bot(spec: str, env_id: str, seed: int = 0):
    """A bot for `env_id` from its spec (see the module doc); an unknown one names the bots that exist."""
    if spec == "random":
        return RandomBot(seed)
    if spec.startswith("alphabeta:"):
        from menger.envs import connect_four

        return connect_four.make_bot(spec, seed=seed)
    if spec.startswith("bot:"):
        name = spec[4:]
        module = bot_module(env_id)
        bots = getattr(module, "BOTS", {})
        if name not in bots:
            known = ", ".join(f"bot:{b}" for b in bots) or "none"
            raise ValueError(f"{spec!r}: {module.__name__} has no bot {name!r} (its bots: {known})")
        if hasattr(module, "make_bot"):
            return module.make_bot(name, seed=seed)
        return bots[name](seed=seed)
    raise ValueError(f"unknown opponent {spec!r}: use random, alphabeta:DEPTH (Connect Four) or bot:NAME (the env's "
                     "scripted bots)")


def act_all(bot, raw: list, masks: np.ndarray | None) -> np.ndarray:
    """The bot's actions for a batch of seats (its own `act_batch` when it has one)."""
    observations = [o["observation"] if isinstance(o, dict) and "observation" in o else o for o in raw]
    if hasattr(bot, "act_batch"):
        return np.asarray(bot.act_batch(observations, masks))
    return np.array([bot.act(o, None if masks is None else masks[n]) for n, o in enumerate(observations)])
