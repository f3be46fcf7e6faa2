"""The placement grid: cell centres where macro centres may go, and which of them are legal."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from menger.apps.chip.plc import Blockage, PlcHeader

_EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class Grid:
    """C columns × R rows over a W × H canvas; cell index = row * C + col (row 0 at the bottom)."""

    columns: int
    rows: int
    width: float
    height: float
    blockages: tuple[Blockage, ...] = ()

    @classmethod
    def from_header(cls, header: PlcHeader) -> "Grid":
        return cls(header.columns, header.rows, header.width, header.height, header.blockages)

    @property
    def num_cells(self) -> int:
        return self.columns * self.rows

    @property
    def cell_width(self) -> float:
        return self.width / self.columns

    @property
    def cell_height(self) -> float:
        return self.height / self.rows

    def cell_centre(self, cell: int | np.ndarray) -> tuple:
        row, col = np.divmod(cell, self.columns)
        return (col + 0.5) * self.cell_width, (row + 0.5) * self.cell_height

    def cell_of(self, x, y) -> np.ndarray:
        col = np.clip(np.floor(np.asarray(x) / self.cell_width).astype(int), 0, self.columns - 1)
        row = np.clip(np.floor(np.asarray(y) / self.cell_height).astype(int), 0, self.rows - 1)
        return row * self.columns + col

    def static_mask(self, width: float, height: float) -> np.ndarray:
        """Cells where a width × height macro centred there lies inside the canvas and clear of blockages
        (cached per size and read-only: copy before changing it)."""
        return _static_mask(self, float(width), float(height))

    def legal_mask(self, width: float, height: float, obstacles: tuple[np.ndarray, ...]) -> np.ndarray:
        """static_mask minus cells where the macro would overlap an obstacle (x, y, w, h arrays)."""
        mask = self.static_mask(width, height).copy()
        ox, oy, ow, oh = obstacles
        if len(ox):
            cx, cy = self.cell_centre(np.arange(self.num_cells))
            hits = rectangles_overlap(cx[:, None], cy[:, None], width, height, ox[None], oy[None], ow[None], oh[None])
            mask &= ~hits.any(axis=1)
        return mask


def rectangles_overlap(ax, ay, aw, ah, bx, by, bw, bh) -> np.ndarray:
    """True where two centred rectangles share a positive area (touching edges do not overlap)."""
    return (np.abs(ax - bx) < (aw + bw) / 2 - _EPS) & (np.abs(ay - by) < (ah + bh) / 2 - _EPS)


@functools.lru_cache(maxsize=256)
def _static_mask(grid: Grid, width: float, height: float) -> np.ndarray:
    cx, cy = grid.cell_centre(np.arange(grid.num_cells))
    inside = ((cx - width / 2 >= -_EPS) & (cx + width / 2 <= grid.width + _EPS)
              & (cy - height / 2 >= -_EPS) & (cy + height / 2 <= grid.height + _EPS))
    for b in grid.blockages:
        if b.rate > 0:
            inside &= ~rectangles_overlap(cx, cy, width, height, (b.x_min + b.x_max) / 2,
                                          (b.y_min + b.y_max) / 2, b.x_max - b.x_min, b.y_max - b.y_min)
    inside.flags.writeable = False
    return inside
