"""DeepRM's image of the cluster, drawn from a ``ClusterState``.

The image is T_h rows (future time steps) by, left to right: for each resource, a ``res_slot``-wide block
of reserved units then one ``res_slot``-wide block per job slot (T_j rows by r_{j,i} columns); then the
backlog count as filled cells (row by row); then one column holding the time since the last arrival,
divided by T_h and capped at 1. All cells are 0 or 1 except that last column.

Because it is a pure function of the state, a trained policy can be evaluated from the same states the
heuristics see.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from menger.apps.cluster.config import ClusterConfig
from menger.apps.cluster.placement import NO_FIT
from menger.apps.cluster.simulator import ClusterState


class ImageEncoder:
    """Draws the image into a preallocated buffer with a handful of broadcast comparisons."""

    def __init__(self, config: ClusterConfig):
        self.config = config
        horizon, resources, slots = config.horizon, config.num_resources, config.num_slots
        self._block_columns = resources * (1 + slots) * config.res_slot
        self._backlog_end = self._block_columns + config.backlog_width
        self.shape = (horizon, self._backlog_end + 1)
        self._rows = np.arange(horizon)[:, None, None]
        self._widths = np.zeros((horizon, resources, 1 + slots), dtype=np.int64)
        # Row patterns looked up by width: one gather draws every block at once.
        self._filled_row = (np.arange(config.res_slot)[None, :] <
                            np.arange(config.res_slot + 1)[:, None]).astype(np.float32)
        cells = np.arange(horizon * config.backlog_width).reshape(horizon, -1)
        self._backlog_images = (cells[None] < np.arange(config.backlog_size + 1)[:, None, None]).astype(np.float32)
        self._image = np.zeros(self.shape, dtype=np.float32)

    @property
    def space(self) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=self.shape, dtype=np.float32)

    def encode(self, state: ClusterState) -> np.ndarray:
        """A fresh [T_h, width] float32 image of ``state``."""
        widths = self._widths
        widths[:, :, 0] = state.used
        running = self._rows < state.slot_duration[None, None, :]  # [T_h, 1, M]
        np.multiply(running, state.slot_demand.T[None, :, :], out=widths[:, :, 1:])
        image = self._image
        blocks = self._filled_row.take(widths, axis=0)  # [T_h, d, 1 + M, res_slot]
        image[:, :self._block_columns] = blocks.reshape(self.shape[0], -1)
        backlog_shown = min(state.backlog_count, self.config.backlog_size)
        image[:, self._block_columns:self._backlog_end] = self._backlog_images[backlog_shown]
        image[:, -1] = min(state.since_last_arrival / self.config.horizon, 1.0)
        return image.copy()


def action_mask(state: ClusterState) -> np.ndarray:
    """[M + 1] int8: 1 for slots whose job fits somewhere in the horizon, and for the void action."""
    mask = np.ones(state.num_slots + 1, dtype=np.int8)
    mask[:-1] = state.slot_offsets() != NO_FIT
    return mask


def observation_space(config: ClusterConfig) -> spaces.Space:
    image = ImageEncoder(config).space
    if not config.action_mask:
        return image
    return spaces.Dict({"obs": image, "action_mask": spaces.MultiBinary(config.num_slots + 1)})


def observe(encoder: ImageEncoder, state: ClusterState):
    """The environment's observation: the image, or {"obs", "action_mask"} when masking is on."""
    image = encoder.encode(state)
    if not encoder.config.action_mask:
        return image
    return {"obs": image, "action_mask": action_mask(state)}
