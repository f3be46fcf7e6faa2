"""Learners: pure losses plus a short optimizer step, one class per family of algorithms."""
import torch
from torch import nn

from menger.learners.a3c import A2CLearner, GradientLearner
from menger.learners.learner import Learner, PPOLearner, VTraceLearner
from menger.learners.offpolicy import DQNLearner, R2D2Learner, SACLearner

__all__ = ["A2CLearner", "DQNLearner", "GradientLearner", "Learner", "PPOLearner", "R2D2Learner", "SACLearner", "VTraceLearner", "make_learner"]

OFF_POLICY_LEARNERS = {"apex": DQNLearner, "r2d2": R2D2Learner, "sac": SACLearner}


def make_learner(config, policy: nn.Module, device: torch.device):
    """The learner of `config.algo` for `policy` (what actors act with; a learner adds what only it needs)."""
    if config.algo == "gorila":
        from menger.learners.gorila import GorilaLearner

        return GorilaLearner(policy, config.gorila, device=device, seed=config.runtime.seed,
                             shards=config.runtime.parameter_server.shards, launcher=config.runtime.launcher)
    if config.algo in OFF_POLICY_LEARNERS:
        return OFF_POLICY_LEARNERS[config.algo](policy, getattr(config, config.algo), device=device,
                                                seed=config.runtime.seed)
    common = dict(device=device, total_frames=config.stop.env_frames, amp=config.runtime.learner.amp,
                  seed=config.runtime.seed)
    if config.algo == "ppo":
        return PPOLearner(policy, config.ppo, **common)
    if config.algo == "a3c" and config.learner_mode == "parameter_server":
        return GradientLearner(policy, config.a3c, shards=config.runtime.parameter_server.shards,
                               launcher=config.runtime.launcher, **common)
    if config.algo == "a3c":
        return A2CLearner(policy, config.a3c, **common)
    return VTraceLearner(policy, config.vtrace, appo=config.algo == "appo", **common)
