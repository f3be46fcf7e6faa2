"""Menger's algorithm maths as pure torch functions, each checked against a slow NumPy reference (tests/losses).

All per-step tensors are time-major [T, B]. discounts[t] = gamma * (1 - done[t]), where done[t] says the
episode ended at step t. mask [T, B] is 1 for a real transition and 0 for one to ignore in every mean.
Replay losses (dqn, sac) take rows of sampled items instead: [B] per item, [B, A] action values, [B, n] for an
n-step window; an item's discounts is the product of its window's per-step discounts.
Return estimators (gae, vtrace) compute targets without gradient; losses return (loss, detached stats).
"""

from menger.losses.a3c import a3c_loss
from menger.losses.dqn import (
    NStepItems,
    double_q_targets,
    dqn_loss,
    dueling,
    n_step_items,
    n_step_targets,
    q_learning_targets,
)
from menger.losses.gae import gae
from menger.losses.impala import appo_loss, impala_loss
from menger.losses.masking import masked_mean
from menger.losses.ppo import ppo_loss
from menger.losses.r2d2 import r2d2_loss, r2d2_targets, sequence_priorities, sequence_targets
from menger.losses.sac import (
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_targets,
    sac_temperature_loss,
    squash,
    squashed_gaussian_logp,
)
from menger.losses.stats import explained_variance
from menger.losses.value_rescaling import inverse_value_rescale, value_rescale
from menger.losses.vtrace import VTraceReturns, vtrace

__all__ = [
    "NStepItems", "VTraceReturns", "a3c_loss", "appo_loss", "double_q_targets", "dqn_loss", "dueling", "explained_variance",
    "gae", "impala_loss", "inverse_value_rescale", "masked_mean", "n_step_items", "n_step_targets", "ppo_loss",
    "q_learning_targets", "r2d2_loss", "r2d2_targets", "sequence_priorities", "sequence_targets",
    "sac_actor_loss", "sac_critic_loss", "sac_critic_targets", "sac_temperature_loss", "squash",
    "squashed_gaussian_logp", "value_rescale", "vtrace",
]
