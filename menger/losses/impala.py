"""Learner losses on V-trace targets: IMPALA's actor-critic loss and APPO's clipped variant."""

from __future__ import annotations

import torch
from torch import Tensor

from menger.losses.masking import keep_masked, masked_mean
from menger.losses.ppo import ppo_loss
from menger.losses.vtrace import VTraceReturns


def _check_like_targets(vtrace_returns: VTraceReturns, **tensors: Tensor | None) -> None:
    expected = vtrace_returns.vs.shape
    for name, tensor in tensors.items():
        if tensor is not None and tensor.shape != expected:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but the V-trace targets have shape {tuple(expected)}; "
                f"compute the loss on the same [T, B] unroll the targets came from."
            )


def impala_loss(
    target_logp: Tensor,
    values: Tensor,
    entropy: Tensor,
    vtrace_returns: VTraceReturns,
    mask: Tensor | None = None,
    *,
    value_coef: float = 0.5,
    entropy_coef: float = 0.01,
) -> tuple[Tensor, dict[str, Tensor]]:
    """IMPALA: -pg_advantages * logp, value loss 0.5*(vs - V)^2 summed the same way, minus entropy bonus
    (means over mask).

    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy (Espeholt et al. 2018, section 4.2).
    The V-trace targets are constants: gradients flow into target_logp, values and entropy only.
    Stats (detached scalars): policy_loss, value_loss, entropy.
    """
    _check_like_targets(vtrace_returns, target_logp=target_logp, values=values, entropy=entropy, mask=mask)
    target_logp, values, entropy = (keep_masked(x, mask) for x in (target_logp, values, entropy))
    pg_advantages = keep_masked(vtrace_returns.pg_advantages.detach(), mask)
    vs = keep_masked(vtrace_returns.vs.detach(), mask)

    policy_loss = masked_mean(-pg_advantages * target_logp, mask)
    value_loss = masked_mean(0.5 * (vs - values) ** 2, mask)
    mean_entropy = masked_mean(entropy, mask)
    loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy
    stats = {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(), "entropy": mean_entropy.detach()}
    return loss, stats


def unweighted_advantages(vtrace_returns: VTraceReturns) -> Tensor:
    """pg_advantages / rhos, i.e. r_s + gamma_s v_{s+1} - V(x_s), for losses that apply their own ratio.

    Where rho underflowed to 0 (a target probability ~e^-100 of the behaviour one) the advantage is
    unrecoverable and is taken as 0, which is what that sample contributed to pg_advantages anyway.
    """
    rhos = vtrace_returns.rhos.detach()
    usable = rhos > 0
    safe_rhos = torch.where(usable, rhos, torch.ones_like(rhos))
    return torch.where(usable, vtrace_returns.pg_advantages.detach() / safe_rhos, torch.zeros_like(rhos))


def appo_loss(
    target_logp: Tensor,
    behaviour_logp: Tensor,
    values: Tensor,
    entropy: Tensor,
    vtrace_returns: VTraceReturns,
    mask: Tensor | None = None,
    *,
    clip: float = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 0.01,
    normalize_advantages: bool = True,
) -> tuple[Tensor, dict[str, Tensor]]:
    """APPO: the PPO clipped surrogate on V-trace advantages (pg_advantages / rhos as the advantage,
    ratio = exp(target - behaviour)), value loss towards vs.

    The V-trace rho is divided out because PPO's ratio already corrects for the behaviour policy; keeping
    both would weight each sample twice. Stats are those of ppo_loss.
    """
    _check_like_targets(
        vtrace_returns,
        target_logp=target_logp,
        behaviour_logp=behaviour_logp,
        values=values,
        entropy=entropy,
        mask=mask,
    )
    return ppo_loss(
        target_logp,
        behaviour_logp,
        unweighted_advantages(vtrace_returns),
        values,
        None,
        vtrace_returns.vs,
        entropy,
        mask,
        clip=clip,
        value_coef=value_coef,
        entropy_coef=entropy_coef,
        value_clip=None,
        normalize_advantages=normalize_advantages,
    )
