"""R2D2's learner, and its actors: Ape-X's epsilons, the recurrent state stored at every sequence's start."""
from menger.algorithms.builders import explore_like_apex
from menger.learners.offpolicy import R2D2Learner


def make_learner(config, policy, device) -> R2D2Learner:
    return R2D2Learner(policy, config.r2d2, device=device, seed=config.runtime.seed)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore) -> dict:
    return {**explore_like_apex(config, policy, actor_id), "sequence_period": config.r2d2.period}
