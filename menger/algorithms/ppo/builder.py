"""PPO's learner."""
from menger.algorithms.builders import learner_kwargs
from menger.learners.learner import PPOLearner


def make_learner(config, policy, device) -> PPOLearner:
    return PPOLearner(policy, config.ppo, **learner_kwargs(config, device))
