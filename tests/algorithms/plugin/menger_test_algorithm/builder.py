"""vpg's learner: one policy-gradient step per batch of unrolls."""
from __future__ import annotations

import torch

from menger.algorithms.builders import learner_kwargs
from menger.learners.learner import Learner
from menger.losses import gae


class VPGLearner(Learner):
    def update(self, batch: dict, frames: int) -> dict[str, float]:
        cfg = self.cfg
        batch = {key: value.to(self.device) for key, value in batch.items()}
        lr = self._set_lr(frames)
        ev = self.policy.evaluate(batch["obs"].float(), batch["actions"], batch["core_state"], batch["dones"])
        values = ev.values.float()
        with torch.no_grad():
            advantages, returns = gae(batch["rewards"], values[:-1], values[-1], cfg.gamma * (1 - batch["dones"]),
                                      1.0)
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = -(ev.logp * advantages).mean()
        value_loss = 0.5 * (returns - values[:-1]).pow(2).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * ev.entropy.mean()
        grad_norm = self._step(loss, cfg.max_grad_norm)
        self.updates += 1
        return {"vpg_loss": float(loss), "value_loss": float(value_loss), "grad_norm": float(grad_norm), "lr": lr}


def make_learner(config, policy, device) -> VPGLearner:
    return VPGLearner(policy, config.vpg, **learner_kwargs(config, device))
