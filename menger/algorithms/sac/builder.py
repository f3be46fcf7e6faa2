"""SAC's learner, and its actors' uniformly random first steps."""
from menger.learners.offpolicy import SACLearner


def make_learner(config, policy, device) -> SACLearner:
    return SACLearner(policy, config.sac, device=device, seed=config.runtime.seed)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore) -> dict:
    """Only a run's first incarnation explores at random: a restarted or resumed actor acts on what was learned."""
    if incarnation == 0 and restore is None:
        policy.random_steps = config.sac.random_steps
    return {}
