"""Where a job may start: the one placement rule of the cluster, as pure functions.

A job runs without preemption, so it needs its whole demand free for ``duration`` consecutive steps; it
starts at the earliest such offset inside the horizon. The fit test is one NumPy broadcast; the search
for a long enough run of fitting rows is a short Python scan, which at T_h = 20 is cheaper than any
further array operation.
"""

from __future__ import annotations

import numpy as np

NO_FIT = -1


def earliest_offsets(used: np.ndarray, durations: np.ndarray, demands: np.ndarray,
                     capacity: int) -> np.ndarray:
    """Earliest start offset of each job in the horizon, or ``NO_FIT``.

    Args:
        used: [T_h, d] units already reserved at each future step.
        durations: [K] durations, each in 1..T_h.
        demands: [K, d] demands.
        capacity: units per resource (``res_slot``).

    Returns:
        [K] offsets o with ``used[o:o + T_k] + demand_k <= capacity`` everywhere and ``o + T_k <= T_h``.
    """
    row_fits = np.all(used[None, :, :] + demands[:, None, :] <= capacity, axis=2).tolist()  # [K][T_h]
    return np.array([_first_run(rows, duration) for rows, duration in zip(row_fits, durations.tolist())],
                    dtype=np.int64)


def earliest_offset(used: np.ndarray, duration: int, demand: np.ndarray, capacity: int) -> int:
    """``earliest_offsets`` for one job."""
    return _first_run(np.all(used + demand <= capacity, axis=1).tolist(), duration)


def _first_run(row_fits: list[bool], duration: int) -> int:
    """Start of the first run of ``duration`` consecutive fitting rows."""
    run = 0
    for offset, fits in enumerate(row_fits):
        run = run + 1 if fits else 0
        if run == duration:
            return offset - duration + 1
    return NO_FIT

