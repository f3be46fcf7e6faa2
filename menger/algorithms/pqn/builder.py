"""PQN's learner: epsilon decays over the frames its settings name."""
from menger.algorithms.builders import learner_kwargs
from menger.algorithms.pqn.learning import PQNLearner


def make_learner(config, policy, device) -> PQNLearner:
    return PQNLearner(policy, config.pqn, epsilon_frames=config.pqn.decay_frames(config.stop.env_frames),
                      **learner_kwargs(config, device))
