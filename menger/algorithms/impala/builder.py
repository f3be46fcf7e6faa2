"""IMPALA's learner: one V-trace step per batch."""
from menger.algorithms.builders import learner_kwargs
from menger.learners.learner import VTraceLearner


def make_learner(config, policy, device) -> VTraceLearner:
    return VTraceLearner(policy, config.vtrace, appo=False, **learner_kwargs(config, device))
