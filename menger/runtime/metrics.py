"""The run's metrics record: time, frames, learner, episodes and accounts, plus what the components report.

Rates (`actor/fps`, `learner/fps`, `learner/updates_per_s`) are over the interval since the previous record.
Episode means (`episode/return_mean`, `episode/length_mean`, and `episode/<key>_mean` for each `env.info_keys`
key) are over the last `window` episodes (of those that reported the key).
"""
from __future__ import annotations

import numpy as np


class MetricsRecorder:
    def __init__(self, window: int, wall_offset: float = 0.0):
        """`window`: episodes in the mean return (stop.window); `wall_offset`: training seconds before a resume."""
        self.window, self.wall_offset = window, wall_offset
        self.last: dict = {}

    def record(self, elapsed: float, accounts, updates: int, version: int, *, learner_stats: dict,
               env_stats: dict, components: dict) -> dict:
        acc, last = accounts, self.last
        dt = max(1e-9, elapsed - last.get("time/wall_s", self.wall_offset))
        lags = acc.lags or [0]
        if last:
            actor_fps = (acc.produced - last["time/env_frames_produced"]) / dt
            learner_fps = (acc.accepted - last["time/env_frames"]) / dt
        else:
            actor_fps = acc.produced / dt if elapsed > 0 else 0.0
            learner_fps = acc.accepted / dt if elapsed > 0 else 0.0
        m = {
            "time/wall_s": elapsed,
            "time/env_frames": acc.accepted,
            "time/env_frames_produced": acc.produced,
            "actor/fps": actor_fps,
            "learner/fps": learner_fps,
            "learner/updates": updates,
            "learner/updates_per_s": (updates - last.get("learner/updates", 0)) / dt,
            "learner/policy_lag_mean": float(np.mean(lags)),
            "learner/policy_lag_max": float(np.max(lags)),
            "learner/version": version,
            "episode/count": acc.episodes,
            "episode/faulty": acc.faulty_episodes,
            "transport/frames_dropped": sum(acc.dropped.values()),
            "transport/duplicates": acc.duplicates,
            **components,
        }
        for reason, frames in acc.dropped.items():
            m[f"transport/frames_dropped/{reason}"] = frames
        if acc.returns:
            m["episode/return_mean"] = float(np.mean(list(acc.returns)[-self.window:]))
            m["episode/length_mean"] = float(np.mean(list(acc.lengths)[-self.window:]))
        for key, values in acc.infos.items():
            if values:
                m[f"episode/{key}_mean"] = float(np.mean(list(values)[-self.window:]))
        for key, value in learner_stats.items():
            m[f"learner/{key}"] = value
        for key, value in env_stats.items():
            m[f"actor/env_{key}"] = value
        acc.lags = []
        self.last = m
        return m
