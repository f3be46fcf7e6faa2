"""When a run stops: the `stop` section's rules, checked after every update and while the learner waits, and
the health rules that fail a run which can no longer learn anything instead of reporting it as a success."""
from __future__ import annotations

import math

MIN_UNROLLS_FOR_FAULT_SHARE = 20  # too few unrolls say little about an env's fault rate


class TrainingFailed(RuntimeError):
    """The run cannot learn: its frames are mostly lost to env faults, or its loss stopped being finite.
    `child_errors`: {"actor i": (error, traceback)} when the actors' errors are the cause (`menger.explain`)."""

    child_errors: dict[str, tuple[str, str]] = {}


class StopRules:
    def __init__(self, stop, use_eval: bool = False):
        """`stop`: the experiment's `StopConfig` (target_return over `window` episodes, env_frames, wall_clock_s,
        max_invalid_fraction, max_nonfinite_updates). `use_eval`: target_return reads the latest deterministic
        evaluation's mean return instead of the training episodes' (apex, sac: their actors explore)."""
        self.stop, self.use_eval = stop, use_eval
        self.nonfinite_in_a_row = 0
        self.set_aside: set[str] = set()  # rules a resume moved past (see `resumed`)

    def met(self, accounts, elapsed_s: float, eval_return: float | None = None) -> list[str]:
        """Every rule that holds now: target_return, env_frames, wall_clock (whether set aside or not)."""
        stop, out = self.stop, []
        if stop.target_return is not None:
            mean = eval_return if self.use_eval else accounts.mean_return(stop.window)
            if mean is not None and mean >= stop.target_return:
                out.append("target_return")
        if stop.env_frames is not None and accounts.accepted >= stop.env_frames:
            out.append("env_frames")
        if stop.wall_clock_s is not None and elapsed_s >= stop.wall_clock_s:
            out.append("wall_clock")
        return out

    def resumed(self, accounts, elapsed_s: float, eval_return: float | None, changed: set[str]) -> list[str]:
        """A resume whose overrides moved a stop rule continues training: the rules already met that it left
        as they were are set aside for this run (the user asked for more), and returned. A resume that changed
        no stop rule sets nothing aside: a rule already met stops it at once."""
        if not any(key.startswith("stop.") for key in changed):
            return []
        keys = {"target_return": ("stop.target_return", "stop.window"), "env_frames": ("stop.env_frames",),
                "wall_clock": ("stop.wall_clock_s",)}
        self.set_aside = {rule for rule in self.met(accounts, elapsed_s, eval_return)
                          if not any(key in changed for key in keys[rule])}
        return sorted(self.set_aside)

    def after_update(self, accounts, elapsed_s: float, requested: bool, eval_return: float | None = None) -> str | None:
        """The reason to stop now, if any: requested, target_return, env_frames or wall_clock."""
        if requested:
            return "requested"
        for rule in self.met(accounts, elapsed_s, eval_return):
            if rule not in self.set_aside:
                return rule
        return None

    def while_waiting(self, elapsed_s: float, requested: bool) -> str | None:
        """Between updates only time and a request can end the run (returns and frames move with updates)."""
        if requested:
            return "requested"
        if self.stop.wall_clock_s is not None and elapsed_s >= self.stop.wall_clock_s and "wall_clock" not in self.set_aside:
            return "wall_clock"
        return None

    def check_health(self, accounts, learner_stats: dict) -> None:
        """After an update: raise TrainingFailed when the run can no longer learn (see StopConfig)."""
        loss = learner_stats.get("loss")
        finite = loss is None or math.isfinite(loss)
        self.nonfinite_in_a_row = 0 if finite else self.nonfinite_in_a_row + 1
        if self.nonfinite_in_a_row >= self.stop.max_nonfinite_updates:
            raise TrainingFailed(
                f"the loss was {loss} for {self.nonfinite_in_a_row} updates in a row (stop.max_nonfinite_updates): "
                "the parameters are no longer finite, so nothing is saved from here on; lower the learning rate "
                "or clip the gradients (max_grad_norm), then resume from the last checkpoint or start again")
        share = accounts.fault_frames / max(1, accounts.produced)
        if accounts.unrolls >= MIN_UNROLLS_FOR_FAULT_SHARE and share > self.stop.max_invalid_fraction:
            raise TrainingFailed(
                f"{share:.0%} of the {accounts.produced} frames produced were lost to env faults (non-finite "
                f"values dropped, envs rebuilt: {accounts.env_totals()}), more than stop.max_invalid_fraction="
                f"{self.stop.max_invalid_fraction}; fix the env (see the actor/env_* counters), or raise the limit")
