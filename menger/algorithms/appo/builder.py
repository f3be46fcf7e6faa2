"""APPO's learner: V-trace targets, PPO's clipped surrogate, `vtrace.epochs` passes."""
from menger.algorithms.builders import learner_kwargs
from menger.learners.learner import VTraceLearner


def make_learner(config, policy, device) -> VTraceLearner:
    return VTraceLearner(policy, config.vtrace, appo=True, **learner_kwargs(config, device))
