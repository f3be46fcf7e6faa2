"""PPO's clipped objective (Schulman et al. 2017, "Proximal Policy Optimization Algorithms", eq. 7 and 9)."""

from __future__ import annotations

import torch
from torch import Tensor

from menger.losses.masking import check_alike, keep_masked, masked_mean, masked_normalize


def clipped_surrogate(ratio: Tensor, advantages: Tensor, clip: float) -> Tensor:
    """Per-sample -min(ratio * A, clip(ratio, 1 - clip, 1 + clip) * A): the pessimistic bound of eq. 7.

    Once the ratio has left the trust region in the direction A favours, the clipped term wins and the
    sample's gradient is exactly 0: the update stops pushing it further.
    """
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    return -torch.minimum(unclipped, clipped)


def value_error(new_values: Tensor, old_values: Tensor | None, returns: Tensor, value_clip: float | None) -> Tensor:
    """Per-sample 0.5 (V - R)^2; with value_clip, the larger of that and the error of V kept within
    value_clip of the old value (the PPO2 baselines variant), so a value step is limited like a policy step."""
    error = 0.5 * (new_values - returns) ** 2
    if value_clip is None:
        return error
    if old_values is None:
        raise ValueError("value_clip needs old_values, the values predicted when the samples were collected.")
    clipped_values = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
    return torch.maximum(error, 0.5 * (clipped_values - returns) ** 2)


def _check_coefficients(clip: float, value_clip: float | None) -> None:
    if not 0.0 < clip < 1.0:
        raise ValueError(f"clip={clip} must be in (0, 1); the ratio is kept within [1 - clip, 1 + clip], e.g. 0.2.")
    if value_clip is not None and not value_clip > 0:
        raise ValueError(f"value_clip={value_clip} must be > 0, or None to train the value without clipping.")


def ppo_loss(
    new_logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    new_values: Tensor,
    old_values: Tensor | None,
    returns: Tensor,
    entropy: Tensor,
    mask: Tensor | None = None,
    *,
    clip: float = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 0.0,
    value_clip: float | None = None,
    normalize_advantages: bool = True,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate (Schulman et al. 2017), value loss 0.5*(V-R)^2 (clipped variant when value_clip is set),
    entropy bonus. Inputs are flat [N] or [T,B] alike. Stats (detached scalars): policy_loss, value_loss, entropy,
    approx_kl ((ratio-1) - log ratio, mean), clip_fraction.

    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy, each a mean over the masked
    entries. Gradients flow into new_logp, new_values and entropy only; old_logp, advantages, old_values and
    returns are data. Masked entries are replaced before use, so even a NaN there changes nothing.
    old_values may be None when value_clip is None.
    """
    check_alike(
        "PPO inputs are one entry per sample, flat [N] or [T, B]",
        new_logp=new_logp, old_logp=old_logp, advantages=advantages, new_values=new_values,
        old_values=old_values, returns=returns, entropy=entropy, mask=mask,
    )
    _check_coefficients(clip, value_clip)
    new_logp, new_values, entropy = (keep_masked(x, mask) for x in (new_logp, new_values, entropy))
    old_logp, advantages, returns = (keep_masked(x.detach(), mask) for x in (old_logp, advantages, returns))
    if old_values is not None:
        old_values = keep_masked(old_values.detach(), mask)
    if normalize_advantages:
        advantages = masked_normalize(advantages, mask)

    log_ratio = new_logp - old_logp
    ratio = log_ratio.exp()
    policy_loss = masked_mean(clipped_surrogate(ratio, advantages, clip), mask)
    value_loss = masked_mean(value_error(new_values, old_values, returns, value_clip), mask)
    mean_entropy = masked_mean(entropy, mask)
    loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy

    with torch.no_grad():
        stats = {
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": mean_entropy.detach(),
            "approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),
            "clip_fraction": masked_mean(((ratio - 1.0).abs() > clip).to(ratio.dtype), mask),
        }
    return loss, stats
