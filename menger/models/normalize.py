"""Running observation and reward normalisation (`env.normalize`), merged across every actor.

Who holds what:

* each actor computes the moments of what its unroll saw (`Moments.of`: the observations, and the discounted
  return of each env, `ret = gamma * ret + r`, reset where an episode ends) and sends them in its `UnrollMeta`;
* the trainer keeps the authoritative statistics (`RunningNormalization`, float64) and merges the moments of
  every accepted unroll into them with the parallel formula of Chan et al. (1979), in a fixed order (actor,
  incarnation, sequence), so a sync run is a function of its seeds whatever order the unrolls arrived in;
* the observation statistics reach the actors as part of the policy: `ObsNormalizer` is the network's first
  layer, and its mean and 1/std are parameters that do not train. Every path that carries parameters (shared
  memory, Ray's object store, central inference, checkpoints, `load_policy`, `menger export`) carries them
  with the version, so an unroll acted with version v's statistics is scored with them too;
* rewards are scaled by the learner only, `r / sqrt(var(ret) + eps)` clipped to +-clip (SB3's VecNormalize),
  so reported episode returns stay raw. Where the actors compute the loss (A3C's actor-learners with a parameter
  server), the scale travels with the parameters as the observation statistics do (`RewardScale`, a parameter
  that never trains): an actor-learner scores its unroll with the statistics of the version it acted with.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class Moments:
    """count, mean and M2 (the sum of squared deviations) of samples along a leading axis, in float64."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @staticmethod
    def of(samples: np.ndarray) -> "Moments":
        """The moments of `samples` [N, *shape]."""
        x = np.asarray(samples, np.float64)
        if x.shape[0] == 0:
            return Moments.empty(x.shape[1:])
        mean = x.mean(axis=0)
        return Moments(float(x.shape[0]), mean, ((x - mean) ** 2).sum(axis=0))

    @staticmethod
    def empty(shape: tuple = ()) -> "Moments":
        return Moments(0.0, np.zeros(shape, np.float64), np.zeros(shape, np.float64))

    def merge(self, other: "Moments") -> "Moments":
        """The moments of both sets of samples together (Chan, Golub and LeVeque's pairwise update)."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        count = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / count)
        m2 = self.m2 + other.m2 + delta ** 2 * (self.count * other.count / count)
        return Moments(count, mean, m2)

    @property
    def var(self) -> np.ndarray:
        """The population variance (1 where nothing was seen yet, as VecNormalize starts)."""
        return self.m2 / self.count if self.count > 0 else np.ones_like(self.mean)

    def state(self) -> dict:
        return {"count": self.count, "mean": self.mean.copy(), "m2": self.m2.copy()}

    @staticmethod
    def from_state(state: dict) -> "Moments":
        return Moments(float(state["count"]), np.asarray(state["mean"], np.float64).copy(),
                       np.asarray(state["m2"], np.float64).copy())


class ObsNormalizer(nn.Module):
    """`clip((obs - mean) / sqrt(var + eps), -clip, clip)`; mean and 1/std are parameters that never train, so
    they travel wherever the policy's parameters do. It starts as the identity (mean 0, std 1)."""

    def __init__(self, shape: tuple[int, ...], clip: float):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(shape), requires_grad=False)
        self.inv_std = nn.Parameter(torch.ones(shape), requires_grad=False)
        self.clip = float(clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.mean) * self.inv_std).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def set(self, moments: Moments, eps: float) -> None:
        self.mean.copy_(torch.as_tensor(moments.mean, dtype=torch.float32))
        self.inv_std.copy_(torch.as_tensor(1.0 / np.sqrt(moments.var + eps), dtype=torch.float32))


class RewardScale(nn.Module):
    """`clip(r / sqrt(var(ret) + eps), -clip, clip)` for a network whose actors compute its loss: 1/std is a
    parameter that never trains, so it reaches each actor-learner with the version. It starts as the identity."""

    def __init__(self, clip: float):
        super().__init__()
        self.inv_std = nn.Parameter(torch.ones(()), requires_grad=False)
        self.clip = float(clip)

    def forward(self, rewards: torch.Tensor) -> torch.Tensor:
        return (rewards * self.inv_std).clamp(-self.clip, self.clip)

    @torch.no_grad()
    def set(self, moments: Moments, eps: float) -> None:
        self.inv_std.fill_(float(1.0 / np.sqrt(moments.var + eps)))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A checkpoint saved before the scale travelled with the parameters has none: the trainer's statistics
        (saved beside it) set it again before the next version is published."""
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        missing_keys[:] = [key for key in missing_keys if key != prefix + "inv_std"]


class RunningNormalization:
    """The authoritative statistics, in the trainer: `merge` a batch's unroll tags before the learner steps,
    `scale_rewards` the batch, `write_into` the policy before it is published."""

    def __init__(self, cfg, obs_shape: tuple[int, ...]):
        self.cfg = cfg  # menger.experiment.NormalizeConfig
        self.obs = Moments.empty(tuple(obs_shape))
        self.ret = Moments.empty()

    def merge(self, metas) -> None:
        """Merge the moments the unrolls' tags carry, in (actor, incarnation, sequence) order."""
        for meta in sorted(metas, key=lambda m: (m.actor_id, m.incarnation, m.sequence)):
            if self.cfg.obs and meta.obs_moments is not None:
                self.obs = self.obs.merge(meta.obs_moments)
            if self.cfg.reward and meta.return_moments is not None:
                self.ret = self.ret.merge(meta.return_moments)

    def return_std(self) -> float:
        return float(np.sqrt(self.ret.var + self.cfg.epsilon))

    def scale_rewards(self, rewards: torch.Tensor) -> torch.Tensor:
        if not self.cfg.reward:
            return rewards
        clip = self.cfg.clip_reward
        return (rewards / self.return_std()).clamp(-clip, clip)

    def write_into(self, policy: nn.Module) -> None:
        normalizer = getattr(policy, "obs_normalizer", None)
        if normalizer is not None:
            normalizer.set(self.obs, self.cfg.epsilon)
        reward_scale = getattr(policy, "reward_scale", None)
        if reward_scale is not None:
            reward_scale.set(self.ret, self.cfg.epsilon)

    def metrics(self) -> dict[str, float]:
        out = {}
        if self.cfg.obs:
            out["normalize/obs_count"] = self.obs.count
        if self.cfg.reward:
            out["normalize/return_count"] = self.ret.count
            out["normalize/return_std"] = self.return_std()
        return out

    def state(self) -> dict:
        return {"obs": self.obs.state(), "ret": self.ret.state()}

    def load_state(self, state: dict) -> None:
        self.obs, self.ret = Moments.from_state(state["obs"]), Moments.from_state(state["ret"])


class UnrollMoments:
    """An actor's side: the discounted return of each of its envs, and the moments of one unroll."""

    def __init__(self, cfg, gamma: float, num_envs: int):
        self.obs, self.reward, self.gamma = bool(cfg.obs), bool(cfg.reward), float(gamma)
        self.returns = np.zeros(num_envs, np.float64)

    def of_unroll(self, next_obs: np.ndarray, rewards: np.ndarray, ended: np.ndarray,
                  valid: np.ndarray) -> tuple[Moments | None, Moments | None]:
        """Moments of an unroll's T x B observations after each step and of the envs' discounted returns, over
        the valid rows only (a faulty step's row is no transition). Arrays are time-major [T, B, ...]."""
        mask = valid.astype(bool)
        obs = Moments.of(next_obs[mask]) if self.obs else None
        ret = None
        if self.reward:
            seen = []
            for t in range(rewards.shape[0]):
                self.returns = np.where(mask[t], self.returns * self.gamma + rewards[t], 0.0)
                seen.append(self.returns[mask[t]])
                self.returns[ended[t].astype(bool)] = 0.0
            ret = Moments.of(np.concatenate(seen)) if seen else Moments.empty()
        return obs, ret
