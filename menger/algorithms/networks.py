"""The networks the built-in algorithms' specs name, each imported when it is first built.

A spec is read whenever an experiment is (`menger config`, `menger presets`, a config check before a run), so it
stays light: configs and checks only. Torch and the networks load when a run builds its first network.
"""
from __future__ import annotations


def policy_network(obs_space, action_space, model, normalize=None):
    """The policy-gradient family's network (ppo, impala, appo, a3c): `menger.models.build.policy_network`."""
    from menger.models.build import policy_network as build

    return build(obs_space, action_space, model, normalize)


def actor_learner_network(obs_space, action_space, model, normalize=None):
    """A3C's: the policy network, which with `env.normalize.reward` also carries the reward scale
    (`menger.models.normalize.RewardScale`), since its actor-learners compute the loss with the version they act
    with (a parameter server) as its learner does (allreduce)."""
    network = policy_network(obs_space, action_space, model, normalize)
    if normalize is not None and normalize.reward:
        from menger.models.normalize import RewardScale

        network.reward_scale = RewardScale(normalize.clip_reward)
    return network


def q_network(obs_space, action_space, model, normalize=None):
    """Ape-X's (and GORILA's) dueling Q network from the experiment's model section."""
    from menger.models.build import refuse_board_mirror
    from menger.models.qnet import QNetwork

    refuse_board_mirror(model, "apex")
    return QNetwork(obs_space, action_space, encoder=model.encoder, hidden=tuple(model.hidden),
                    activation=model.activation, dueling=model.dueling, board_channels=tuple(model.board_channels))


def recurrent_q_network(obs_space, action_space, model, normalize=None):
    """R2D2's Q network with an LSTM core of `model.lstm_size`."""
    from menger.models.build import refuse_board_mirror
    from menger.models.qnet import RecurrentQNetwork

    refuse_board_mirror(model, "r2d2")
    return RecurrentQNetwork(obs_space, action_space, lstm_size=model.lstm_size, encoder=model.encoder,
                             hidden=tuple(model.hidden), activation=model.activation, dueling=model.dueling,
                             board_channels=tuple(model.board_channels))


def squashed_gaussian_actor(obs_space, action_space, model, normalize=None):
    """What SAC's actors act with (its critics are the learner's own)."""
    from menger.models.build import refuse_board_mirror
    from menger.models.sac import SquashedGaussianActor

    refuse_board_mirror(model, "sac")
    return SquashedGaussianActor(obs_space, action_space, encoder=model.encoder, hidden=tuple(model.hidden),
                                 activation=model.activation)
