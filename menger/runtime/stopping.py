"""When a run stops: the `stop` section's rules, checked after every update and while the learner waits."""
from __future__ import annotations


class StopRules:
    def __init__(self, stop):
        """`stop`: the experiment's `StopConfig` (target_return over `window` episodes, env_frames, wall_clock_s)."""
        self.stop = stop

    def after_update(self, accounts, elapsed_s: float, requested: bool) -> str | None:
        """The reason to stop now, if any: requested, target_return, env_frames or wall_clock."""
        stop = self.stop
        if requested:
            return "requested"
        if stop.target_return is not None:
            mean = accounts.mean_return(stop.window)
            if mean is not None and mean >= stop.target_return:
                return "target_return"
        if stop.env_frames is not None and accounts.accepted >= stop.env_frames:
            return "env_frames"
        return self.while_waiting(elapsed_s, False)

    def while_waiting(self, elapsed_s: float, requested: bool) -> str | None:
        """Between updates only time and a request can end the run (returns and frames move with updates)."""
        if requested:
            return "requested"
        if self.stop.wall_clock_s is not None and elapsed_s >= self.stop.wall_clock_s:
            return "wall_clock"
        return None
