"""PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q-learning from vectorised envs
with no replay and no target network. A LayerNorm Q network acts epsilon-greedily; each batch of unrolls is turned
into Q(lambda) targets by the network itself, then regressed in `epochs` passes of `minibatches`, and dropped.

It rides the runtime as PPO does (sync coordination: every unroll of an update acted with the newest parameters),
and its actors explore with the epsilon the learner writes into the network's parameters, so the schedule
reaches every actor, the evaluator and a resumed run with the parameters themselves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from menger.algorithms import Algorithm
from menger.config import field


@dataclass(frozen=True)
class PQNConfig:
    """PQN's settings; the defaults are CleanRL's `pqn.py` (CartPole), itself purejaxql's."""

    lr: float = field(2.5e-4, min=0.0, doc="Adam learning rate")
    lr_schedule: Literal["constant", "linear"] = field("linear", doc="linear: anneal to 0 at stop.env_frames")
    adam_eps: float = field(1e-5, min=0.0, doc="Adam epsilon")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    lam: float = field(0.65, min=0.0, max=1.0, doc="lambda of the Q(lambda) targets over each unroll (0: one-step "
                       "Q-learning targets, 1: the unroll's discounted return bootstrapped at its end)")
    epochs: int = field(4, min=1, doc="passes over each batch")
    minibatches: int = field(4, min=1, doc="minibatches per pass (of the batch's steps, shuffled)")
    max_grad_norm: float = field(10.0, min=0.0, doc="gradient norm clip (0 = none)")
    loss: Literal["mse", "huber"] = field("mse", doc="regression loss of Q(s, a) to its target")
    epsilon_start: float = field(1.0, min=0.0, max=1.0, doc="exploration at the start: the chance of a uniformly "
                                 "random (legal) action")
    epsilon_end: float = field(0.05, min=0.0, max=1.0, doc="exploration once the decay is over")
    exploration_fraction: float = field(0.5, min=0.0, max=1.0, doc="share of stop.env_frames over which epsilon "
                                        "falls linearly from epsilon_start to epsilon_end")
    exploration_frames: Optional[int] = field(None, min=0, doc="frames of the decay, instead of "
                                              "exploration_fraction (for a run stopped by wall clock or target "
                                              "return only)")

    def decay_frames(self, env_frames: int | None) -> int | None:
        """Frames over which epsilon decays; None when neither key gives a number."""
        if self.exploration_frames is not None:
            return self.exploration_frames
        return None if env_frames is None else int(self.exploration_fraction * env_frames)


def pqn_network(obs_space, action_space, model, normalize=None):
    """Linear, LayerNorm, ReLU per `model.hidden` size (model.activation is not read: PQN's layers are these);
    imported when first built, so reading an experiment never loads torch."""
    from menger.algorithms.pqn.network import PQNNetwork

    return PQNNetwork(obs_space, action_space, hidden=tuple(model.hidden), encoder=model.encoder,
                      board_channels=tuple(model.board_channels))


def _problems(config) -> list[str]:
    problems = []
    if config.pqn.decay_frames(config.stop.env_frames) is None:
        problems.append("pqn: epsilon decays over pqn.exploration_fraction of stop.env_frames, which is unset; set "
                        "stop.env_frames, or pqn.exploration_frames to the frames of the decay")
    return problems


ALGORITHM = Algorithm(
    name="pqn", summary="PQN: Q(lambda) from vectorised envs, no replay, no target network, LayerNorm",
    sections={"pqn": PQNConfig}, settings="pqn", network=pqn_network, coordination="sync", actions="q",
    evaluation="greedy", gamma=lambda config: config.pqn.gamma, problems=_problems, presets=("cartpole-pqn",),
)
