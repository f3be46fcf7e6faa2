"""Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors with their own epsilons feed a prioritized replay;
one learner steps dueling double DQN on n-step returns and sends new priorities back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import q_network


@dataclass(frozen=True)
class ApexConfig:
    """Ape-X DQN (Horgan et al. 2018): dueling double DQN with n-step returns, from prioritized replay."""

    lr: float = field(2.5e-4, min=0.0, doc="Adam learning rate")
    adam_eps: float = field(1.5e-4, min=0.0, doc="Adam epsilon")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    n_step: int = field(3, min=1, doc="n of the n-step returns (a window is cut short at an episode's end and at "
                        "the end of an unroll)")
    double_q: bool = field(True, doc="double DQN targets: the online network picks, the target network values")
    target_update_interval: int = field(2500, min=1, doc="updates between copies of the online network into "
                                        "the target network")
    loss: Literal["huber", "mse"] = field("huber", doc="TD loss")
    max_grad_norm: float = field(40.0, min=0.0, doc="gradient norm clip (0 = none)")
    epsilon_base: float = field(0.4, min=0.0, max=1.0, doc="actor i explores with epsilon_base^(1 + "
                                "epsilon_alpha * i / (N - 1)); actor 0 with epsilon_base")
    epsilon_alpha: float = field(7.0, min=0.0, doc="the spread of the actors' epsilons (Ape-X: 7)")
    epsilon_per: Literal["actor", "env"] = field("actor", doc="actor: every env of actor i explores with eps_i "
                                                 "(Ape-X's actors); env: each of the actors x envs_per_actor "
                                                 "envs is one of Ape-X's N, so all of them explore differently")
    epsilon_start: float = field(1.0, min=0.0, max=1.0, doc="every env's epsilon at the start of the run; it falls "
                                 "linearly to its Ape-X epsilon over epsilon_decay_frames (DQN's annealing, so a "
                                 "fleet of 1-4 actors explores before its epsilons settle)")
    epsilon_decay_frames: int = field(50_000, min=0, doc="env frames of the whole run over which every epsilon "
                                      "falls from epsilon_start to its Ape-X value (0: Ape-X's fixed epsilons "
                                      "from the start)")
    reward_clip: Optional[float] = field(None, doc="clip rewards to [-x, x] (1.0 for Atari)")

def replay_values(config) -> dict:
    """Actors write max_a Q beside each step, for the replay's initial priorities."""
    return {"values": True}


ALGORITHM = Algorithm(
    name="apex", summary="Ape-X DQN: dueling double DQN from prioritized replay", sections={"apex": ApexConfig},
    settings="apex", network=q_network, learns_from="replay", actions="q", evaluation="greedy",
    gamma=lambda config: config.apex.gamma, unroll_fields=replay_values, central_inference=False,
    multi_agent=False, presets=("apex", "cartpole-apex", "pong-apex"),
)
