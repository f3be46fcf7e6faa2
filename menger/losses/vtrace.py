"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA", section 4)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from menger.losses._unroll import check_fraction, check_unroll, discounted_backward_sum, next_values


class VTraceReturns(NamedTuple):
    """What a V-trace learner needs, all [T, B] and detached.

    vs: the value targets v_s. pg_advantages: rhos * (r_s + gamma_s v_{s+1} - V(x_s)). rhos: the clipped
    importance weights min(clip_pg_rho, pi/mu) that pg_advantages carry, so pg_advantages / rhos is the plain
    advantage (APPO applies its own ratio instead).
    """

    vs: Tensor
    pg_advantages: Tensor
    rhos: Tensor


def _check_clip(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}={value} must be > 0 (1.0 is the paper's choice; float('inf') disables clipping).")


@torch.no_grad()
def vtrace(
    behaviour_logp: Tensor,
    target_logp: Tensor,
    rewards: Tensor,
    values: Tensor,
    bootstrap_value: Tensor,
    discounts: Tensor,
    *,
    clip_rho: float = 1.0,
    clip_pg_rho: float = 1.0,
    clip_c: float = 1.0,
    lam: float = 1.0,
) -> VTraceReturns:
    """V-trace targets (Espeholt et al. 2018, eq. 1 and the policy-gradient advantage
    rho_t (r_t + gamma v_{t+1} - V(x_t))).

    With ratio_t = pi(a_t|x_t) / mu(a_t|x_t) = exp(target_logp - behaviour_logp):
    rho_t = min(clip_rho, ratio_t), c_t = lam * min(clip_c, ratio_t) (the lambda variant of section 4.2),
    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)) and v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})).
    Clipping rho sets which policy the values converge to; clipping c bounds the variance of the trace.
    gamma_t is discounts_t = gamma * (1 - done_t), so nothing is carried across an episode end.
    """
    check_unroll(
        bootstrap_value,
        behaviour_logp=behaviour_logp,
        target_logp=target_logp,
        rewards=rewards,
        values=values,
        discounts=discounts,
    )
    for name, clip in (("clip_rho", clip_rho), ("clip_pg_rho", clip_pg_rho), ("clip_c", clip_c)):
        _check_clip(name, clip)
    check_fraction("lam", lam)

    ratios = torch.exp(target_logp - behaviour_logp)
    rhos = ratios.clamp(max=clip_rho)
    cs = lam * ratios.clamp(max=clip_c)
    following_values = next_values(values, bootstrap_value)

    deltas = rhos * (rewards + discounts * following_values - values)
    vs = values + discounted_backward_sum(deltas, discounts * cs)

    following_vs = next_values(vs, bootstrap_value)
    pg_rhos = ratios.clamp(max=clip_pg_rho)
    pg_advantages = pg_rhos * (rewards + discounts * following_vs - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages, rhos=pg_rhos)
