"""A3C's learner (a sharded parameter server applying pushed gradients, or A2C's) and its actor-learners."""
from menger.algorithms.builders import learner_kwargs
from menger.learners.a3c import A2CLearner, A3CGradient, GradientLearner


def make_learner(config, policy, device):
    if config.learner_mode == "parameter_server":
        return GradientLearner(policy, config.a3c, shards=config.runtime.parameter_server.shards,
                               launcher=config.runtime.launcher, **learner_kwargs(config, device))
    return A2CLearner(policy, config.a3c, **learner_kwargs(config, device))


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore) -> dict:
    """With a parameter server the actor is an actor-learner: it writes the gradient of each unroll's loss."""
    if config.learner_mode != "parameter_server":
        return {}
    return {"gradient": A3CGradient(policy, config.a3c)}
