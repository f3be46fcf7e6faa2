"""vpg's registry entry: its section, the policy network Menger builds for ppo, sync coordination."""
from __future__ import annotations

from dataclasses import dataclass

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import policy_network


@dataclass(frozen=True)
class VPGConfig:
    lr: float = field(3e-3, min=0.0, doc="Adam learning rate")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    value_coef: float = field(0.5, min=0.0, doc="baseline loss weight")
    entropy_coef: float = field(0.0, min=0.0, doc="entropy bonus weight")
    max_grad_norm: float = field(0.5, min=0.0, doc="gradient norm clip")
    adam_eps: float = field(1e-5, min=0.0, doc="Adam epsilon")
    lr_schedule: str = field("constant", doc="constant (the learner's schedule reads it)")


ALGORITHM = Algorithm(name="vpg", summary="vpg: REINFORCE with a learned baseline", sections={"vpg": VPGConfig},
                      settings="vpg", network=policy_network, coordination="sync",
                      gamma=lambda config: config.vpg.gamma, presets=("cartpole-vpg",))
