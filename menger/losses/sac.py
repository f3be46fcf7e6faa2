"""Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep RL with a
Stochastic Actor"), with twin critics and the learned temperature of Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications" (section 5).

Tensors are rows of replay items, [B] per item (an action is [B, D]). A learner step, obs = items.obs::

    with torch.no_grad():
        next_u, next_mean, next_log_std = actor(items.next_obs)  # next_u = next_mean + std * noise
        next_logp = squashed_gaussian_logp(next_u, next_mean, next_log_std, low, high)
        next_q1, next_q2 = target_critics(items.next_obs, squash(next_u, low, high))
    critic_loss, _ = sac_critic_loss(q1(obs, items.actions), q2(obs, items.actions), items.rewards,
                                     items.discounts, next_q1, next_q2, next_logp, log_alpha.exp())
    u, mean, log_std = actor(obs)                                # reparameterised: the graph reaches the actor
    logp_pi = squashed_gaussian_logp(u, mean, log_std, low, high)
    a_pi = squash(u, low, high)
    actor_loss, _ = sac_actor_loss(q1(obs, a_pi), q2(obs, a_pi), logp_pi, log_alpha.exp())
    temperature_loss, _ = sac_temperature_loss(log_alpha, logp_pi, target_entropy=-D)
    # each loss steps its own optimiser: the actor loss also reaches the critics' parameters through Q(s, a_pi).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from menger.losses.masking import check_alike, check_mask, cut_bootstrap, keep_masked, masked_mean

LOG_2 = math.log(2.0)


def _alike(**tensors: Tensor | None) -> None:
    check_alike("SAC's per-item inputs are [B] (one entry per replay item)", floating=True, **tensors)


def _constant(alpha: Tensor | float, like: Tensor) -> Tensor:
    """The temperature as data: a detached scalar of like's dtype (the losses never train it)."""
    if isinstance(alpha, (int, float)) and not alpha >= 0:
        raise ValueError(f"alpha={alpha} must be >= 0; pass log_alpha.exp() of the learned temperature.")
    return torch.as_tensor(alpha, dtype=like.dtype, device=like.device).detach()


@torch.no_grad()
def sac_critic_targets(
    rewards: Tensor,
    discounts: Tensor,
    next_q1_target: Tensor,
    next_q2_target: Tensor,
    next_logp: Tensor,
    alpha: Tensor | float,
) -> Tensor:
    """y = r + discounts * (min(Q1_target(s', a'), Q2_target(s', a')) - alpha log pi(a'|s')), a' ~ pi(.|s').

    The soft Bellman backup onto the soft value V(s') = E[Q(s', a') - alpha log pi(a'|s')] of the second paper
    (no separate value network, unlike the first), with the minimum of the twin target critics.
    discounts = gamma * (1 - done), or an n-step item's discount product (then rewards is its reward sum and
    the entropy bonus of the intermediate steps is left out, as is usual). Where discounts is 0 the bootstrap
    is exactly 0. All [B]; a target: no gradient flows.
    """
    _alike(
        rewards=rewards, discounts=discounts, next_q1_target=next_q1_target, next_q2_target=next_q2_target,
        next_logp=next_logp,
    )
    soft_next_value = torch.minimum(next_q1_target, next_q2_target) - _constant(alpha, rewards) * next_logp
    return rewards + cut_bootstrap(discounts, soft_next_value)


def sac_critic_loss(
    q1: Tensor,
    q2: Tensor,
    rewards: Tensor,
    discounts: Tensor,
    next_q1_target: Tensor,
    next_q2_target: Tensor,
    next_logp: Tensor,
    alpha: Tensor | float,
    weights: Tensor | None = None,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """J_Q = mean over the mask of w_i [0.5 (Q1(s, a) - y)^2 + 0.5 (Q2(s, a) - y)^2], y from sac_critic_targets.

    q1, q2 [B] are the two critics at the replayed (s, a); weights [B] optional importance weights. y is a
    constant (target critics, next log-probabilities, alpha and rewards get no gradient): gradients flow into
    q1 and q2 only. Stats (detached scalars): critic_loss, q1, q2, target (means).
    """
    _alike(q1=q1, q2=q2, rewards=rewards, weights=weights)
    if mask is not None:
        check_mask(mask, q1)
    targets = sac_critic_targets(rewards, discounts, next_q1_target, next_q2_target, next_logp, alpha)
    targets = keep_masked(targets, mask)
    q1, q2 = keep_masked(q1, mask), keep_masked(q2, mask)
    weights = torch.ones_like(targets) if weights is None else keep_masked(weights.detach(), mask)

    per_item = 0.5 * (q1 - targets) ** 2 + 0.5 * (q2 - targets) ** 2
    critic_loss = masked_mean(weights * per_item, mask)
    with torch.no_grad():
        stats = {
            "critic_loss": critic_loss.detach(),
            "q1": masked_mean(q1, mask),
            "q2": masked_mean(q2, mask),
            "target": masked_mean(targets, mask),
        }
    return critic_loss, stats


def sac_actor_loss(
    q1_pi: Tensor, q2_pi: Tensor, logp_pi: Tensor, alpha: Tensor | float, mask: Tensor | None = None
) -> tuple[Tensor, dict[str, Tensor]]:
    """J_pi = mean over the mask of alpha log pi(a~|s) - min(Q1(s, a~), Q2(s, a~)), a~ = squash(mean + std * noise).

    Eq. 12 of the first paper, with alpha and the twin critics' minimum of the second. q1_pi, q2_pi, logp_pi [B]
    must carry the graph of the reparameterised action, which is how the gradient reaches the actor; alpha is
    a constant. Stats: actor_loss, entropy (-mean log pi), q_pi (mean of the min).
    """
    _alike(q1_pi=q1_pi, q2_pi=q2_pi, logp_pi=logp_pi)
    if mask is not None:
        check_mask(mask, q1_pi)
    q1_pi, q2_pi, logp_pi = (keep_masked(x, mask) for x in (q1_pi, q2_pi, logp_pi))
    q_pi = torch.minimum(q1_pi, q2_pi)
    actor_loss = masked_mean(_constant(alpha, logp_pi) * logp_pi - q_pi, mask)
    with torch.no_grad():
        stats = {
            "actor_loss": actor_loss.detach(),
            "entropy": -masked_mean(logp_pi, mask),
            "q_pi": masked_mean(q_pi, mask),
        }
    return actor_loss, stats


def sac_temperature_loss(
    log_alpha: Tensor, logp_pi: Tensor, target_entropy: float, mask: Tensor | None = None
) -> tuple[Tensor, dict[str, Tensor]]:
    """J(alpha) = mean over the mask of -alpha (log pi(a~|s) + target_entropy), alpha = exp(log_alpha).

    The second paper's temperature objective (section 5), in alpha as written there (some code bases use
    -log_alpha (...) instead: the same sign of gradient, divided by alpha). Learning log_alpha keeps alpha > 0.
    The gradient -alpha (mean log pi + target_entropy) raises alpha while the policy's entropy -mean log pi is
    below target_entropy (the paper's heuristic is -dim(action)) and lowers it above. logp_pi [B] is data here:
    the temperature loss never moves the actor. Stats: temperature_loss, alpha, entropy.
    """
    if log_alpha.dim() != 0:
        raise ValueError(f"log_alpha has shape {tuple(log_alpha.shape)}; expected a scalar, the learned log alpha.")
    _alike(logp_pi=logp_pi)
    alpha = log_alpha.exp()
    temperature_loss = -alpha * masked_mean(logp_pi.detach() + target_entropy, mask)
    with torch.no_grad():
        stats = {
            "temperature_loss": temperature_loss.detach(),
            "alpha": alpha.detach(),
            "entropy": -masked_mean(logp_pi.detach(), mask),
        }
    return temperature_loss, stats


def _bounds(low: Tensor | float, high: Tensor | float, like: Tensor) -> tuple[Tensor, Tensor]:
    low = torch.as_tensor(low, dtype=like.dtype, device=like.device)
    high = torch.as_tensor(high, dtype=like.dtype, device=like.device)
    if not bool((high > low).all()):
        raise ValueError(f"the action bounds need high > low in every dimension; got low={low}, high={high}.")
    return low, high


def squash(pre_tanh_action: Tensor, low: Tensor | float = -1.0, high: Tensor | float = 1.0) -> Tensor:
    """a = low + (high - low) (tanh(u) + 1) / 2: a Gaussian sample u [..., D] squashed into the box [low, high]."""
    low, high = _bounds(low, high, pre_tanh_action)
    return low + (high - low) * (torch.tanh(pre_tanh_action) + 1.0) / 2.0


def squashed_gaussian_logp(
    pre_tanh_action: Tensor,
    mean: Tensor,
    log_std: Tensor,
    low: Tensor | float = -1.0,
    high: Tensor | float = 1.0,
) -> Tensor:
    """log pi(a|s) of a = squash(u, low, high), u ~ N(mean, exp(log_std)^2) diagonal: all [..., D] -> [...].

    Change of variables (first paper, appendix C, eq. 21, plus the affine map onto the box):
    log pi(a|s) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) - log((high_i - low_i) / 2)],
    with log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): the same number, but finite where tanh(u)
    rounds to +-1 (|u| > 9 in float32), where the direct form is log(0) = -inf. low, high are floats or [D].
    Pass the u the action was made from, not atanh of a clipped action. Differentiable in all three tensors.
    """
    if not (pre_tanh_action.shape == mean.shape == log_std.shape) or pre_tanh_action.dim() == 0:
        raise ValueError(
            f"pre_tanh_action, mean and log_std have shapes {tuple(pre_tanh_action.shape)}, {tuple(mean.shape)}, "
            f"{tuple(log_std.shape)}; expected the same [..., D], the action dimensions last."
        )
    low, high = _bounds(low, high, pre_tanh_action)
    standardised = (pre_tanh_action - mean) * torch.exp(-log_std)
    gaussian_logp = -0.5 * standardised**2 - log_std - 0.5 * math.log(2.0 * math.pi)
    log_tanh_jacobian = 2.0 * (LOG_2 - pre_tanh_action - torch.nn.functional.softplus(-2.0 * pre_tanh_action))
    log_box_jacobian = torch.log((high - low) / 2.0)
    return (gaussian_logp - log_tanh_jacobian - log_box_jacobian).sum(dim=-1)
