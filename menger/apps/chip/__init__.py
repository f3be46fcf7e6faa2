"""Chip macro placement (Circuit Training / AlphaChip): netlists, proxy costs, `ChipPlacement-v0`,
baselines and commands. Importing this package registers the gymnasium id."""

import gymnasium

from menger.apps.chip.problem import data_path, load_problem

__all__ = ["data_path", "load_problem"]

if "ChipPlacement-v0" not in gymnasium.registry:
    gymnasium.register(id="ChipPlacement-v0", entry_point="menger.apps.chip.env:ChipPlacementEnv")
