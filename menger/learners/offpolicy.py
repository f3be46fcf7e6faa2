"""Learners that train from replay: Ape-X DQN, R2D2 and SAC. An Ape-X or SAC batch is rows of replay items, not
unrolls::

    obs [N, ...]  actions [N, ...]  rewards [N] (n-step sums)  discounts [N] (products)  next_obs [N, ...]
    weights [N]   importance weights of the prioritized sample (ones for uniform sampling)

An R2D2 batch is N sequences of W steps, time-major (`menger.coordinator.sequences`)::

    obs [W+1, N, ...]  actions, rewards, discounts, valid, restarts [W, N]  state [2, N, H]  burn_in [N]  weights [N]

`update(batch, frames)` returns scalar stats and, under "priorities", the new priorities of the batch's items
(a NumPy array) for the replay coordinator to write back. Everything that changes is in `state_dict()`, so a
resumed run continues exactly.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from menger.learners.learner import Adam, _obs_float, _to_device, clip_gradients
from menger.losses import (double_q_targets, dqn_loss, q_learning_targets, r2d2_loss, r2d2_targets, sac_actor_loss,
                           sac_critic_loss, sac_temperature_loss)
from menger.losses.value_rescaling import DEFAULT_EPS


def _apply(optimizer: Adam, params: list[torch.Tensor], loss: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    optimizer.zero_grad()
    loss.backward()
    norm = clip_gradients(params, max_grad_norm)
    optimizer.step()
    return norm


class DQNLearner:
    """Ape-X DQN (Horgan et al. 2018): double Q targets from a target network copied every
    `target_update_interval` updates, a Huber TD loss weighted by importance weights, |TD| + eps priorities."""

    def __init__(self, policy: nn.Module, cfg, *, device: torch.device, seed: int):
        self.policy, self.cfg, self.device = policy.to(device), cfg, device
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = Adam(self.params, lr=cfg.lr, eps=cfg.adam_eps)
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0

    def update(self, batch: dict, frames: int) -> dict:
        cfg = self.cfg
        loss, priorities, stats = self.loss(_to_device(batch, self.device))
        grad_norm = _apply(self.optimizer, self.params, loss, cfg.max_grad_norm)
        self.updates += 1
        if self.updates % cfg.target_update_interval == 0:
            self.target.load_state_dict(self.policy.state_dict())
        out = {k: float(v) for k, v in stats.items()}
        out.update(loss=float(loss.detach()), grad_norm=float(grad_norm), priorities=priorities.cpu().numpy())
        return out

    def loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """(loss, the items' new priorities, stats) of a batch on the learner's device."""
        cfg = self.cfg
        obs, next_obs = _obs_float(batch["obs"]), _obs_float(batch["next_obs"])
        rewards = batch["rewards"]
        if cfg.reward_clip is not None:  # of the n-step sum: the items carry no single rewards
            rewards = rewards.clamp(-cfg.reward_clip, cfg.reward_clip)
        with torch.no_grad():
            q_next_target = self.target(next_obs)
            if cfg.double_q:
                targets = double_q_targets(self.policy(next_obs), q_next_target, rewards, batch["discounts"])
            else:
                targets = q_learning_targets(q_next_target, rewards, batch["discounts"])
        return dqn_loss(self.policy(obs), batch["actions"], targets, batch["weights"], loss=cfg.loss)

    def state_dict(self) -> dict:
        return {"model": self.policy.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state(),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])


class R2D2Learner(DQNLearner):
    """R2D2 (Kapturowski et al. 2019): Ape-X's learner on stored sequences. Both networks start from the state
    the actor stored and unroll the whole sequence; the first `burn_in` steps of each only refresh that state
    (their values are out of the loss and the state is detached after them, so no gradient reaches them). The
    n-step double-Q targets are on rescaled values, and a sequence's new priority mixes its max and mean |TD|.
    Everything else (the step, target copies, optimizer, state) is `DQNLearner`'s."""

    def loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """(loss, the sequences' new priorities, stats) of a batch on the learner's device."""
        cfg = self.cfg
        obs, valid, burn_in = _obs_float(batch["obs"]), batch["valid"], batch["burn_in"]
        restarts = torch.cat([batch["restarts"], torch.zeros_like(valid[:1])])  # the last obs has no step after it
        q, _ = self.policy.unroll(obs, batch["state"], restarts, detach_at=burn_in)
        with torch.no_grad():
            q_target, _ = self.target.unroll(obs, batch["state"], restarts)
            rewards = batch["rewards"]
            if cfg.reward_clip is not None:
                rewards = rewards.clamp(-cfg.reward_clip, cfg.reward_clip)
            targets, mask = r2d2_targets(q.detach(), q_target, rewards, batch["discounts"], valid, cfg.n_step,
                                         DEFAULT_EPS if cfg.value_rescaling else None)
            steps = torch.arange(mask.shape[0], device=mask.device)[:, None]
            mask = mask * (steps >= burn_in[None, :])  # burned-in steps only refresh the state
        return r2d2_loss(q[:-1], batch["actions"], targets, mask, batch["weights"], loss=cfg.loss,
                         eta=cfg.priority_eta)


class SACLearner:
    """SAC (Haarnoja et al. 2018): twin critics and Polyak-averaged target critics, a reparameterised actor
    step through the critics, and the temperature learned towards `target_entropy` (-dim(action) by default)."""

    def __init__(self, policy: nn.Module, cfg, *, device: torch.device, seed: int):
        from menger.models.sac import TwinCritics

        self.policy, self.cfg, self.device = policy.to(device), cfg, device
        self.critics = TwinCritics(policy.obs_space, policy.action_space, hidden=tuple(cfg.critic_hidden)).to(device)
        self.target = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_params = [p for p in self.policy.parameters() if p.requires_grad]
        self.critic_params = list(self.critics.parameters())
        self.target_params = list(self.target.parameters())
        self.log_alpha = torch.tensor(float(np.log(max(cfg.initial_alpha, 1e-12))), device=device,
                                      requires_grad=True)
        dims = int(np.prod(policy.action_space.shape))
        self.target_entropy = float(cfg.target_entropy) if cfg.target_entropy is not None else -float(dims)
        self.actor_optimizer = Adam(self.actor_params, lr=cfg.actor_lr, eps=1e-8)
        self.critic_optimizer = Adam(self.critic_params, lr=cfg.critic_lr, eps=1e-8)
        self.alpha_optimizer = Adam([self.log_alpha], lr=cfg.alpha_lr, eps=1e-8)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.updates = 0

    def update(self, batch: dict, frames: int) -> dict:
        cfg, actor = self.cfg, self.policy
        batch = _to_device(batch, self.device)
        obs, next_obs, actions = batch["obs"].float(), batch["next_obs"].float(), batch["actions"]
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():  # the soft target: no graph through the actor's next actions
            next_u, next_mean, next_log_std = actor.sample(next_obs, self.generator)
            next_logp = actor.logp(next_u, next_mean, next_log_std)
            next_q1, next_q2 = self.target(next_obs, actor.squash(next_u))
        q1, q2 = self.critics(obs, actions)
        critic_loss, critic_stats = sac_critic_loss(q1, q2, batch["rewards"], batch["discounts"], next_q1, next_q2,
                                                    next_logp, alpha, batch["weights"])
        critic_norm = _apply(self.critic_optimizer, self.critic_params, critic_loss, cfg.max_grad_norm)

        u, mean, log_std = actor.sample(obs, self.generator)
        logp_pi = actor.logp(u, mean, log_std)
        self.critics.requires_grad_(False)  # the actor's step moves the actor only
        q1_pi, q2_pi = self.critics(obs, actor.squash(u))
        self.critics.requires_grad_(True)
        actor_loss, actor_stats = sac_actor_loss(q1_pi, q2_pi, logp_pi, alpha)
        _apply(self.actor_optimizer, self.actor_params, actor_loss, cfg.max_grad_norm)
        stats = {**critic_stats, **actor_stats}
        if cfg.learn_alpha:
            temperature_loss, temperature_stats = sac_temperature_loss(self.log_alpha, logp_pi.detach(),
                                                                       self.target_entropy)
            _apply(self.alpha_optimizer, [self.log_alpha], temperature_loss, 0.0)
            stats.update(temperature_stats)
        with torch.no_grad():
            torch._foreach_lerp_(self.target_params, self.critic_params, cfg.tau)
        self.updates += 1
        out = {k: float(v) for k, v in stats.items()}
        out.update(loss=float(critic_loss.detach() + actor_loss.detach()), alpha=float(alpha),
                   critic_grad_norm=float(critic_norm))
        return out

    def state_dict(self) -> dict:
        return {"model": self.policy.state_dict(), "critics": self.critics.state_dict(),
                "target": self.target.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(),
                "alpha_optimizer": self.alpha_optimizer.state_dict(),
                "generator": self.generator.get_state(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["model"])
        self.critics.load_state_dict(state["critics"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
