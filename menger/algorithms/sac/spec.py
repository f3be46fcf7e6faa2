"""Soft actor-critic (Haarnoja et al. 2018) for Box actions, from replay: twin critics, target critics, a
learned temperature."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import squashed_gaussian_actor


@dataclass(frozen=True)
class SACConfig:
    """Soft actor-critic (Haarnoja et al. 2018) for Box actions: twin critics, target critics, learned alpha."""

    actor_lr: float = field(3e-4, min=0.0, doc="actor learning rate")
    critic_lr: float = field(3e-4, min=0.0, doc="critics' learning rate")
    alpha_lr: float = field(3e-4, min=0.0, doc="temperature learning rate")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    n_step: int = field(1, min=1, doc="n of the n-step returns")
    tau: float = field(0.005, min=0.0, max=1.0, doc="Polyak rate of the target critics, per update")
    initial_alpha: float = field(1.0, min=0.0, doc="the temperature at the start")
    learn_alpha: bool = field(True, doc="learn the temperature towards target_entropy")
    target_entropy: Optional[float] = field(None, doc="the entropy alpha aims for; None = -dim(action)")
    critic_hidden: tuple[int, ...] = field((256, 256), doc="critic MLP layer sizes (the actor uses model.hidden)")
    random_steps: int = field(0, min=0, doc="each actor acts uniformly at random for its first this many steps "
                              "per env (exploration before the first update)")
    max_grad_norm: float = field(0.0, min=0.0, doc="gradient norm clip (0 = none)")

ALGORITHM = Algorithm(
    name="sac", summary="SAC: soft actor-critic for Box actions, from replay", sections={"sac": SACConfig},
    settings="sac", network=squashed_gaussian_actor, learns_from="replay", actions="box", evaluation="greedy",
    gamma=lambda config: config.sac.gamma, central_inference=False, multi_agent=False,
    presets=("sac", "pendulum-sac"),
)
