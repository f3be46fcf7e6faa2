"""Deterministic evaluation during training, on the evaluator's own envs (Ape-X's actors explore with their own
epsilon, SAC's sample their actions, so training returns say little about the policy).

Every `eval.interval_s` seconds of training, after an update, the trainer calls::

    stats = evaluator.run(learner.policy)   # eval/return_mean, eval/return_std, eval/episodes, eval/time_s, ...

which copies the learner's parameters into the evaluator's CPU network and plays `eval.episodes` episodes at
once, one per env, with the greedy (apex, r2d2: its recurrent state carried through the episode) or mean (sac)
action, from the same seeds each time. Training waits
meanwhile (the actors fill their chunks; the rate limiter bounds how far they get). `eval/time_s` adds up the
seconds spent evaluating, so that a benchmark can leave them out of the training time.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from menger.envs import make_vec_env
from menger.models import build_policy, obs_to_tensors


class Evaluator:
    def __init__(self, config, obs_space, action_space):
        self.cfg = config.eval
        self.interval_s = config.eval_interval_s
        self.envs = make_vec_env(config.env.id, self.cfg.episodes, seed=self.cfg.seed, kwargs=dict(config.env.kwargs),
                                 preset=config.env.preset, wrappers=config.env.wrappers)
        with torch.random.fork_rng(devices=[]):  # building it must not move the run's random stream
            self.network = build_policy(obs_space, action_space, config.model, config.algo,
                                         config.env.normalize).eval()
        self.next_at = self.interval_s
        self.count, self.time_s, self.best = 0, 0.0, -np.inf
        self.last: dict = {}

    def due(self, elapsed_s: float) -> bool:
        return elapsed_s >= self.next_at

    @torch.no_grad()
    def run(self, policy, elapsed_s: float | None = None) -> dict:
        """Play one episode per env with the deterministic action of `policy`'s current parameters."""
        started = time.monotonic()
        self.network.load_state_dict({k: v.detach().cpu() for k, v in policy.state_dict().items()})
        n = self.cfg.episodes
        returns, lengths = np.zeros(n), np.zeros(n, np.int64)
        finished = np.zeros(n, bool)
        obs = self.envs.reset(seed=self.cfg.seed)
        state = self.network.initial_state(n) if self.network.lstm_size else None  # r2d2: carried through each episode
        for _ in range(self.cfg.max_steps):
            out = self.network.act(obs_to_tensors(obs), state, deterministic=True)
            state = out.state if state is not None else None
            result = self.envs.step(out.action.numpy())
            running = ~finished & result.valid
            returns += np.where(running, result.reward, 0.0)
            lengths += running
            finished |= (result.terminated | result.truncated) & ~finished
            if finished.all():
                break
            obs = result.obs
        self.count += 1
        self.time_s += time.monotonic() - started
        self.next_at = (elapsed_s if elapsed_s is not None else self.next_at) + self.interval_s
        done = returns[finished]
        mean = float(done.mean()) if len(done) else float("nan")
        self.best = max(self.best, mean) if len(done) else self.best
        self.last = {"eval/return_mean": mean, "eval/return_std": float(done.std()) if len(done) else float("nan"),
                     "eval/length_mean": float(lengths[finished].mean()) if len(done) else float("nan"),
                     "eval/episodes": int(finished.sum()), "eval/count": self.count, "eval/time_s": self.time_s,
                     "eval/return_best": float(self.best)}
        return self.last

    def state(self) -> dict:
        return {"count": self.count, "time_s": self.time_s, "best": float(self.best), "next_at": self.next_at,
                "last": dict(self.last)}

    def load_state(self, state: dict) -> None:
        self.count, self.time_s = int(state["count"]), float(state["time_s"])
        self.best, self.next_at = float(state["best"]), float(state["next_at"])
        self.last = dict(state["last"])

    def close(self) -> None:
        self.envs.close()

