"""A two-team grid wargame of our own: PettingZoo envs over a vectorised NumPy core, and scripted bots.

Rules and pictures: docs/wargame.md. The entry points users type:

* ``menger.envs.wargame:parallel_env`` (a PettingZoo ``ParallelEnv`` over one game) and
  ``menger.envs.wargame:env`` (the same as an AEC env); keyword arguments are ``WargameConfig`` fields;
* ``WargameBatch(config, num_games)``: G games stepped at once, for actors (``reset(seed)`` /
  ``step(actions [G, A])`` -> ``StepOutput`` of obs [G, A, ...], reward [G, A], alive [G, A], done [G],
  outcome [G, A]; see ``menger.envs.wargame.core``);
* ``BOTS`` / ``make_bot(name, seed)``: ``random``, ``attack-nearest``, ``focus-fire``, each with
  ``act(observation, action_mask)``; ``play(red, blue, games, seed)`` -> (red wins, draws, blue wins).
"""

from menger.envs.wargame.bots import BOTS, AttackNearestBot, FocusFireBot, RandomBot, make_bot, play
from menger.envs.wargame.config import DEFAULT_LAYOUT, UnitType, WargameConfig, make_config
from menger.envs.wargame.core import BLUE, DRAW, ONGOING, RED, ObservationLayout, StepOutput, WargameBatch
from menger.envs.wargame.pettingzoo_env import WargameParallelEnv, env, parallel_env
from menger.envs.wargame.render import render_game

__all__ = [
    "BLUE",
    "BOTS",
    "DEFAULT_LAYOUT",
    "DRAW",
    "ONGOING",
    "RED",
    "AttackNearestBot",
    "FocusFireBot",
    "ObservationLayout",
    "RandomBot",
    "StepOutput",
    "UnitType",
    "WargameBatch",
    "WargameConfig",
    "WargameParallelEnv",
    "env",
    "make_bot",
    "make_config",
    "parallel_env",
    "play",
    "render_game",
]
