"""GORILA's learner (the parameter server its learner processes push to) and its actors' epsilons."""
from menger.algorithms.builders import explore_like_apex
from menger.learners.gorila import GorilaLearner


def make_learner(config, policy, device) -> GorilaLearner:
    return GorilaLearner(policy, config.gorila, device=device, seed=config.runtime.seed,
                         shards=config.runtime.parameter_server.shards, launcher=config.runtime.launcher)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore) -> dict:
    return explore_like_apex(config, policy, actor_id)
