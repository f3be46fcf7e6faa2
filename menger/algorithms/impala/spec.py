"""IMPALA (Espeholt et al. 2018): actors never wait for the learner; V-trace corrects for their policy lag."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import policy_network


@dataclass(frozen=True)
class VTraceConfig:
    lr: float = field(6e-4, min=0.0, doc="learning rate")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    optimizer: Literal["adam", "rmsprop"] = field("adam", doc="optimizer")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    lam: float = field(1.0, min=0.0, max=1.0, doc="V-trace lambda")
    clip_rho: float = field(1.0, min=0.0, doc="rho-bar: importance weight clip of the value targets")
    clip_pg_rho: float = field(1.0, min=0.0, doc="importance weight clip of the policy-gradient advantages")
    clip_c: float = field(1.0, min=0.0, doc="c-bar: trace cutting")
    value_coef: float = field(0.5, min=0.0, doc="value loss weight")
    entropy_coef: float = field(0.01, min=0.0, doc="entropy bonus weight")
    max_grad_norm: float = field(40.0, min=0.0, doc="gradient norm clip (0 = none)")
    reward_clip: Optional[float] = field(None, doc="clip rewards to [-x, x] (1.0 for Atari)")
    clip: float = field(0.2, min=0.0, doc="APPO only: PPO ratio clip")
    epochs: int = field(1, min=1, doc="APPO only: passes over each batch")
    minibatches: int = field(1, min=1, doc="minibatches (split along envs) per pass")
    normalize_advantages: bool = field(False, doc="APPO only: normalise advantages")
    adam_eps: float = field(1e-5, min=0.0, doc="optimizer epsilon")

ALGORITHM = Algorithm(
    name="impala", summary="IMPALA: V-trace actor-critic, async", sections={"vtrace": VTraceConfig},
    settings="vtrace", network=policy_network, coordination="async", gamma=lambda config: config.vtrace.gamma,
    minibatches=lambda config: config.vtrace.minibatches, custom_network=True, independent_agents=True,
    recurrent=True, board_mirror=True, normalize=True, presets=("impala", "cartpole-impala"),
)
