"""The "atari" preset: ALE's own vectorised env (C++ threads, preprocessing built in).

Settings follow the usual Atari benchmark protocol: 4 frames skipped per action (max-pooled over the
last two), 84x84 greyscale, 4 frames stacked, up to 30 no-op actions at reset. Sticky actions, the action set
and the episode cap follow the id: probability 0.25 for ``ALE/Pong-v5`` (Machado et al. 2018), none for
``PongNoFrameskip-v4`` (Mnih et al. 2015, the protocol of the IMPALA paper); 0.25 for a bare ROM name.
Rewards are the game's own (ALE clips them to [-1, 1] by default): the returns Menger reports are the ones papers
report, and an algorithm clips them, if at all, inside its loss (``reward_clip`` of apex, r2d2, impala and appo,
1.0 in the Atari presets). Anything else keeps ALE's defaults (FIRE pressed at reset, no episode end on life
loss); any of them can be overridden by ``kwargs``.
Observations are uint8 [B, 4, 84, 84]. ROMs ship with ale-py, so nothing is downloaded.
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium

from menger.extras import require

ATARI_PRESET: dict[str, Any] = {
    "frameskip": 4,
    "img_height": 84,
    "img_width": 84,
    "grayscale": True,
    "stack_num": 4,
    "noop_max": 30,
    "reward_clipping": False,
}
ID_SETTINGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode")


def rom_name(env_id: str) -> str:
    """The ALE ROM behind an id: "ALE/Pong-v5", "PongNoFrameskip-v4" and "pong" all give "pong"."""
    ale_py = _ale_py(env_id)  # registers the ALE ids with gymnasium
    roms = require("ale_py.roms", "atari", f"the Atari env {env_id!r}")

    if env_id in gymnasium.registry:
        game = gymnasium.registry[env_id].kwargs.get("game")
        if game is not None:
            return game
        raise ValueError(f"{env_id!r} is not an Atari game, so preset='atari' does not apply to it.")
    rom_ids = roms.get_all_rom_ids()
    if env_id in rom_ids:
        return env_id
    ale_ids = [name for name in gymnasium.registry if name.startswith("ALE/")]
    close = difflib.get_close_matches(env_id, ale_ids + rom_ids, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(
        f"{env_id!r} is not an Atari game known to ale-py {ale_py.__version__}.{hint} "
        "Use an id such as 'ALE/Pong-v5' or 'PongNoFrameskip-v4', or a ROM name such as 'pong'."
    )


def id_settings(env_id: str) -> dict[str, Any]:
    """What a registered id says about sticky actions, action set and episode cap (v5 defaults otherwise)."""
    _ale_py(env_id)  # registers the ALE ids with gymnasium

    registered = gymnasium.registry[env_id].kwargs if env_id in gymnasium.registry else {}
    settings = {"repeat_action_probability": 0.25}
    settings.update({key: registered[key] for key in ID_SETTINGS if key in registered})
    return settings


def make_atari_vector_env(env_id: str, num_envs: int, *, num_threads: int, kwargs: dict[str, Any]):
    """An ``AtariVectorEnv`` with the preset's settings and the id's own; ``kwargs`` override them."""
    AtariVectorEnv = require("ale_py.vector_env", "atari", f"the Atari env {env_id!r}").AtariVectorEnv

    settings = {**ATARI_PRESET, **id_settings(env_id), **kwargs}
    return AtariVectorEnv(game=rom_name(env_id), num_envs=num_envs, num_threads=num_threads, **settings)


def _ale_py(env_id: str):
    return require("ale_py", "atari", f"the Atari env {env_id!r}")
