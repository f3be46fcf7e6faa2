"""A picture of one wargame: an [H*cell, W*cell, 3] uint8 array drawn with NumPy alone.

Floor is light, walls dark; capture zones are tinted yellow while no one holds them and in the holder's
colour while one team does; each unit is a red or blue shape (infantry a disc, the second type a square, the
third a diamond) with its hit points as a green bar along its cell's top edge; cells red does not see are
shaded when fog of war is on.
"""

from __future__ import annotations

import numpy as np

FLOOR, WALL, GRID = (236, 233, 225), (70, 70, 78), (210, 206, 198)
ZONE = {None: (246, 222, 120), 0: (240, 170, 160), 1: (160, 190, 240)}
TEAM = ((200, 40, 40), (40, 80, 200))
HP_BAR, HP_BACK = (40, 170, 60), (60, 30, 30)


def render_game(batch, game: int = 0, cell: int = 24) -> np.ndarray:
    """The picture of game ``game`` of a ``WargameBatch``."""
    game_map = batch.map
    height, width = game_map.height, game_map.width
    image = np.empty((height * cell, width * cell, 3), dtype=np.uint8)
    image[:] = FLOOR
    held = batch.held_points()[game]                                       # [2, P]
    for point in range(len(game_map.capture_cells)):
        owner = 0 if held[0, point] else 1 if held[1, point] else None
        for flat in np.flatnonzero(game_map.capture_zone[point]):
            _fill(image, flat, width, cell, ZONE[owner])
    for flat in np.flatnonzero(game_map.walls.ravel()):
        _fill(image, flat, width, cell, WALL)
    image[::cell, :] = GRID
    image[:, ::cell] = GRID
    yy, xx = np.mgrid[0:cell, 0:cell]
    centre = (cell - 1) / 2
    shapes = (
        (yy - centre) ** 2 + (xx - centre) ** 2 <= (0.36 * cell) ** 2,
        (np.abs(yy - centre) <= 0.3 * cell) & (np.abs(xx - centre) <= 0.3 * cell),
        np.abs(yy - centre) + np.abs(xx - centre) <= 0.42 * cell,
    )
    for agent in np.flatnonzero(batch.alive[game]):
        row, col = divmod(int(batch.position[game, agent]), width)
        block = image[row * cell:(row + 1) * cell, col * cell:(col + 1) * cell]
        block[shapes[int(batch.unit_type[agent])]] = TEAM[int(batch.team[agent])]
        filled = int(round((cell - 4) * batch.hp[game, agent] / batch.max_hp[agent]))
        block[1:4, 2:cell - 2] = HP_BACK
        block[1:4, 2:2 + filled] = HP_BAR
    if batch.config.fog_of_war:
        hidden = ~batch.seen_cells()[game, 0].reshape(height, width)
        shade = np.repeat(np.repeat(hidden, cell, 0), cell, 1)
        image[shade] = (image[shade] * 0.75).astype(np.uint8)
    return image


def _fill(image: np.ndarray, flat: int, width: int, cell: int, colour) -> None:
    row, col = divmod(int(flat), width)
    image[row * cell:(row + 1) * cell, col * cell:(col + 1) * cell] = colour
