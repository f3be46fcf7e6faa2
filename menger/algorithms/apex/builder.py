"""Ape-X's learner and its actors' epsilons."""
from menger.algorithms.builders import explore_like_apex
from menger.learners.offpolicy import DQNLearner


def make_learner(config, policy, device) -> DQNLearner:
    return DQNLearner(policy, config.apex, device=device, seed=config.runtime.seed)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore) -> dict:
    return explore_like_apex(config, policy, actor_id)
