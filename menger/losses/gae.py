"""Generalised advantage estimation (Schulman et al. 2016, "High-dimensional continuous control using GAE")."""

from __future__ import annotations

import torch
from torch import Tensor

from menger.losses._unroll import check_fraction, check_unroll, discounted_backward_sum, next_values


@torch.no_grad()
def gae(
    rewards: Tensor, values: Tensor, bootstrap_value: Tensor, discounts: Tensor, lam: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016). values [T,B] are V(s_t), bootstrap_value [B] is V(s_T).
    Returns (advantages [T,B], returns [T,B] = advantages + values).

    delta_t = r_t + discounts_t V(s_{t+1}) - V(s_t) and A_t = delta_t + discounts_t * lam * A_{t+1}, where
    discounts_t = gamma * (1 - done_t): an episode that ends at step t neither bootstraps from nor accumulates
    advantages of step t+1, which belongs to the next episode. The results are targets, so no gradient flows.
    """
    check_unroll(bootstrap_value, rewards=rewards, values=values, discounts=discounts)
    check_fraction("lam", lam)
    deltas = rewards + discounts * next_values(values, bootstrap_value) - values
    advantages = discounted_backward_sum(deltas, discounts * lam)
    return advantages, advantages + values
