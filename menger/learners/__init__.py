"""Learners: pure losses plus a short optimizer step, one class per family of algorithms."""
import torch
from torch import nn

from menger.learners.a3c import A2CLearner, GradientLearner
from menger.learners.learner import Learner, PPOLearner, VTraceLearner
from menger.learners.offpolicy import DQNLearner, R2D2Learner, SACLearner

__all__ = ["A2CLearner", "DQNLearner", "GradientLearner", "Learner", "PPOLearner", "R2D2Learner", "SACLearner", "VTraceLearner", "make_learner"]


def make_learner(config, policy: nn.Module, device: torch.device):
    """The learner of `config.algo` for `policy`, from the algorithm's builder (`menger.registry`)."""
    from menger.registry import make_learner as build

    return build(config, policy, device)
