"""Keep the cheapest deterministic rollout among the policies a training run writes.

PPO's policy moves in noisy steps: on Ariane one seed's final policy placed 1.3 % worse than greedy while
the same run's earlier policies placed better. `CheckpointRollouts` therefore rolls out every checkpoint
the run saves (deterministically, the way `menger place` scores a policy) while training goes on, and
keeps the cheapest. The result is still the deterministic rollout of a policy the run produced, scored by
the full proxy cost as the environment scores an episode (after its soft-macro pass, if any); only which of
the run's policies is kept changes. `menger place` then finishes the cheapest few (commands.py).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import threading
import time

import numpy as np

from menger.apps.chip.costs import Layout, ProxyCost
from menger.apps.chip.env import ChipPlacementEnv
from menger.apps.chip.problem import ChipProblem
from menger.runtime import Observer

log = logging.getLogger(__name__)

ENV_ONLY_KWARGS = ("netlist", "plc")  # what names the design; the rollout already has the loaded problem


def placement_settings(env_kwargs: dict) -> dict:
    """The env kwargs that shape placement (grid bound, weights, soft-macro steps), without the ones that
    name the design: the rollout is given the already loaded problem."""
    return {key: value for key, value in env_kwargs.items() if key not in ENV_ONLY_KWARGS}


@dataclasses.dataclass(frozen=True)
class Rollout:
    """One policy's deterministic placement: the checkpoint step it came from, the hard macros as placed,
    the proxy cost after the environment's soft-macro pass (None when the policy boxed itself in), and
    when its checkpoint was found, in seconds since the watcher started (0 outside a watcher)."""

    step: int
    layout: Layout | None
    cost: ProxyCost | None
    proxy: float
    elapsed_s: float = 0.0


def deterministic_rollout(policy, problem: ChipProblem, env_kwargs: dict | None = None,
                          seed: int = 0) -> tuple[Layout | None, ProxyCost | None]:
    """Place every hard macro with the policy's most likely legal action (`policy.act(batch,
    deterministic=True)`, as `menger eval` acts). Returns the hard-macro layout and the final proxy cost,
    or (None, None) when a macro was left without a legal cell. Reward settings do not change the placement."""
    env = ChipPlacementEnv(problem=problem, **placement_settings(env_kwargs or {}))
    obs, _ = env.reset(seed=seed)
    while True:
        batch = {key: value[None] for key, value in obs.items()}
        obs, _, terminated, _, _ = env.step(int(policy.act(batch, deterministic=True)[0]))
        if terminated:
            break
    if env.final_cost is None:
        return None, None
    return env.cost.layout.copy(), env.final_cost


class BestRollout:
    """The cheapest of the rollouts offered so far, by the weighted proxy cost. Loop:

        best = BestRollout(weights)
        for step, policy in policies: best.offer(best.evaluate(step, policy, problem))
        best.best  # None until a rollout placed every macro
    """

    def __init__(self, weights: dict | None = None):
        self.weights = dict(weights or {})
        self.best: Rollout | None = None
        self.history: list[Rollout] = []

    def evaluate(self, step: int, policy, problem: ChipProblem, env_kwargs: dict | None = None,
                 elapsed_s: float = 0.0) -> Rollout:
        layout, cost = deterministic_rollout(policy, problem, env_kwargs)
        return Rollout(step, layout, cost, cost.weighted(**self.weights) if cost is not None else float("inf"),
                       elapsed_s)

    def cheapest(self, count: int) -> list[Rollout]:
        """Up to `count` rollouts that placed every macro, cheapest first."""
        return sorted((r for r in self.history if r.cost is not None), key=lambda r: r.proxy)[:count]

    def offer(self, rollout: Rollout) -> None:
        self.history.append(rollout)
        if rollout.cost is not None and (self.best is None or rollout.proxy < self.best.proxy):
            self.best = rollout


class CheckpointRollouts(Observer):
    """Rolls out each new checkpoint of a run while it trains and keeps the cheapest. Loop:

        watcher = CheckpointRollouts(run_dir, problem, config)   # config: the run's ExperimentConfig
        watcher.start()                                           # a thread rolls out run_dir/checkpoints
        api.train(config, run_dir=run_dir, observers=[watcher])   # on_checkpoint wakes the thread
        best = watcher.finish()                                   # rolls out the final checkpoint too

    The thread shares the learner's process: a rollout is a few seconds of NumPy and a small network, so it
    runs beside the trainer, not in its hook. Without the hook (a run it only watches) it looks every `poll_s`."""

    def __init__(self, run_dir: str | pathlib.Path, problem: ChipProblem, config, poll_s: float = 1.0):
        self.checkpoint_dir = pathlib.Path(run_dir) / "checkpoints"
        self.problem, self.config, self.poll_s = problem, config, poll_s
        self.env_kwargs = dict(config.env.kwargs)
        weight_keys = ("w_wirelength", "w_congestion", "w_density")
        self.tracker = BestRollout({key: self.env_kwargs[key] for key in weight_keys if key in self.env_kwargs})
        self._network = None
        self._rolled_out: str | None = None  # the newest checkpoint directory already rolled out
        self._stop = threading.Event()
        self._saved = threading.Event()  # a checkpoint was written since the last look
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._began = time.perf_counter()

    def start(self) -> None:
        self._began = time.perf_counter()
        self._thread = threading.Thread(target=self._watch, name="chip-checkpoint-rollouts", daemon=True)
        self._thread.start()

    def on_checkpoint(self, trainer, step: int, path) -> None:
        self._saved.set()

    def stop(self) -> None:
        """Stop the watching thread (after the rollout in progress, if any)."""
        self._stop.set()
        self._saved.set()
        if self._thread is not None:
            self._thread.join()

    def finish(self) -> Rollout:
        """Stop watching, roll out the newest checkpoint if it is new, and return the cheapest rollout."""
        self.stop()
        if self._error is not None:
            raise RuntimeError(f"rolling out the run's checkpoints failed: {self._error}") from self._error
        self.poll()
        if self.tracker.best is None:
            steps = [r.step for r in self.tracker.history]
            raise RuntimeError(f"no checkpoint's policy placed every macro (checkpoints rolled out: {steps}); "
                               "train longer or use --method sa")
        return self.tracker.best

    def poll(self) -> Rollout | None:
        """Roll out the newest checkpoint if it has not been rolled out yet; returns its rollout."""
        from menger.checkpoint import CheckpointManager, unflatten_state

        if not self.checkpoint_dir.is_dir():
            return None
        manager = CheckpointManager(self.checkpoint_dir, keep_last=self.config.checkpoint.keep_last)
        listed = manager.list()
        if not listed or listed[-1].name == self._rolled_out:
            return None
        checkpoint = manager.load_latest()
        if checkpoint is None or checkpoint.path.name == self._rolled_out:
            return None
        self._rolled_out = checkpoint.path.name
        found_s = time.perf_counter() - self._began
        state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
        policy = self._policy(state["learner"]["model"])
        rollout = self.tracker.evaluate(checkpoint.step, policy, self.problem, self.env_kwargs, found_s)
        self.tracker.offer(rollout)
        log.info("checkpoint %d: deterministic rollout proxy cost %.6f (best so far %.6f)", rollout.step,
                 rollout.proxy, self.tracker.best.proxy if self.tracker.best is not None else float("inf"))
        return rollout

    @property
    def history(self) -> list[Rollout]:
        return list(self.tracker.history)

    def _policy(self, model_state: dict):
        """The run's network with a checkpoint's weights, wrapped as `menger.api.Policy` (built once)."""
        from menger.api import Policy
        from menger.models import build_policy

        if self._network is None:
            probe = ChipPlacementEnv(problem=self.problem, **placement_settings(self.env_kwargs))
            self._network = build_policy(probe.observation_space, probe.action_space, self.config.model)
        self._network.load_state_dict(model_state)
        return Policy(self._network, self.config)

    def _watch(self) -> None:
        try:
            while True:
                self._saved.wait(self.poll_s)
                self._saved.clear()
                if self._stop.is_set():
                    return
                self.poll()
        except BaseException as error:  # reported by finish(), where the caller can act on it
            self._error = error


def summary(history: list[Rollout]) -> dict:
    """What the report records about the rollouts: each checkpoint step with its proxy cost and the seconds
    into the run its checkpoint was found, and the best."""
    costs = [(r.step, None if r.cost is None else round(r.proxy, 6), round(r.elapsed_s, 1)) for r in history]
    placed = [r for r in history if r.cost is not None]
    best = min(placed, key=lambda r: r.proxy) if placed else None
    return {"rollouts": costs, "best_step": None if best is None else best.step,
            "best_proxy": None if best is None else best.proxy,
            "spread": float(np.ptp([r.proxy for r in placed])) if placed else None}
